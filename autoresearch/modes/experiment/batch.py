"""Experiment batches (`experiment.parallel: k`): measuring a candidate, and the decide
step that keeps the best candidate beating the incumbent.

An iteration of a batch is k `experiment_candidate` jobs (stages.propose in each
candidate's worktree), k `experiment_measure` jobs (`measure`, with the spec's
resources), and the decide checkpoint (`decide`). Each candidate is judged against the
incumbent as a single proposal is (stages.judge_proposal); among those it keeps, the best
value wins and the others are recorded as discarded, their patches kept.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from autoresearch.agents.backends.base import StageFailed
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git, tamper
from autoresearch.safety.patch import apply_patch
from autoresearch.safety.protect import ProtectedChange
from autoresearch.session.files import read_json, write_json
from autoresearch.views import journal

from . import holdout, paired, preserve, stages
from .candidates import CandidateEnv, candidate_ids, ensure_worktree
from .log import fmt
from .policy import (
    DISCARDED,
    KEPT,
    pick,
    representative,
)
from .program import ExperimentConfig


def measure(env: CandidateEnv, out: Path) -> dict[str, Any]:
    """Measure and guard one candidate in its own worktree; measurement.json.

    The worktree is reset to the incumbent before and after, so a kill and a rerun
    measure the same thing; the result is the job's output, read only by decide.
    """
    cfg = stages.config_of(env.spec)
    cfg = stages.within(cfg, stages.time_left(env.layout, cfg))  # none outlasts max_duration
    proposal = env.stage_record("proposal")
    start = proposal["start_commit"]
    began = time.time()
    result: dict[str, Any] = {
        "candidate": env.candidate,
        "start_commit": start,
        "patch_sha256": proposal["patch_sha256"],
        # A flagged change the spec does not allow is refused unmeasured (tamper.py).
        "measured": proposal["outcome"] == "proposed"
        and not tamper.refusal(proposal.get("flags") or [], cfg.allow_flagged),
    }
    if result["measured"]:
        ensure_worktree(env, start)
        env.pristine(start)
        result |= stages.apply_and_measure(env, cfg, proposal)
        if changed := env.protection.changed(env.worktree):  # the run rewrote them
            result["error"] = ProtectedChange(changed).reason
        git.reset_to(env.worktree, start)
    result["duration_seconds"] = round(time.time() - began, 3)
    write_json(out, result)
    what = result.get("error") or result.get("value", proposal["outcome"])
    env.log(f"measure {env.label}: {what}")
    return result


def decide(env: StageEnv) -> dict[str, Any]:
    """The iteration's record: the single proposal's, or the batch's."""
    cfg = stages.config_of(env.spec)
    if cfg.parallel == 1:
        rec = stages.decide(env)
    else:
        rec = decide_batch(env, cfg)
    if cfg.preserve_on_fail:
        preserve.preserve(env, rec, stages.setup_state(env.layout)["run_id"])
    return rec


def decide_batch(env: StageEnv, cfg: ExperimentConfig) -> dict[str, Any]:
    """Judge every candidate against the incumbent, commit the best that beats it, and
    record the others as discarded; the iteration's record holds every candidate."""
    key = stages.key_of(cfg)
    cfg = stages.within(cfg, stages.time_left(env.layout, cfg))
    best = dict(stages.incumbent_before(env))
    start = best["commit"]
    env.pristine(start)
    began = time.time()
    # The sequential test measures the incumbent next to each candidate: nothing to redo.
    remeasured = None
    if cfg.sequential is None:
        remeasured = stages.remeasure_incumbent(
            env, cfg, best, start, env.cycle_dir / "measurements.json"
        )
    batch = [judge_candidate(env, cfg, c, best, start) for c in candidate_ids(cfg.parallel)]
    winner = paired.pick(batch) if cfg.sequential is not None else pick(batch, cfg.direction)
    for c in batch:
        if c is not winner and c["status"] == KEPT:
            c["status"] = DISCARDED
            c["verdict"] += (
                f"; {winner['candidate']} did better ({fmt(winner['metric_value'])})"
                if winner
                else ""
            )
    end, new_best = start, best
    if winner is not None:
        patch = env.layout.candidate(env.cycle, winner["candidate"]) / "proposal.patch"
        refused = apply_patch(env.worktree, patch)
        if refused is not None:
            raise StageFailed(
                f"candidate {winner['candidate']}'s patch, measured on {start[:12]}, does not "
                f"apply there in the session worktree: {refused}"
            )
        end, new_best, refused = stages.commit_kept(env, winner, key, start, best)
        if refused:  # the others were measured against the incumbent: it stays
            winner["status"], winner["verdict"] = DISCARDED, refused
            winner = None
    git.reset_to(env.worktree, end)
    stamp = journal.now()
    for c in batch:
        c.update(
            end_commit=end if c is winner else start,
            files_changed=c["files"] if c is winner else [],
            tests_pass=c["guard_ok"] is not False,
            timestamp=stamp,
        )
    rep = winner or representative(batch, cfg.direction)
    proposal_stop = next(filter(None, [c.pop("session_stop", None) for c in batch]), None)
    rec = {k: v for k, v in rep.items() if k not in ("end_commit", "timestamp", "duration_seconds")}
    rec.update(
        iteration=env.cycle,
        cycle=env.cycle,
        start_commit=start,
        remeasured=remeasured,
        candidates=batch,
    )
    return stages.close_record(rec, end, new_best, proposal_stop, began)


def judge_candidate(
    env: StageEnv,
    cfg: ExperimentConfig,
    candidate: str,
    best: dict[str, Any],
    start: str,
) -> dict[str, Any]:
    """One candidate's record: its proposal, its measurement, the keep rule's verdict."""
    folder = env.layout.candidate(env.cycle, candidate)
    proposal = read_json(folder / "proposal.json")
    rec = stages.new_record(env.cycle, proposal)
    rec.update(candidate=candidate, session_stop=proposal.get("stop"))

    patch = folder / "proposal.patch"

    def measured() -> dict[str, Any]:  # by the candidate's measure job
        result = read_json(folder / "measurement.json")
        rec["duration_seconds"] = result.get("duration_seconds", 0)
        return result

    def held_out() -> dict[str, Any]:  # in the session worktree, the patch applied there
        return holdout.measure_patch(cfg, env.worktree, patch, start, env.spec.secrets, env.jail)

    cache = env.cycle_dir / "measurements.json"
    status, verdict = stages.judge_proposal(
        cfg, rec, proposal, best, start, measured, held_out, cache
    )
    rec.update(status=status, verdict=verdict, patch=str(patch.relative_to(env.layout.root)))
    rec.setdefault("duration_seconds", 0)
    return rec

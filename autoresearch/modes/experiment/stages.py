"""Experiment mode's two stages: `propose` (the agent) and `decide` (no model).

- propose: starts from the last kept commit, makes one change and hands it in with
  finish_experiment; the harness refuses duplicates of discarded ideas, checks syntax
  (one retry), saves the change as `proposal.patch` and leaves the worktree clean.
- decide: applies the patch to the same commit, measures, runs the guard, and either
  commits (`autoresearch: exp N -- metric=new (was old) -- hypothesis`) or resets; then
  the mode's stop rules, the logs (and the run folder, runs.py), and decision.json last.

Neither job trusts the worktree it finds: both reset to their start commit first, and a
measurement is cached by patch hash, so kill -9 and a plain rerun gives the same history.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch.agents.agent_run import run_agent, stop_reason_of
from autoresearch.agents.backends.base import StageRun, ToolResult, Usage
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.loop import Status
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context
from autoresearch.gate.keep import commit_change
from autoresearch.gate.testrun import TestRun
from autoresearch.measure import metrics
from autoresearch.safety import git, tamper
from autoresearch.safety.jail import Jail
from autoresearch.safety.patch import apply_patch, changed_of, make_patch
from autoresearch.session.files import (
    cached_json,
    read_json,
    read_text_once,
    write_json,
    write_text,
)
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal

from . import candidates, holdout, paired, pool, preserve, runs
from . import guard as guards
from . import log as logs
from . import summary as run_summary
from .log import fmt
from .policy import (
    CRASH,
    DISCARDED,
    GUARD_FAILED,
    KEPT,
    NO_CHANGE,
    SYNTAX_ERROR,
    Sample,
    find_duplicate,
    improvement,
    judge,
    ref,
    retry_offers,
    syntax_problems,
)
from .program import ExperimentConfig, from_frozen, research_text

HISTORY_SHOWN = 10
RETRIES_SHOWN = 5
# The least a stage is given when max_duration is (nearly) spent: a zero timeout would
# report a measurement that never started as "timed out after 0s".
MIN_LEFT_S = 1.0


def config_of(values: dict[str, Any]) -> ExperimentConfig:
    return from_frozen(values["experiment"])


def key_of(cfg: ExperimentConfig) -> str:
    return cfg.key or "metric"


def time_left(layout: SessionLayout, cfg: ExperimentConfig) -> float | None:
    """Seconds left of `max_duration` (at least MIN_LEFT_S); None without one. The limit is
    checked between iterations, so each stage is handed what is left as its own deadline."""
    if cfg.max_duration_s is None:
        return None
    elapsed = time.time() - setup_state(layout)["started_epoch"]
    return max(MIN_LEFT_S, cfg.max_duration_s - elapsed)


def within(cfg: ExperimentConfig, left: float | None) -> ExperimentConfig:
    """`cfg` with the metric's and the guard's timeouts cut to `left` seconds."""
    if left is None:
        return cfg
    return dataclasses.replace(
        cfg,
        verify_timeout_s=min(cfg.verify_timeout_s, left),
        guard_timeout_s=min(cfg.guard_timeout, left),
    )


def baseline_record(setup: dict[str, Any]) -> dict[str, Any]:
    """Experiment 0: the base commit as measured at setup."""
    b = setup["baseline"]
    held = {"holdout": setup["holdout"]} if setup.get("holdout") else {}
    rec = held | {
        "iteration": 0,
        "timestamp": setup["started_at"],
        "hypothesis": "baseline",
        "change_summary": "",
        "metric_value": b["value"],
        "samples": b["samples"],
        "passed": b["passed"],
        "notes": b.get("notes"),
        "raw": b.get("raw"),
        "baseline_value": None,
        "improved": False,
        "status": Status.BASELINE,
        "verdict": "",
        "error": None,
        "guard_ok": None,
        "start_commit": setup["base_commit"],
        "end_commit": setup["base_commit"],
        "best_value": b["value"],
        "duration_seconds": 0,
    }
    rec["best"] = best_after(rec, setup["base_commit"], 0)
    return rec


# --- reading the loop's state --------------------------------------------------------------


def setup_state(layout: SessionLayout) -> dict[str, Any]:
    return json.loads(read_text_once(layout.experiment_setup))


def records(layout: SessionLayout, upto: int | None = None) -> list[dict[str, Any]]:
    """Experiment 0 and every completed iteration (below `upto` if given), oldest first."""
    out = [baseline_record(setup_state(layout))]
    out += [d for d in journal.load_decisions(layout) if upto is None or d["cycle"] < upto]
    return out


def experiments(layout: SessionLayout, upto: int | None = None) -> list[dict[str, Any]]:
    """Every experiment after the baseline, oldest first: an iteration's own record, or
    each candidate of a batch."""
    return logs.each_experiment(records(layout, upto)[1:])


def final_reason(recs: list[dict[str, Any]]) -> str | None:
    """Why the loop stopped (or is stopping), or None while it runs."""
    return next((r.get("reason") for r in reversed(recs) if r.get("stop")), None)


def incumbent_before(env: StageEnv) -> dict[str, Any]:
    """The best so far when this iteration starts: from the previous decision, never from
    baseline.json (which this iteration may already have rewritten before a kill)."""
    prev = env.previous_decision()
    return prev["best"] if prev else baseline_record(setup_state(env.layout))["best"]


# --- propose ------------------------------------------------------------------------------


def history_rows(recs: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    rows = []
    for r in recs[-HISTORY_SHOWN:]:
        row = {"id": r["iteration"], "status": r["status"], "hypothesis": r["hypothesis"]}
        if r.get("candidate"):
            row["candidate"] = r["candidate"]
        if r.get("retry_of") is not None:
            row["retry_of"] = f"#{r['retry_of']}"
        if r["metric_value"] is not None:
            row[key] = f"{fmt(r['baseline_value'])} -> {fmt(r['metric_value'])}"
        elif r.get("error"):
            row["error"] = r["error"].strip().splitlines()[0][:160]
        rows.append(row)
    return rows


def retry_rows(offers: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The brief's "may be worth retrying now" list: why each was rejected, what changed."""
    rows = []
    for offer in offers[-RETRIES_SHOWN:]:
        rejected, kept = offer["experiment"], offer["kept"]
        why = rejected.get("verdict") or rejected["status"]
        shared = sorted(set(rejected.get("files") or []) & set(kept.get("files_changed") or []))
        rows.append(
            {
                "id": f"#{ref(rejected)}",
                "hypothesis": rejected["hypothesis"],
                "why": f"may be worth retrying now: it was rejected when the best was {key} = "
                f"{fmt(rejected['baseline_value'])} ({why}); since then #{ref(kept)} "
                f'("{kept["hypothesis"]}") changed {", ".join(shared)}',
            }
        )
    return rows


def research_now(env: StageEnv, cfg: ExperimentConfig) -> str:
    """The research prose as it is now: the human's checkout first, then the worktree's copy."""
    target = Path(env.record.target)
    checkout, worktree = cfg.research_file(target), cfg.research_file(env.worktree)
    return research_text(checkout, "", target) or research_text(
        worktree, cfg.research, env.worktree
    )


def propose(env: StageEnv, markdown_out: Path, record_out: Path, patch_out: Path) -> dict:
    """One change from the agent, saved as a patch; the worktree is left at its start.

    `env` is the iteration's, or a candidate's (`candidates.CandidateEnv`) in a batch: then
    the worktree is the candidate's own and the hypothesis is claimed against its siblings'.
    """
    cfg = config_of(env.spec)
    best = incumbent_before(env)
    start = best["commit"]
    candidate = candidates.candidate_of(env)
    if candidate:
        candidates.ensure_worktree(env, start)
        candidates.release_claim(env)
    env.begin(start)
    if env.cycle > 1 and cfg.cooldown_s:
        time.sleep(cfg.cooldown_s)
    key = key_of(cfg)
    past = [holdout.for_agent(r, cfg) for r in experiments(env.layout, upto=env.cycle)]
    discarded = [r for r in past if r["status"] != KEPT]
    offers = retry_offers(past)
    offered = {str(ref(o["experiment"])) for o in offers}
    # The prose is re-read every iteration, so the human can steer a running session by
    # editing program.md (or mission.md) in their checkout (read only, never written).
    research = research_now(env, cfg)
    state: dict[str, Any] = {
        "syntax_errors": [],
        "refused": [],
        "outcome": NO_CHANGE,
        "flags": [],
    }
    # What the evaluator runs or names, for the flags (tamper.py): read at the start commit.
    evaluator = tamper.evaluator_files(
        env.worktree,
        [cfg.command, cfg.guard, cfg.baseline_command],
        list(env.protection.patterns),
        # The file a json_file metric is read from: code that writes it writes the result.
        [cfg.format.split(":", 1)[1]] if cfg.format.startswith("json_file:") else [],
    )
    options = env.toolbox_options()
    options["include"] = list(cfg.scope)
    options["hidden"] = list(cfg.holdout_files)  # read, searched, listed: as if absent
    options["jail"] = holdout.blind(options["jail"], cfg)  # run_tests runs the agent's code
    toolbox = Toolbox("experiment", env.worktree, **options)

    def refuse(hypothesis: str, matches: int | str, text: str, sibling: bool) -> ToolResult:
        git.restore(env.worktree)
        toolbox.written.clear()
        entry = {"hypothesis": hypothesis, "matches": matches}
        state["refused"].append(entry | ({"sibling": True} if sibling else {}))
        return ToolResult(
            f"refused: {text}. The worktree was reset; make a different change and call "
            "finish_experiment again.",
            is_error=True,
        )

    def finish_experiment(hypothesis: str, change_summary: str) -> ToolResult:
        dup = find_duplicate(hypothesis, discarded, cfg.duplicate_threshold)
        retry_of = None
        if dup is not None and str(ref(dup)) in offered:
            retry_of = ref(dup)  # the one retry a later kept change allows
        elif dup is not None:
            return refuse(
                hypothesis,
                ref(dup),
                f'this repeats experiment #{ref(dup)} ("{dup["hypothesis"]}", {dup["status"]})',
                sibling=False,
            )
        files = changed_of(env.worktree, toolbox.written)
        if not files:
            return ToolResult(
                "there is no change in the files in scope to measure; edit a file first",
                is_error=True,
            )
        if candidate:
            taken = candidates.claim(env, hypothesis, cfg.duplicate_threshold)
            if taken is not None:
                return refuse(
                    hypothesis,
                    ref(taken),
                    f"candidate {taken['candidate']} of this iteration already tries this "
                    f'("{taken["hypothesis"]}")',
                    sibling=True,
                )
        problems = syntax_problems(env.worktree, files)
        state.update(
            hypothesis=hypothesis, change_summary=change_summary, files=files, retry_of=retry_of
        )
        if problems and not state["syntax_errors"]:
            state["syntax_errors"].append(problems)
            return ToolResult(
                "syntax check failed; fix it and call finish_experiment again (one retry):\n"
                + "\n".join(problems),
                is_error=True,
            )
        toolbox.mark_finished()
        state["patch"] = make_patch(env.worktree, files)  # kept whatever becomes of it
        flags = tamper.scan(env.worktree, files, start, evaluator)
        state["flags"] = [dataclasses.asdict(f) for f in flags]
        if problems:
            state["syntax_errors"].append(problems)
            state["outcome"] = SYNTAX_ERROR
            git.restore(env.worktree)
            return ToolResult(
                "the syntax check failed again; the change is discarded and logged as "
                "syntax_error:\n" + "\n".join(problems)
            )
        state["outcome"] = "proposed"
        return ToolResult(
            "recorded; after your turn the harness measures the change and runs the guard"
        )

    toolbox.hooks["finish_experiment"] = finish_experiment
    ctx = base_context(env, "experiment")
    ctx.scope_text = ", ".join(cfg.scope)
    ctx.experiment = {
        "goal": cfg.goal,
        "direction_prose": research,
        "best": f"{key} = {fmt(best['value'])} (set by experiment {logs.best_name(best)}; "
        f"{cfg.direction})",
        "history": history_rows(past, key),
        "retry": retry_rows(offers, key),
        "scope_files": list(cfg.scope),
    }
    extra_task, extra_data = "", None
    if candidate:
        extra_task = (
            f"\nYou are candidate {candidate} of {cfg.parallel}, proposed in parallel from the "
            "same commit: choose an idea your siblings are unlikely to pick. A hypothesis a "
            "sibling has already handed in is refused.\n"
        )
        extra_data = {"candidate": candidate}
    run: StageRun = run_agent(
        env,
        "experiment",
        ctx,
        toolbox,
        extra_task=extra_task,
        extra_data=extra_data,
        deadline_s=time_left(env.layout, cfg),
    )
    patch = state.get("patch", "")
    git.reset_to(env.worktree, start)  # the change lives in proposal.patch until decide
    write_text(patch_out, patch)
    record = {
        "stage": "propose",
        "cycle": env.cycle,
        **({"candidate": candidate} if candidate else {}),
        "start_commit": start,
        "outcome": state["outcome"],
        "hypothesis": state.get("hypothesis") or "(no change handed in)",
        "change_summary": state.get("change_summary", ""),
        "files": state.get("files", []),
        "retry_of": state.get("retry_of"),
        "patch_sha256": hashlib.sha256(patch.encode()).hexdigest(),
        "syntax_errors": state["syntax_errors"],
        "refused_duplicates": state["refused"],
        "flags": state["flags"],
        "research_sha256": hashlib.sha256(research.encode()).hexdigest(),
        "stop": stop_reason_of(run),
        "usage": run.usage.__dict__,
    }
    title = f"iteration {env.cycle}" + (f", candidate {candidate}" if candidate else "")
    lines = [
        f"# Proposal: {title}",
        "",
        f"- Start commit: {start}",
        f"- Outcome: {record['outcome']}",
        f"- Hypothesis: {record['hypothesis']}",
        f"- Change: {record['change_summary'] or '—'}",
        f"- Files: {', '.join(record['files']) or 'none'}",
    ]
    if record["retry_of"] is not None:
        lines.append(f"- Retry of #{record['retry_of']} (a later kept change touched its files)")
    for refused in state["refused"]:
        whose = "a sibling's claim" if refused.get("sibling") else "a duplicate"
        lines.append(f"- Refused as {whose} of #{refused['matches']}: {refused['hypothesis']}")
    for problems in state["syntax_errors"]:
        lines.append("- Syntax check failed: " + "; ".join(problems))
    for flag in state["flags"]:
        lines.append("- Flagged: " + tamper.Flag(**flag).describe())
    if patch:
        lines += ["", "```diff", patch.rstrip("\n"), "```"]
    write_text(markdown_out, "\n".join(lines) + "\n")
    write_json(record_out, record)
    env.log(f"propose {title}: {record['outcome']}: {record['hypothesis']}")
    return record


# --- decide -------------------------------------------------------------------------------


def _measure_record(
    cfg: ExperimentConfig, cwd: Path, secrets, jail: Jail | None, command: str | None = None
) -> dict[str, Any]:
    """The metric (or `command`) measured in `cwd`, the holdout's files hidden from it:
    {"value", "samples", "passed", "notes", "raw"}, or {"error"}."""
    try:
        m = metrics.measure(
            command or cfg.command,
            cwd,
            cfg.format,
            cfg.key,
            repeats=cfg.repeats,
            timeout_s=cfg.verify_timeout_s,
            secrets=secrets,
            jail=holdout.blind(jail, cfg),
        )
    except metrics.MetricError as err:
        return {"error": str(err)}
    return {
        "value": m.value,
        "samples": m.samples,
        "passed": m.passed,
        "notes": m.notes,
        "raw": m.raw,
    }


def guard_reference(env: StageEnv) -> TestRun:
    """The test run the default guard holds a change to: the incumbent's, from the last
    kept experiment that recorded one, else setup's run of the base commit."""
    for rec in reversed(experiments(env.layout, upto=env.cycle)):
        if rec.get("status") == KEPT:
            if rec.get("guard_tests"):
                return TestRun.from_record(rec["guard_tests"])
            break  # kept without a test run of its tree: only the base's is known
    return TestRun.from_record(env.record.baseline)


def decide(env: StageEnv) -> dict[str, Any]:
    """Measure and guard the proposal, then keep it (commit) or reset. The iteration's
    record, before the mode's stop rules."""
    cfg = config_of(env.spec)
    cfg = within(cfg, time_left(env.layout, cfg))  # no measurement outlasts max_duration
    proposal = env.stage_record("proposal")
    best = dict(incumbent_before(env))
    start = proposal["start_commit"]
    env.pristine(start)
    cache = env.cycle_dir / "measurements.json"
    began = time.time()
    rec = new_record(env.cycle, proposal)
    rec["start_commit"] = start

    def measured() -> dict[str, Any]:
        # The sequential test measures the incumbent next to the change: nothing to redo.
        if cfg.sequential is None:
            rec["remeasured"] = remeasure_incumbent(env, cfg, best, start, cache)
        return apply_and_measure(env, cfg, proposal, cache)

    def held_out() -> dict[str, Any]:  # the change is applied here
        return holdout.measure(cfg, env.worktree, env.spec.secrets, env.jail)

    status, verdict = judge_proposal(cfg, rec, proposal, best, start, measured, held_out, cache)
    end = start
    if status == KEPT:
        end, best, refused = commit_kept(env, rec, key_of(cfg), start, best)
        if refused:
            status, verdict = DISCARDED, refused
    # Discard = reset to the last kept commit, and clean; after a holdout run (the agent's
    # code, seeing the holdout's files) git-ignored files too, or the next propose reads them.
    git.reset_to(env.worktree, end, ignored=bool(cfg.holdout))
    rec.update(status=status, verdict=verdict)
    return close_record(rec, end, best, proposal.get("stop"), began)


def judge_proposal(
    cfg: ExperimentConfig,
    rec: dict[str, Any],
    proposal: dict[str, Any],
    best: dict[str, Any],
    start: str,
    measured: Callable[[], dict[str, Any]],
    held_out: Callable[[], dict[str, Any]],
    cache: Path,
) -> tuple[str, str]:
    """(status, why) of one proposal against the incumbent `best` at `start`; fills `rec`.
    The same steps for the single proposal and each candidate of a batch: what propose
    handed in, the measurement (`measured`, taken only for a change worth a metric run),
    the keep rule, the flags and max_gain, the holdout (`held_out`, cached in `cache`)."""
    status, verdict = proposal["outcome"], ""
    if status == SYNTAX_ERROR:
        rec["error"] = "syntax_error: " + "; ".join(proposal["syntax_errors"][-1])
    elif status == NO_CHANGE:
        verdict = "the agent handed in no change"
    elif proposal["start_commit"] != start:  # a batch's candidate from an older incumbent
        status = CRASH
        rec["error"] = (
            f"proposed from {proposal['start_commit'][:12]}, but the incumbent is {start[:12]}"
        )
    elif refused := tamper.refusal(proposal.get("flags") or [], cfg.allow_flagged):
        status, verdict = DISCARDED, refused  # no metric run spent on it
    elif cfg.sequential is not None:
        status, verdict = paired.judge(measured(), rec, cfg.guard)
    else:
        status, verdict = judge_measured(cfg, measured(), best, rec)
    # Against the incumbent as measured in this comparison (the paired runs), if it was.
    rec["baseline_value"] = rec.get("incumbent_value", best["value"])
    status, verdict = check_flags(cfg, rec, proposal, status, verdict)
    key = f"holdout:{proposal['patch_sha256']}:{start}"
    return holdout.judge(cfg, rec, best, status, verdict, lambda: cached_json(cache, key, held_out))


def check_flags(
    cfg: ExperimentConfig, rec: dict[str, Any], proposal: dict[str, Any], status: str, verdict: str
) -> tuple[str, str]:
    """A change about to be kept, checked against its flags (tamper.py) and max_gain: not
    kept when flagged, unless experiment.allow_flagged. Fills `rec["flags"]`."""
    flags = list(proposal.get("flags") or [])
    limit = cfg.max_gain_share()
    if status == KEPT and limit is not None and rec.get("metric_value") is not None:
        gain = improvement(rec["baseline_value"], rec["metric_value"], cfg.direction)
        if gain > limit:
            detail = f"improves by {gain:.1%}, more than max_gain {cfg.max_gain}"
            flags.append(dataclasses.asdict(tamper.Flag("gain", key_of(cfg), None, detail)))
    rec["flags"] = flags
    if status != KEPT or not flags:
        return status, verdict
    refused = tamper.refusal(flags, cfg.allow_flagged)
    if refused:
        return DISCARDED, f"{refused}; the metric said: {verdict}"
    return status, f"{verdict}; kept although flagged (allow_flagged): {tamper.summary(flags)}"


def measure_paired(env: StageEnv, cfg: ExperimentConfig, start: str) -> dict[str, Any]:
    """The sequential comparison of the change applied in `env`'s worktree against the
    incumbent commit `start`, measured in a worktree of its own (paired.py)."""
    design = cfg.sequential_design()
    assert design is not None  # the caller checked experiment.sequential
    inc = paired.incumbent_env(env, start)
    left = time_left(env.layout, cfg)
    deadline = None if left is None else time.time() + left
    secrets = env.spec.secrets
    machine = pool.machine_class()
    earlier = pool.earlier_runs(records(env.layout, upto=env.cycle)[1:], start, machine)
    try:
        return paired.compare(
            design,
            lambda: guards.run(cfg, env.worktree, secrets, env.jail, guard_reference(env), start),
            paired.metric_run(cfg, env.worktree, secrets, env.jail, deadline),
            paired.metric_run(cfg, inc.worktree, secrets, inc.jail, deadline),
            earlier,
            machine,
        )
    finally:
        inc.begin(start)  # the runs may leave files behind


def new_record(iteration: int, proposal: dict[str, Any]) -> dict[str, Any]:
    """An experiment's record before it is measured: what was proposed."""
    return {
        "iteration": iteration,
        "cycle": iteration,
        "hypothesis": proposal["hypothesis"],
        "change_summary": proposal["change_summary"],
        "metric_value": None,
        "samples": [],
        "passed": None,
        "notes": None,
        "raw": None,
        "error": None,
        "guard_ok": None,
        "p_value": None,
        "improved": False,  # whether the metric beat the incumbent, guard aside
        "remeasured": None,
        "files": proposal.get("files", []),
        "retry_of": proposal.get("retry_of"),
    }


def remeasure_incumbent(
    env: StageEnv, cfg: ExperimentConfig, best: dict[str, Any], start: str, cache: Path
) -> float | None:
    """Every `remeasure_every` iterations the incumbent is measured afresh: its numbers
    drift (and a lucky keep flatters them). Updates `best`; the new value, or None."""
    if not (cfg.remeasure_every and env.cycle % cfg.remeasure_every == 0):
        return None
    again = cached_json(
        cache,
        f"incumbent:{start}",
        lambda: _measure_record(cfg, env.worktree, env.spec.secrets, env.jail),
    )
    env.pristine(start)
    if "error" in again:
        return None
    best.update(value=again["value"], samples=again["samples"], passed=again["passed"])
    return again["value"]


def commit_kept(
    env: StageEnv, rec: dict[str, Any], key: str, start: str, best: dict[str, Any]
) -> tuple[str, dict[str, Any], str | None]:
    """Commit the change applied in the session worktree at `start`, through the protection
    (one proposal's or a batch's winner): the new incumbent's commit and its `best` record,
    or `start`, `best` unchanged and why the protection refused the commit."""
    which = f" ({rec['candidate']})" if rec.get("candidate") else ""
    message = (
        f"autoresearch: exp {env.cycle}{which} -- {key}={fmt(rec['metric_value'])} "
        f"(was {fmt(rec['baseline_value'])}) -- " + " ".join(rec["hypothesis"].split())[:120]
    )
    handed = commit_change(env, message)
    if handed.protected:
        return start, best, handed.protected
    end = handed.sha or start
    return end, best_after(rec, end, env.cycle), None


def best_after(rec: dict[str, Any], commit: str, iteration: int) -> dict[str, Any]:
    best = {
        "value": rec["metric_value"],
        "samples": rec["samples"],
        "passed": rec["passed"],
        "commit": commit,
        "experiment_id": iteration,
    }
    if rec.get("candidate"):
        best["candidate"] = rec["candidate"]
    return holdout.carry(best, rec)


def close_record(
    rec: dict[str, Any], end: str, best: dict[str, Any], session_stop: str | None, began: float
) -> dict[str, Any]:
    """The fields every iteration record ends with, and those the shared summary reads."""
    rec.update(
        end_commit=end,
        best=best,
        best_value=best["value"],
        files_changed=rec["files"] if rec["status"] == KEPT else [],
        duration_seconds=round(time.time() - began, 3),
        timestamp=journal.now(),
        # Keys the shared session summary reads (journal.write_summary).
        tests_pass=rec["guard_ok"] is not False,
        fixed=[],
        skipped=[],
        refactor_changes=0,
        open_issues=[],
        session_stop=session_stop,
    )
    return rec


def write_iteration(env: StageEnv, rec: dict[str, Any], results_out: Path) -> None:
    """The iteration's logs, its row in results.tsv and evaluation.md."""
    cfg = config_of(env.spec)
    key = key_of(cfg)
    all_recs = records(env.layout, upto=env.cycle) + [rec]
    write_iteration_logs(env.layout, cfg, rec, all_recs, setup_state(env.layout)["run_id"])
    batch = rec.get("candidates")
    if batch:
        rows = [
            results_row(
                c, read_json(env.layout.candidate(env.cycle, c["candidate"]) / "proposal.json"), key
            )
            for c in batch
        ]
    else:
        rows = [results_row(rec, env.stage_record("proposal"), key)]
    journal.upsert_results(env.layout, "", f"{env.cycle:03d}", rows)
    write_text(results_out, render_evaluation(rec, key))


def apply_and_measure(
    env: StageEnv, cfg: ExperimentConfig, proposal: dict[str, Any], cache: Path | None = None
) -> dict[str, Any]:
    """Apply the proposal's patch in `env`'s worktree (at the proposal's start commit) and
    measure it the spec's way: the sequential comparison with the incumbent, or the metric
    and the guard (held to guard_reference). The change stays applied for the caller to
    commit or reset. With a `cache`, a measurement taken before a kill is reused."""
    refused = apply_patch(env.worktree, env.cycle_dir / "proposal.patch")
    if refused is not None:
        start = proposal["start_commit"][:12]
        return {"error": f"the proposal's patch does not apply to {start}: {refused}"}
    secrets = env.spec.secrets

    def produce() -> dict[str, Any]:
        if cfg.sequential is not None:
            return measure_paired(env, cfg, proposal["start_commit"])
        measured = _measure_record(cfg, env.worktree, secrets, env.jail)
        if "error" in measured:  # a crash whatever the guard says: do not spend a guard run
            return measured | {"guard": {"ok": None}}
        reference = guard_reference(env)
        start = proposal["start_commit"]
        guard = guards.run(cfg, env.worktree, secrets, env.jail, reference, start)
        return measured | {"guard": guard}

    if cache is None:
        return produce()
    return cached_json(
        cache, f"candidate:{proposal['patch_sha256']}:{proposal['start_commit']}", produce
    )


def judge_measured(
    cfg: ExperimentConfig,
    measured: dict[str, Any],
    best: dict[str, Any],
    rec: dict[str, Any],
) -> tuple[str, str]:
    """(status, why) of a measured proposal against the incumbent `best`; fills `rec`."""
    if "error" in measured:
        rec["error"] = measured["error"]
        return CRASH, ""
    rec.update(value_fields(measured))
    guard = measured["guard"]
    rec["guard_ok"] = guard["ok"]
    if guard.get("tests"):  # the default guard's run: what a later change is held to
        rec["guard_tests"] = guard["tests"]
    # The metric is judged whatever the guard says: `improved` records whether the change
    # beat the incumbent, so a guard-failed improvement is not logged as no improvement.
    verdict = judge(
        Sample(measured["value"], measured["samples"], measured["passed"]),
        Sample(best["value"], best["samples"], best.get("passed")),
        cfg,
    )
    rec["p_value"] = verdict.p_value
    rec["improved"] = verdict.kept
    if guard["ok"] is False:
        rec["guard"] = guard
        if guard["timed_out"]:
            rec["error"] = f"guard `{cfg.guard}` timed out after {cfg.guard_timeout:g}s"
            return CRASH, ""
        beat = "beat" if verdict.kept else "did not beat"
        return GUARD_FAILED, f"{guards.failure(cfg, guard)}; the metric {beat} the incumbent"
    return (KEPT if verdict.kept else DISCARDED), verdict.reason


def value_fields(measured: dict[str, Any]) -> dict[str, Any]:
    return {
        "metric_value": measured["value"],
        "samples": measured["samples"],
        "passed": measured["passed"],
        "notes": measured["notes"],
        "raw": measured["raw"],
    }


def results_row(rec: dict[str, Any], proposal: dict[str, Any], key: str) -> dict[str, Any]:
    usage = Usage(**proposal.get("usage", {}))
    what = (
        f"{key} {fmt(rec['baseline_value'])}→{fmt(rec['metric_value'])}"
        if rec["metric_value"] is not None
        else rec["status"]
    )
    which = f"[{rec['candidate']}] " if rec.get("candidate") else ""
    return {
        "team": "experiment",
        "status": rec["status"],
        "tests_pass": rec["tests_pass"],
        "description": f"{which}{what} — {rec['hypothesis']}",
        "files_changed": len(rec["files_changed"]),
        "timestamp": rec["timestamp"],
        "tokens": usage.tokens,
        "cost_usd": round(usage.cost_usd, 6),
    }


def render_evaluation(rec: dict[str, Any], key: str) -> str:
    lines = [f"# Evaluation: iteration {rec['iteration']}", ""]
    lines += experiment_lines(rec, key)
    lines.append(f"- Ending commit: {rec['end_commit']}")
    if rec.get("remeasured") is not None:
        lines.append(f"- Incumbent re-measured: {rec['remeasured']:g}")
    if rec["error"]:
        lines += ["", "## Error", "```", rec["error"].rstrip(), "```"]
    batch = rec.get("candidates") or []
    if batch:
        lines += ["", "## Candidates", "", "| candidate | status | " + key + " | guard | why |"]
        lines.append("|---|---|---|---|---|")
        for c in batch:
            why = c["verdict"] or (c["error"] or "").strip().split("\n")[0][:160]
            lines.append(
                f"| {c['candidate']} | {c['status']} | {fmt(c['metric_value'])} | "
                f"{guard_text(c)} | {why} |"
            )
    lines += ["", "## Decision", rec["reason"] or "continue"]
    return "\n".join(lines) + "\n"


def guard_text(rec: dict[str, Any]) -> str:
    return "—" if rec["guard_ok"] is None else ("pass" if rec["guard_ok"] else "FAIL")


def experiment_lines(rec: dict[str, Any], key: str) -> list[str]:
    """What one experiment tried, measured and why it was kept or not (markdown bullets)."""
    lines = []
    if rec.get("candidate"):
        lines.append(f"- Candidate: {rec['candidate']}")
    lines += [
        f"- Hypothesis: {rec['hypothesis']}",
        f"- Status: {rec['status']}",
        f"- {key}: {fmt(rec['baseline_value'])} → {fmt(rec['metric_value'])}",
        f"- Samples: {rec['samples']}",
        f"- Guard: {guard_text(rec)}",
    ]
    if rec.get("retry_of") is not None:
        lines.append(f"- Retry of #{rec['retry_of']}")
    if rec.get("sequential"):
        lines += sequential_lines(rec)
    elif rec.get("p_value") is not None:
        lines.append(f"- Rank test p-value: {rec['p_value']:.4f}")
    if rec["verdict"]:
        lines.append(f"- Why: {rec['verdict']}")
    return lines


def sequential_lines(rec: dict[str, Any]) -> list[str]:
    """The sequential test's figures: the decision, p-value, effect, interval, pairs."""
    step = rec["sequential"]
    level = f" (to keep: < {step['level']:.4g})" if step["level"] is not None else ""
    rel = f" ({step['relative_effect']:+.2%})" if step["relative_effect"] is not None else ""
    low, high = step["ci"] or (None, None)
    interval = (
        f"; {step['ci_level']:.1%} interval [{low:.4g}, {high:.4g}]" if low is not None else ""
    )
    return [
        f"- Incumbent samples: {rec['incumbent_samples']}",
        f"- Sequential test: {step['action']} after {step['samples']} pairs "
        f"({step['looks']} look{'s' * (step['looks'] != 1)}); p = {step['p_value']:.4g}{level}",
        f"- Gain per pair: {step['effect']:+.4g}{rel}{interval}",
    ]


def write_iteration_logs(
    layout: SessionLayout, cfg: ExperimentConfig, rec: dict, all_recs: list[dict], run_id: str
) -> None:
    key = key_of(cfg)
    each = rec.get("candidates") or [rec]
    for entry in each:
        logs.append_jsonl(layout.experiments_jsonl, logs.jsonl_entry(entry))
    logs.upsert_results_data(layout.results_data, each)
    write_json(layout.evaluation(rec["iteration"]), logs.evaluation_record(rec))
    write_text(layout.decision_log, logs.decision_log(all_recs, key))
    write_text(layout.goal_progress, logs.goal_progress(all_recs, key))
    logs.write_tsv(layout.experiments_tsv, run_id, all_recs)
    best = rec["best"]
    write_json(
        layout.baseline,
        {
            "metric_key": key,
            "value": best["value"],
            "direction": cfg.direction,
            "experiment_id": best["experiment_id"],
            **({"candidate": best["candidate"]} if best.get("candidate") else {}),
            "commit": best["commit"],
            "samples": best["samples"],
            "run_id": run_id,
            "timestamp": rec["timestamp"],
        },
    )
    publish_run(layout, cfg, all_recs)


def publish_run(
    layout: SessionLayout, cfg: ExperimentConfig, all_recs: list[dict], finished: bool = False
) -> None:
    """The run folder (experiment.output) brought up to the iterations decided so far."""
    setup = setup_state(layout)
    folder = setup.get("run_folder")
    if not folder:
        return
    last = all_recs[-1]
    reason = final_reason(all_recs)
    if finished:
        status = f"stopped: {reason or 'finished'}"
    else:
        status = f"stopping: {reason}" if reason else "running"
    text = run_summary.render(
        all_recs,
        key_of(cfg),
        cfg.direction,
        setup["run_id"],
        status,
        setup.get("branch", ""),
        target_reached=bool(reason and reason.startswith("target reached")),
    )
    preserved = {}
    for r in logs.each_experiment(all_recs):
        if r.get("preserved"):
            which = f"-{r['candidate']}" if r.get("candidate") else ""
            name = f"iteration-{r['iteration']:04d}{which}"
            preserved[name] = (preserve.patch_of(layout, r), r["preserved"])
    runs.sync(
        layout,
        Path(folder),
        {
            "run_id": setup["run_id"],
            "session": layout.name,
            "mission": cfg.mission,
            "started_at": setup["started_at"],
            "max_runtime_s": cfg.max_duration_s,
            "iterations": len(all_recs) - 1,
            "status": "finished" if finished else "running",
            "stopped": reason if finished else None,
            "best": last["best"],
            "branch": setup.get("branch", ""),
            "preserved": {name: ref for name, (_, ref) in preserved.items()},
        },
        text,
        {name: source for name, (source, _) in preserved.items()},
    )

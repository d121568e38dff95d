"""The stages only broad mode runs: strategist, approval, track set-up and end, comparison.

The cycles of a track are the plain loop's own stages (teams.py, evaluate.py) run with the
track as StageEnv.track; nothing of the loop is copied here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autoresearch.agents import prompts
from autoresearch.agents.agent_run import run_agent
from autoresearch.agents.backends.base import StageRun
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git, worktrees
from autoresearch.session.files import read_json, write_json, write_text
from autoresearch.session.layout import rel

from ...errors import UserError
from . import Broad, aspiration, judges
from .comparison import ranking, render_comparison
from .hypotheses import (
    MAX_HYPOTHESES,
    MIN_HYPOTHESES,
    Hypothesis,
    HypothesisError,
    as_dicts,
    from_spec,
    parse_markdown,
    render_markdown,
    validate,
)
from .step import TrackStep
from .tracks import BRANCH, approved_hypotheses, load_approved, track_decisions

STRATEGIST_ATTEMPTS = 2  # one retry that tells the strategist what was wrong


class BroadError(UserError):
    """A broad stage cannot go on; the message says what the user can do."""


# --- strategist ----------------------------------------------------------------------


class StrategistEnv(StageEnv):
    """Broad mode has no session worktree: the strategist reads the baseline checkout,
    a detached worktree at the base commit that session setup made."""

    @property
    def worktree(self) -> Path:
        return self.layout.baseline_worktree


def strategist(env: StageEnv, markdown_out: Path, record_out: Path) -> None:
    name, aspiration = env.layout.name, (env.spec.get("aspiration") or "").strip() or None
    given = env.spec.get("hypotheses")
    attempts: list[dict[str, Any]] = []
    if given:
        # Checked at preflight already; pruning notes still belong in the file.
        items, notes = validate(from_spec(list(given)))
        source = "the spec (key 'hypotheses'); no strategist ran"
    else:
        senv = StrategistEnv(env.layout, env.spec, env.record, 0, "", log_file=env.log_file)
        problem: str | None = None
        for attempt in range(1, STRATEGIST_ATTEMPTS + 1):
            proposed, run = ask_strategist(senv, aspiration, attempt, problem)
            attempts.append(
                {"attempt": attempt, "proposed": as_dicts(proposed), "stop": run.stop_reason}
            )
            try:
                items, notes = validate(proposed)
                break
            except HypothesisError as err:
                problem = str(err)
                env.log(f"strategist attempt {attempt}: rejected: {problem}")
        else:
            write_json(record_out.with_suffix(".failed.json"), {"attempts": attempts})
            raise BroadError(
                f"broad session {name!r}: the strategist did not produce a usable set of "
                f"hypotheses in {STRATEGIST_ATTEMPTS} attempts; last problem: {problem}.\n"
                f"Give the hypotheses yourself under key 'hypotheses' in "
                f"config/sessions/{name}.yaml (3 to 5 of id, category, name, statement), or "
                "reword key 'aspiration', and run the same command again."
            )
        source = f"strategist ({env.spec['agent']['backend']}), attempt {len(attempts)}"
    for note in notes:
        env.log(f"strategist: {note}")
    write_text(markdown_out, render_markdown(name, aspiration, items, source, notes))
    write_json(
        record_out,
        {
            "stage": "strategist",
            "source": "spec" if given else "strategist",
            "aspiration": aspiration,
            "hypotheses": as_dicts(items),
            "pruned": notes,
            "attempts": attempts,
        },
    )
    env.log(f"strategist: {len(items)} hypotheses written to {rel(markdown_out)}")


def ask_strategist(
    env: StageEnv, aspiration: str | None, attempt: int, problem: str | None
) -> tuple[list[Hypothesis], StageRun]:
    """One strategist run; returns what it proposed (validated later, as a whole)."""
    proposed: list[Hypothesis] = []

    def propose_hypothesis(id: str, category: str, name: str, statement: str) -> str:  # noqa: A002
        item = Hypothesis.from_dict(
            {"id": id, "category": category, "name": name, "statement": statement}, id
        )
        if any(p.id == item.id for p in proposed):
            raise ValueError(f"{item.id} was already proposed; use the next id")
        proposed.append(item)
        return f"recorded {item.id} [{item.category}] {item.name}"

    ctx = prompts.BriefContext(
        team="strategist",
        target_path=str(env.worktree),
        stack=env.record.stack or "",
        scope_text=env.spec.scope_text,
        conventions=env.record.conventions,
        cycle=attempt,
        aspiration=aspiration,
    )
    extra_task, extra_data = "", {"attempt": attempt}
    if problem:
        extra_task = (
            "\n## Your previous proposal was not accepted\n"
            f"{problem}.\nPropose the whole set again: {MIN_HYPOTHESES} to {MAX_HYPOTHESES} "
            "hypotheses with ids h1, h2, ..., at least one obvious, one bold and one creative.\n"
        )
        extra_data["previous_problem"] = problem
    toolbox = Toolbox(
        "strategist",
        env.worktree,
        hooks={"propose_hypothesis": propose_hypothesis},
        **env.toolbox_options(),
    )
    # The script backend looks steps up by cycle: attempt N of the strategist is cycle N.
    run = run_agent(
        env,
        "strategist",
        ctx,
        toolbox,
        ledger_cycle=attempt,
        extra_task=extra_task,
        extra_data=extra_data,
    )
    if run.stop_reason in ("budget", "session_stop"):
        raise BroadError(f"broad session {env.layout.name!r}: strategist not run: {run.detail}")
    env.log(f"strategist attempt {attempt}: {run.stop_reason}, {len(proposed)} proposed")
    return proposed, run


# --- approval ------------------------------------------------------------------------


def approve(env: StageEnv, markdown: Path, out: Path) -> None:
    """Turn hypotheses.md into the approved set; with `approve: manual`, only once a
    person has created the approval file."""
    name, layout = env.layout.name, env.layout
    manual = env.spec.get("approve") == "manual"
    if manual and not layout.approval_marker.exists():
        Broad().views.write_summary(env)
        raise BroadError(
            f"broad session {name!r} waits for your approval of its hypotheses "
            "(spec key approve: manual); no track has started.\n"
            f"  1. Review {rel(layout.hypotheses_md)}; edit, add or remove hypotheses as "
            f"you like (keep {MIN_HYPOTHESES} to {MAX_HYPOTHESES}, with at least one obvious, "
            "one bold and one creative).\n"
            f"  2. Approve by creating {rel(layout.approval_marker)}, e.g.:  "
            f"touch {rel(layout.approval_marker)}\n"
            f"  3. Run the same command again, e.g.:  snakemake --cores 3 {rel(layout.done)}"
        )
    text = markdown.read_text()
    try:
        items, notes = validate(parse_markdown(text, rel(markdown)))
    except HypothesisError as err:
        raise BroadError(
            f"broad session {name!r}: {rel(markdown)} cannot be used: {err}.\n"
            f"Fix {rel(markdown)} and run the same command again."
        ) from None
    record = read_json(layout.strategist_record) or {}
    write_json(
        out,
        {
            "aspiration": record.get("aspiration", env.spec.get("aspiration")),
            "approval": "manual" if manual else "auto",
            "hypotheses": as_dicts(items),
            "pruned": notes,
        },
    )
    Broad().views.write_summary(env)
    env.log(
        f"approved: {', '.join(i.id for i in items)}" + (f" ({'; '.join(notes)})" if notes else "")
    )


# --- tracks --------------------------------------------------------------------------


def open_track(env: StageEnv, out: Path) -> None:
    """The track's own branch, made fresh from the base commit, in its own worktree."""
    hid, layout = env.track, env.layout
    approved = load_approved(layout)
    hyp = next((h for h in approved["hypotheses"] if h["id"] == hid), None)
    if hyp is None:
        raise BroadError(f"{hid} is not among the approved hypotheses of {layout.name!r}")
    target, link = Path(env.record.target), layout.worktree(hid)
    base = env.record.base_commit
    store = Path(env.record.worktrees) if env.record.worktrees else layout.root
    worktree = worktrees.real_place(link, store, "tracks", hid)
    branch = git.open_worktree(target, worktree, BRANCH.format(name=layout.name, hid=hid), base)
    worktrees.link(link, worktree)
    write_json(
        out,
        {
            "hid": hid,
            "branch": branch,
            "base_commit": base,
            "hypothesis": hyp,
            "aspiration": approved.get("aspiration"),
        },
    )
    env.log(f"track {hid}: branch {branch} at {base[:12]} in {rel(link)}")


def diff_size(worktree: Path, start: str, end: str) -> int:
    """Lines added plus lines removed: how big the track's change is."""
    out = git.git(worktree, "diff", "--numstat", start, end)
    total = 0
    for line in out.splitlines():
        added, removed, _ = line.split("\t", 2)
        total += (int(added) if added.isdigit() else 0) + (int(removed) if removed.isdigit() else 0)
    return total


def end_track(env: StageEnv, out: Path) -> None:
    """The track's record for the comparison: what it did and how it ended."""
    hid, layout = env.track, env.layout
    meta = json.loads(layout.track_meta(hid).read_text())
    decisions = track_decisions(layout, hid)
    steps: list[TrackStep] = [d.extra for d in decisions]  # type: ignore[misc]
    last, step = decisions[-1], steps[-1]
    base, end = meta["base_commit"], last.end_commit
    worktree = layout.worktree(hid)
    fixes = [f for s in steps for f in s.fixed]
    result = {
        "id": hid,
        **{k: meta["hypothesis"][k] for k in ("category", "name", "statement")},
        "branch": meta["branch"],
        "base_commit": base,
        "end_commit": end,
        "tree": git.git(worktree, "rev-parse", f"{end}^{{tree}}"),
        "status": step.track_status or "complete",
        "reason": last.reason,
        "cycles": len(decisions),
        "findings": sum(s.findings for s in steps),
        "fixes_kept": len(fixes),
        "fixed": [f"[{f['id']}] {f['summary']}" for f in fixes],
        "refactor_changes": sum(s.refactor_changes for s in steps),
        "reverted": sum(len(s.reverted) for s in steps),
        "skipped": sum(len(s.skipped) for s in steps),
        "commits": len(git.commits_between(worktree, base, end)),
        "files_changed": git.changed_files(worktree, base, end),
        "diff_lines": diff_size(worktree, base, end),
        "tests_pass": step.tests_pass,
        "test_summary": step.test_summary,
    }
    measured = aspiration.measure_tip(env)
    if measured is not None:
        result["aspiration_metric"] = measured
    write_json(out, result)
    Broad().views.write_summary(env)
    env.log(f"track {hid}: {result['status']} after {result['cycles']} cycles: {result['reason']}")


# --- comparison ----------------------------------------------------------------------


def compare(env: StageEnv, md_out: Path, json_out: Path) -> None:
    layout = env.layout
    results = [
        json.loads(layout.track_result(h.id).read_text()) for h in approved_hypotheses(layout)
    ]
    for r in results:  # a track ended before results named their tree
        if "tree" not in r:
            r["tree"] = git.git(
                layout.worktree(r["id"]), "rev-parse", f"{r['end_commit']}^{{tree}}"
            )
    panel = judges.panel_of(env.spec, layout.name)
    if panel:
        senv = StrategistEnv(env.layout, env.spec, env.record, 0, "", log_file=env.log_file)
        asked = judges.ask(senv, results, env.spec.get("aspiration") or "", panel)
        for r in results:
            r["judges"] = asked[r["id"]]
    data = ranking(results, env.record.target, aspiration.ranking_metric(env), bool(panel))
    ranked = [data["tracks"][hid] for hid in data["ranking"]]
    md = render_comparison(
        layout.name,
        load_approved(layout).get("aspiration"),
        env.record.base_commit,
        env.record.target,
        ranked,
        data,
    )
    write_text(md_out, md)
    write_json(json_out, data)
    Broad().views.write_summary(env)
    winner = data["winner"]
    env.log(f"comparison: winner {winner['id'] if winner else 'none'}")

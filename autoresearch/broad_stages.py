"""The stages only broad mode runs: strategist, approval, track set-up and end, comparison.

The cycles of a track are the sweep's own stages (teams.py, evaluate.py) run with the
track as StageEnv.track; nothing of the loop is copied here.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import git, journal, ledger, prompts
from .agents import SessionStop, StageRun
from .backends import get_backend
from .broad import (
    BRANCH,
    MAX_HYPOTHESES,
    MIN_HYPOTHESES,
    BroadError,
    Hypothesis,
    HypothesisError,
    approval_marker,
    approved_hypotheses,
    approved_set,
    as_dicts,
    comparison_json,
    comparison_md,
    from_spec,
    hypotheses_md,
    load_approved,
    parse_markdown,
    read_json,
    rel,
    render_markdown,
    summary_sections,
    track_meta,
    track_result,
    validate,
)
from .entry import open_env
from .session import write_json, write_text
from .stage import StageEnv, progress_printer
from .teams import scope_text
from .tools import Toolbox

STRATEGIST_ATTEMPTS = 2  # one retry that tells the strategist what was wrong


def run_stage(wildcards: Any, log: Any, body: Callable[[StageEnv], None]) -> None:
    """Like entry.run_stage, but a BroadError reaches the user as its plain message."""
    log_path = Path(log[0])
    try:
        body(open_env(dict(wildcards.items()), log[0]))
    except BroadError as err:
        message = str(err)
        with log_path.open("a") as handle:
            handle.write(message + "\n")
        print(f"\n{message}\n", file=sys.stderr, flush=True)
        raise
    except Exception:
        with log_path.open("a") as handle:
            handle.write(traceback.format_exc())
        raise


def refresh_summary(env: StageEnv) -> None:
    """Rewrite session.md with every track's cycles and the hypothesis table."""
    decisions: list[dict[str, Any]] = []
    if approved_set(env.layout).exists():
        for item in approved_hypotheses(env.layout):
            decisions += journal.load_decisions(env.layout, item.id)
    journal.write_summary(env.layout, env.record, env.spec, decisions, summary_sections(env))


# --- strategist ----------------------------------------------------------------------


class StrategistEnv(StageEnv):
    """Broad mode has no session worktree: the strategist reads the baseline checkout,
    a detached worktree at the base commit that session setup made."""

    @property
    def worktree(self) -> Path:
        return self.layout.root / "baseline-worktree"


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

    limit = (env.spec.get("budget") or {}).get("max_cost_usd")
    over = ledger.budget_exceeded(env.layout.root, limit) if limit is not None else None
    if over:
        raise BroadError(f"broad session {env.layout.name!r}: strategist not run: {over}")
    ctx = prompts.BriefContext(
        team="strategist",
        target_path=str(env.worktree),
        stack=env.record.stack or "",
        scope_text=scope_text(env.spec),
        conventions=env.record.conventions,
        cycle=attempt,
        aspiration=aspiration,
    )
    brief = prompts.build_brief(ctx, env.spec["agent"].get("prompts") or {}, env.limits())
    if problem:
        brief.task += (
            "\n## Your previous proposal was not accepted\n"
            f"{problem}.\nPropose the whole set again: {MIN_HYPOTHESES} to {MAX_HYPOTHESES} "
            "hypotheses with ids h1, h2, ..., at least one obvious, one bold and one creative.\n"
        )
        brief.data["previous_problem"] = problem
    # The script backend looks steps up by cycle: attempt N of the strategist is cycle N.
    brief.data.update(worktree=str(env.worktree), cycle=attempt, track="", attempt=attempt)
    toolbox = Toolbox(
        "strategist",
        env.worktree,
        hooks={"propose_hypothesis": propose_hypothesis},
        **env.toolbox_options(),
    )
    backend = get_backend(env.spec)
    try:
        run = backend.run(brief, toolbox, progress_printer(env, "strategist"))
    except SessionStop as stop:
        raise BroadError(f"broad session {env.layout.name!r}: {stop}") from None
    ledger.record_stage(
        env.layout.root,
        track="",
        cycle=f"{attempt:03d}",
        team="strategist",
        model=env.spec["agent"]["model"] if backend.name == "claude" else backend.name,
        run=run,
    )
    env.log(f"strategist attempt {attempt}: {run.stop_reason}, {len(proposed)} proposed")
    return proposed, run


# --- approval ------------------------------------------------------------------------


def approve(env: StageEnv, markdown: Path, out: Path) -> None:
    """Turn hypotheses.md into the approved set; with `approve: manual`, only once a
    person has created the approval file."""
    name, layout = env.layout.name, env.layout
    manual = env.spec.get("approve") == "manual"
    if manual and not approval_marker(layout).exists():
        refresh_summary(env)
        raise BroadError(
            f"broad session {name!r} waits for your approval of its hypotheses "
            "(spec key approve: manual); no track has started.\n"
            f"  1. Review {rel(hypotheses_md(layout))}; edit, add or remove hypotheses as "
            f"you like (keep {MIN_HYPOTHESES} to {MAX_HYPOTHESES}, with at least one obvious, "
            "one bold and one creative).\n"
            f"  2. Approve by creating {rel(approval_marker(layout))}, e.g.:  "
            f"touch {rel(approval_marker(layout))}\n"
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
    record = read_json(layout.root / "strategist.json") or {}
    write_json(
        out,
        {
            "aspiration": record.get("aspiration", env.spec.get("aspiration")),
            "approval": "manual" if manual else "auto",
            "hypotheses": as_dicts(items),
            "pruned": notes,
        },
    )
    refresh_summary(env)
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
    target, worktree = Path(env.record.target), layout.worktree(hid)
    base = env.record.base_commit
    if (worktree / ".git").exists():
        branch = git.current_branch(worktree)  # a rerun after a crash: reuse it
    else:
        with git.repo_lock(target):
            branch = git.free_branch_name(target, BRANCH.format(name=layout.name, hid=hid))
    git.add_worktree(target, worktree, branch, base)
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
    env.log(f"track {hid}: branch {branch} at {base[:12]} in {rel(worktree)}")


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
    meta = json.loads(track_meta(layout, hid).read_text())
    decisions = journal.load_decisions(layout, hid)
    last = decisions[-1]
    base, end = meta["base_commit"], last["end_commit"]
    worktree = layout.worktree(hid)
    fixes = [f for d in decisions for f in d.get("fixed", [])]
    result = {
        "id": hid,
        **{k: meta["hypothesis"][k] for k in ("category", "name", "statement")},
        "branch": meta["branch"],
        "base_commit": base,
        "end_commit": end,
        "status": last.get("track_status") or "complete",
        "reason": last.get("reason"),
        "cycles": len(decisions),
        "findings": sum(d.get("findings", 0) for d in decisions),
        "fixes_kept": len(fixes),
        "fixed": [f"[{f['id']}] {f['summary']}" for f in fixes],
        "refactor_changes": sum(d.get("refactor_changes", 0) for d in decisions),
        "reverted": sum(len(d.get("reverted", [])) for d in decisions),
        "skipped": sum(len(d.get("skipped", [])) for d in decisions),
        "commits": len(git.commits_between(worktree, base, end)),
        "files_changed": git.changed_files(worktree, base, end),
        "diff_lines": diff_size(worktree, base, end),
        "tests_pass": bool(last.get("tests_pass")),
        "test_summary": last.get("test_summary"),
    }
    write_json(out, result)
    refresh_summary(env)
    env.log(f"track {hid}: {result['status']} after {result['cycles']} cycles: {result['reason']}")


# --- comparison ----------------------------------------------------------------------

# Ties go to the less obvious idea: that is the result only the experiment could give.
CATEGORY_PREFERENCE = {"bold": 0, "creative": 0, "wildcard": 1, "adjacent": 1, "obvious": 2}


def rank_key(r: dict[str, Any]) -> tuple:
    """Best first: a green suite with a kept change, most fixes kept, the less obvious
    category on a tie, then the smaller diff, then proposal order."""
    credible = r["tests_pass"] and r["fixes_kept"] > 0
    return (
        not credible,
        -r["fixes_kept"],
        CATEGORY_PREFERENCE.get(r["category"], 1),
        r["diff_lines"],
        int(r["id"][1:]),
    )


def compare(env: StageEnv, md_out: Path, json_out: Path) -> None:
    layout = env.layout
    results = [
        json.loads(track_result(layout, h.id).read_text()) for h in approved_hypotheses(layout)
    ]
    ranked = sorted(results, key=rank_key)
    best = ranked[0] if ranked else None
    winner = best if best and best["tests_pass"] and best["fixes_kept"] > 0 else None
    target = env.record.target
    merge = f"git -C {target} merge {winner['branch']}" if winner else None
    data = {
        "ranking": [r["id"] for r in ranked],
        "winner": {"id": winner["id"], "branch": winner["branch"]} if winner else None,
        "runner_up": ranked[1]["id"] if winner and len(ranked) > 1 else None,
        "why": why(winner, ranked) if winner else no_winner_reason(ranked),
        "merge_command": merge,
        "tracks": {r["id"]: r for r in results},
    }
    write_text(md_out, render_comparison(env, ranked, data))
    write_json(json_out, data)
    refresh_summary(env)
    env.log(f"comparison: winner {winner['id'] if winner else 'none'}")


def why(winner: dict[str, Any], ranked: list[dict[str, Any]]) -> str:
    parts = [
        f"{winner['id']} [{winner['category']}] kept {winner['fixes_kept']} test-gated fixes "
        f"with the suite green ({winner['test_summary']}), in {winner['commits']} commits "
        f"touching {len(winner['files_changed'])} files ({winner['diff_lines']} lines changed)."
    ]
    rivals = [r for r in ranked[1:] if r["tests_pass"] and r["fixes_kept"] == winner["fixes_kept"]]
    for rival in rivals:
        if CATEGORY_PREFERENCE.get(rival["category"], 1) > CATEGORY_PREFERENCE.get(
            winner["category"], 1
        ):
            parts.append(
                f"It ties with {rival['id']} [{rival['category']}] on fixes kept; the less "
                "obvious category wins a tie, since only the experiment could produce it."
            )
        elif rival["diff_lines"] > winner["diff_lines"]:
            parts.append(
                f"It ties with {rival['id']} on fixes kept and category; its diff is smaller "
                f"({winner['diff_lines']} against {rival['diff_lines']} lines)."
            )
        else:
            parts.append(
                f"It ties with {rival['id']} on fixes kept, category and diff size; the "
                "hypothesis proposed first is ranked first."
            )
    others = [r for r in ranked[1:] if r not in rivals]
    if others:
        parts.append(
            "Ahead of "
            + ", ".join(
                f"{r['id']} ({r['fixes_kept']} fixes kept, tests "
                f"{'pass' if r['tests_pass'] else 'FAIL'}, {r['status']})"
                for r in others
            )
            + "."
        )
    return " ".join(parts)


def no_winner_reason(ranked: list[dict[str, Any]]) -> str:
    return (
        "No track kept a test-gated change with its suite green, so there is nothing to merge. "
        "Every branch is kept for inspection."
        if ranked
        else "No track ran."
    )


def render_comparison(env: StageEnv, ranked: list[dict[str, Any]], data: dict[str, Any]) -> str:
    approved = load_approved(env.layout)
    lines = [
        f"# Comparison: {env.layout.name}",
        "",
        f"Aspiration: {approved.get('aspiration') or '(none given)'}",
        f"Base commit: {env.record.base_commit}",
        f"Target: {env.record.target}",
        "",
        "## Ranking",
        "",
        "| Rank | ID | Category | Name | Status | Cycles | Commits | Fixes kept | "
        "Files changed | Lines changed | Tests |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(ranked, 1):
        lines.append(
            f"| {n} | {r['id']} | {r['category']} | {r['name']} | {r['status']} | "
            f"{r['cycles']} | {r['commits']} | {r['fixes_kept']} | {len(r['files_changed'])} | "
            f"{r['diff_lines']} | {'pass' if r['tests_pass'] else 'FAIL'} ({r['test_summary']}) |"
        )
    winner = data["winner"]
    lines += ["", "## Winner", ""]
    if winner:
        lines += [f"**{winner['id']}** on branch `{winner['branch']}`.", "", data["why"]]
        if data["runner_up"]:
            lines += ["", f"Runner-up: {data['runner_up']}."]
        lines += [
            "",
            "## Merge",
            "",
            "With the branch you want it on checked out in the target (main, or a review "
            "branch), run:",
            "",
            "```",
            data["merge_command"],
            "```",
        ]
    else:
        lines += ["No winner.", "", data["why"]]
    lines += ["", "## Tracks", ""]
    winner_files = set(data["tracks"][winner["id"]]["files_changed"]) if winner else set()
    for r in ranked:
        lines += [
            f"### {r['id']} [{r['category']}] {r['name']}",
            f"- Hypothesis: {r['statement']}",
            f"- Branch: `{r['branch']}` (kept; never deleted)",
            f"- Status: {r['status']} after {r['cycles']} cycles: {r['reason']}",
            f"- Commits: {r['commits']} ({r['fixes_kept']} fixes kept, "
            f"{r['refactor_changes']} refactors, {r['reverted']} reverted, {r['skipped']} skipped)",
            f"- Files changed: {', '.join(r['files_changed']) or 'none'}",
            f"- Tests: {'pass' if r['tests_pass'] else 'FAIL'} ({r['test_summary']})",
            f"- Observations: Red reported {r['findings']} findings over {r['cycles']} cycles.",
        ]
        if r["fixed"]:
            lines.append("- Fixes: " + "; ".join(r["fixed"]))
        own = sorted(set(r["files_changed"]) - winner_files)
        if winner and r["id"] != winner["id"] and own:
            lines.append(
                f"- Worth a look even though it lost: it changed files the winner did not "
                f"touch ({', '.join(own)})."
            )
        lines.append("")
    return "\n".join(lines)


# --- done ----------------------------------------------------------------------------


def write_done(env: StageEnv, out: Path) -> None:
    data = json.loads(comparison_json(env.layout).read_text())
    refresh_summary(env)
    lines = [
        f"session: {env.layout.name}",
        "mode: broad",
        f"stopped: all {len(data['tracks'])} tracks ended; comparison.md picks the winner",
        f"tracks: {len(data['tracks'])}",
    ]
    for hid in data["ranking"]:
        r = data["tracks"][hid]
        lines.append(
            f"  {hid} [{r['category']}] {r['name']}: {r['status']}, {r['cycles']} cycles, "
            f"{r['fixes_kept']} fixes kept, tests {'pass' if r['tests_pass'] else 'FAIL'}, "
            f"branch {r['branch']}"
        )
    winner = data["winner"]
    lines.append(f"winner: {winner['id']} ({winner['branch']})" if winner else "winner: none")
    if data.get("runner_up"):
        lines.append(f"runner-up: {data['runner_up']}")
    if data.get("merge_command"):
        lines.append(f"merge with: {data['merge_command']}")
    lines.append(f"details: {rel(comparison_md(env.layout))}")
    write_text(out, "\n".join(lines) + "\n")
    env.log(json.dumps({"done": env.layout.name, "winner": winner["id"] if winner else None}))

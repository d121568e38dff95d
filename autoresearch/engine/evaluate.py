"""The evaluate stage: full uncached test run, the revert order, the cycle's decision.

`assess` measures and undoes what broke the tests (revert.py's order, stopping as soon
as they pass again); the mode then adds its policy to the decision; `write_results`
writes eval-results.md and the journal rows; `judge` hands both to loop.decide, which
writes `decision.json` last: its presence marks the cycle complete.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autoresearch.agents.backends import rechecker
from autoresearch.agents.backends.base import Usage
from autoresearch.engine.loop import Decision, Judged, Status
from autoresearch.engine.revert import undo_cycle
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git
from autoresearch.session.files import write_text
from autoresearch.views import journal


def refactor_record(env: StageEnv) -> dict[str, Any] | None:
    if env.spec.refactor_on and (env.cycle_dir / "refactor.json").exists():
        return env.stage_record("refactor")
    return None


def assess(env: StageEnv, previous: Decision | None = None) -> dict[str, Any]:
    """The cycle's decision before the mode's policy (tests, reverts, what was kept).
    `previous`: the cycle before, read as the mode's record (a CycleStep, or one that
    extends it)."""
    red = env.stage_record("red")
    green = env.stage_record("green")
    refactor = refactor_record(env)
    cycle_start = red["start_commit"]
    start = (refactor or green)["end_commit"]

    reference = env.reference_tests()
    # The suite without the tool's caches, on `start` in a pristine worktree; a tree
    # already tested that way is not tested again (Green's final run, an earlier cycle's)
    # unless the spec says evaluate.rerun.
    measured = after = env.measure_tests(uncached=True, reuse=True, at=start)
    first = verdict = env.judge_tests(after, reference)
    reverted: list[dict[str, str]] = []
    if not verdict.ok:
        env.log(f"evaluate: {verdict.reason}; reverting in the documented order")
        commits = [c["commit"] for c in reversed(refactor["commits"])] if refactor else []
        commits += [f["commit"] for f in reversed(green["fixed"])]

        def good_again() -> bool:
            # Never an earlier run of the same tree here: whether undoing brings the tests
            # back is exactly what must be measured, now.
            nonlocal after, verdict
            after = env.measure_tests(uncached=True, reuse=False)
            verdict = env.judge_tests(after, reference)
            return verdict.ok

        reverted = undo_cycle(
            env.worktree,
            cycle_start,
            commits,
            good_again=good_again,
            log=lambda line: env.log(f"evaluate: {line}"),
        )
        if reverted[-1]["how"] == "reset":
            good_again()  # the tree is the cycle's start: where do the tests stand now?
    reverted_shas = {r["commit"] for r in reverted}
    hard_reset = any(r["how"] == "reset" for r in reverted)
    fixed = [f for f in green["fixed"] if not hard_reset and f["commit"] not in reverted_shas]
    # Nothing moved HEAD from `start` unless a revert did.
    end = git.head(env.worktree) if reverted else start
    stops = [r.get("stop") for r in (red, green, refactor or {}) if r.get("stop")]
    decision = {
        "cycle": env.cycle,
        "track": env.track,
        "start_commit": cycle_start,
        "end_commit": end,
        # The gate's word, not the exit code's: a run that passes with a test gone is no pass.
        "tests_pass": after.ok and verdict.ok,
        "test_summary": after.summary if not reverted else f"after reverts: {after.summary}",
        "test_verdict": verdict.reason,
        "tests_removed": list(verdict.removed),
        # The tree as the cycle left it: the next cycle starts there and is held to it.
        "tests": env.as_left(after).to_record(),
        "broken": not verdict.ok,
        "reverted": reverted,
        "findings": red["findings"],
        "red_categories": red.get("categories", []),
        "next_finding_id": red["next_finding_id"],
        "fixed": fixed,
        "skipped": green["skipped"],
        "refactor_changes": 0 if hard_reset or not refactor else refactor["changes"],
        "files_changed": git.changed_files(env.worktree, cycle_start, end),
        "commits_total": env.commits_total(cycle_start, end),
        "session_stop": stops[0] if stops else None,
    }
    carried = previous.extra.open if previous else []  # type: ignore[attr-defined]
    decision["open"], decision["open_rechecked"] = open_issues(
        env, carried, green["skipped"], fixed
    )
    decision["open_issues"] = [f"{o['id']} {o['key']}: {o['reason']}" for o in decision["open"]]
    if reverted:
        decision["first_test_summary"] = measured.summary
        decision["first_test_verdict"] = first.reason
    if refactor and refactor.get("idle"):
        decision["refactor_idle"] = True  # a key only a cycle whose Refactor had no file has
    return decision


def write_results(env: StageEnv, decision: dict[str, Any], out: Path) -> None:
    """eval-results.md and the cycle's rows in results.tsv."""
    write_text(out, render_results(decision))
    log_rows(env, decision)


def judge(env: StageEnv, results_out: Path, previous: Decision | None = None) -> Judged:
    """The cycle's decision before the mode's stop rules; eval-results.md and the journal
    rows once they have spoken (loop.decide). `previous`: as `assess` takes it."""
    decision = assess(env, previous)
    return Judged(decision, lambda d: write_results(env, d, results_out))


def open_issues(
    env: StageEnv, earlier: list[dict], skipped: list[dict], fixed: list[dict]
) -> tuple[list[dict], bool]:
    """Skipped findings carried forward (`earlier`: the previous cycle's open ones) until a
    later fix names the same problem, and whether they were re-checked on the tree: a
    backend that can look again (ruff) drops those it no longer reports; a model's findings
    stay as reported."""
    fixed_keys = {f["key"] for f in fixed}
    carried = [o for o in earlier if o["key"] not in fixed_keys]
    known = {o["key"] for o in carried}
    items = carried + [
        {"id": s["id"], "key": s["key"], "reason": s["reason"]}
        for s in skipped
        if s["key"] not in known
    ]
    recheck = rechecker(env.spec)
    if recheck is None:
        return items, False
    present = recheck(env.worktree, [o["key"] for o in items])
    return [o for o in items if o["key"] in present], True


def render_results(d: Mapping[str, Any]) -> str:
    """eval-results.md: the cycle's decision and nothing else, so `verify` can hold the page
    to its decision by rendering it again."""
    track = f"{d['track']} " if d.get("track") else ""  # the label StageEnv.label gives
    lines = [
        f"# Evaluation: {track}cycle {d['cycle']:03d}",
        "",
        f"- Test status: {'pass' if d['tests_pass'] else 'FAIL'} ({d['test_summary']})",
        *([f"- Test gate: {d['test_verdict']}"] if d.get("test_verdict") else []),
        # What made evaluate revert: the cycle's own run, before anything was undone.
        *(
            [f"- Before reverts: {d['first_test_summary']}; {d['first_test_verdict']}"]
            if d.get("first_test_verdict")
            else []
        ),
        f"- Commits on the branch since base: {d['commits_total']}",
        f"- Ending commit: {d['end_commit']}",
        f"- Files changed this cycle: {', '.join(d['files_changed']) or 'none'}",
        "",
        "## Fixed",
        *([f"- [{f['id']}] {f['summary']}" for f in d["fixed"]] or ["(none)"]),
        "",
        "## Remaining",
        *([f"- {o}" for o in d["open_issues"]] or ["(none)"]),
    ]
    if d["reverted"]:
        # A mode may revert for its own reason (narrow: a metric regression) and says so.
        lines += ["", "## Reverted"]
        lines += [
            f"- {r['how']} {r['commit'][:10]} {r['subject']} ({r.get('why', 'tests broke')})"
            for r in d["reverted"]
        ]
    for key, label in (("metric", "Metric"), ("observations", "Observations")):
        if d.get(key) is not None:
            lines += ["", f"## {label}", str(d[key])]
    lines += ["", "## Decision", d["reason"] or "continue"]
    return "\n".join(lines) + "\n"


def log_rows(env: StageEnv, decision: dict[str, Any]) -> None:
    records = {
        "red": env.stage_record("red"),
        "green": env.stage_record("green"),
        "refactor": refactor_record(env) or {},
    }

    def row(team, status, description, files=""):
        u = Usage(**records[team].get("usage", {}))
        return {
            "team": team,
            "status": status,
            "tests_pass": decision["tests_pass"],
            "description": description,
            "files_changed": files,
            "timestamp": finished_at(env, team),
            "tokens": u.tokens,
            "cost_usd": round(u.cost_usd, 6),
        }

    red, green, refactor = records["red"], records["green"], records["refactor"]
    rows = [row("red", "ok", f"{red['findings']} findings")]
    rows.append(
        row(
            "green",
            Status.REVERTED if decision["reverted"] else "ok",
            f"{len(decision['fixed'])} fixed, {len(green['skipped'])} skipped",
            len(git.changed_files(env.worktree, green["start_commit"], green["end_commit"])),
        )
    )
    if refactor:
        # `files` are the files Refactor was given; what it changed is between its commits.
        changed = refactor["changes"] and git.changed_files(
            env.worktree, refactor["start_commit"], refactor["end_commit"]
        )
        rows.append(row("refactor", "ok", f"{refactor['changes']} changes", len(changed or [])))
    journal.upsert_results(env.layout, env.track, f"{env.cycle:03d}", rows)


def finished_at(env: StageEnv, team: str) -> str:
    """When the team's stage wrote its record, as journal.now() writes a time: each row its
    own time, though evaluate writes them all."""
    try:
        written = (env.cycle_dir / f"{team}.json").stat().st_mtime
    except OSError:
        return journal.now()
    return dt.datetime.fromtimestamp(written, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

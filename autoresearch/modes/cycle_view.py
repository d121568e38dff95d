"""`autoresearch show NAME N` for a cycle loop (sweep, narrow, a broad track): the cycle's
findings, the commits it kept with their diffs, what was skipped or reverted and why.
Read from the cycle's files and git; never runs anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine import findings
from autoresearch.engine.loop import maybe_decision
from autoresearch.safety import git
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import load_record

from ..errors import SessionError


def render(layout: SessionLayout, cycle: int, track: str = "") -> str:
    folder = layout.cycle(cycle, track)
    decision = maybe_decision(layout.decision(cycle, track))
    where = f"track {track} " if track else ""
    if decision is None:
        done = layout.completed_cycles(track)
        have = f"cycles 1 to {done[-1]}" if done else "no finished cycle yet"
        raise SessionError(f"session {layout.name!r} has no finished {where}cycle {cycle} ({have})")
    tests = decision.get("test_summary") or "not run"
    lines = [
        f"Cycle {cycle} of session {layout.name}{' (track ' + track + ')' if track else ''}",
        f"- Started at {decision['start_commit'][:12]}, ended at {decision['end_commit'][:12]}",
        f"- Tests: {'pass' if decision.get('tests_pass') else 'FAIL'} ({tests})",
    ]
    if decision.get("metric"):
        lines.append(f"- Metric: {decision['metric']}")
    if decision.get("stop"):
        lines.append(f"- Stopped the loop: {decision.get('reason')}")
    lines += ["", *finding_lines(folder, decision)]
    repo = repo_of(layout, track)
    kept = kept_commits(repo, decision)
    lines += ["", f"Kept commits ({len(kept)}):"]
    lines += [f"- {sha[:12]} {message}" for sha, message in kept] or ["(none)"]
    skipped = decision.get("skipped") or []
    lines += ["", f"Skipped ({len(skipped)}):"]
    lines += [f"- [{s['id']}] {s.get('key', '')}: {s.get('reason', '')}" for s in skipped] or [
        "(none)"
    ]
    reverted = decision.get("reverted") or []
    if reverted:
        lines += ["", f"Reverted after the cycle broke tests ({len(reverted)}):"]
        lines += [f"- {_reverted(r)}" for r in reverted]
    for sha, message in kept:
        diff = git.git(repo, "show", "--format=", "--patch", sha, check=False)
        lines += ["", f"diff of {sha[:12]} {message}:", diff or "(no change)"]
    return "\n".join(lines).rstrip("\n") + "\n"


def finding_lines(folder: Path, decision: dict[str, Any]) -> list[str]:
    """Every finding Red reported, marked with what became of it."""
    path = folder / "red-findings.md"
    reported = findings.parse(path.read_text()) if path.exists() else []
    sanitized = folder / "sanitized.md"
    passed = {f.id for f in findings.parse(sanitized.read_text())} if sanitized.exists() else set()
    fixed = {f["id"] for f in decision.get("fixed") or []}
    skipped = {s["id"]: s.get("reason", "") for s in decision.get("skipped") or []}
    lines = [f"Findings ({len(reported)} reported, {len(passed)} passed to Green):"]
    for f in reported:
        if f.id in fixed:
            fate = "fixed"
        elif f.id in skipped:
            fate = f"skipped: {skipped[f.id]}"
        elif f.id in passed:
            fate = "passed to Green, not fixed"
        else:
            fate = "held back (ideas.md)"
        lines.append(f"- [{f.id}] {f.severity} {f.title} ({f.location}): {fate}")
    return lines if reported else lines + ["(none)"]


def kept_commits(repo: Path, decision: dict[str, Any]) -> list[tuple[str, str]]:
    """The commits the cycle left on its branch, oldest first: start..end in git, so a
    fix taken out again or a cycle reset to its start shows nothing it did not keep."""
    out = git.git(
        repo,
        "log",
        "--reverse",
        "--format=%H %s",
        f"{decision['start_commit']}..{decision['end_commit']}",
    )
    return [tuple(line.split(" ", 1)) for line in out.splitlines()]  # type: ignore[misc]


def _reverted(item: Any) -> str:
    if isinstance(item, dict):
        return " ".join(str(v) for v in item.values())
    return str(item)


def repo_of(layout: SessionLayout, track: str) -> Path:
    """Where to read the commits: the loop's worktree, else the target (read only)."""
    worktree = layout.worktree(track)
    if worktree.exists() and git.is_our_worktree(worktree.resolve()):
        return worktree.resolve()
    return Path(load_record(layout).target)

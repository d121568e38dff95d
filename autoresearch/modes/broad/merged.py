"""`autoresearch finalize` on a broad session: the winner plus the other tracks' wins.

Each other track's review set that passed alone is cherry-picked onto the winner's branch,
kept only when it applies cleanly and keeps every test that passed before it; review/merged.md
lists what was added and what was left out, and why (docs/broad.md, "The merged branch").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.gate.testrun import TestRun
from autoresearch.gate.verdict import Verdict
from autoresearch.safety import git
from autoresearch.session.files import read_json, write_json, write_text
from autoresearch.session.finalize import (
    ReviewSet,
    Session,
    branches_file,
    delete_branch,
    graded_test,
    replay,
    set_title,
)

FILE = "merged.md"


@dataclass
class Tried:
    """One other track's review set, tried on top of the winner."""

    number: int
    track: str
    title: str
    added: bool
    reason: str


@dataclass
class Merged:
    winner: str
    winner_branch: str
    base: str
    branch: str = ""
    tip: str = ""
    tried: list[Tried] = field(default_factory=list)
    winner_run: TestRun | None = None
    winner_verdict: Verdict | None = None
    run: TestRun | None = None  # the merged tip's run

    @property
    def added(self) -> list[Tried]:
        return [t for t in self.tried if t.added]


def branch_name(session: Session) -> str:
    return f"autoresearch/{session.layout.name}/review/merged"


def record(session: Session, merged: Merged | None, place: Path | None) -> None:
    """branches.json's `merged` entry, so that a rerun replaces it like the sets."""
    data = read_json(branches_file(session)) or {"sets": []}
    data.pop("merged", None)
    if merged is not None and merged.branch:
        data["merged"] = {
            "branch": merged.branch,
            "worktree": str(place),
            "tip": merged.tip,
            "winner": merged.winner,
            "added": [t.number for t in merged.added],
        }
    write_json(branches_file(session), data)


def build(session: Session, sets: list[ReviewSet], log: Callable[[str], None]) -> Merged | None:
    """The merged branch of a finished broad session; None without a winner."""
    comparison = read_json(session.layout.comparison_json) or {}
    winner = comparison.get("winner")
    if not winner:
        log("no winner in comparison.md: no merged branch")
        return None
    loops = session.mode.views.review_loops(session.layout, session.record, session.spec)
    loop = next((lo for lo in loops if lo.track == winner["id"]), None)
    if loop is None or not git.branch_exists(session.target, loop.branch):
        log(f"the winner's branch {winner['branch']} is gone: no merged branch")
        return None
    merged = Merged(winner["id"], loop.branch, loop.base)
    start = git.git(session.target, "rev-parse", f"refs/heads/{loop.branch}")
    place = session.store / "merged"
    merged.branch = git.open_worktree(session.target, place, branch_name(session), start)
    merged.tip = start
    record(session, merged, place)  # before anything else: a killed run is cleaned up too
    git.reset_to(place, start, ignored=True)
    base_run = session.base_runs.get(loop.base)
    merged.winner_run, merged.winner_verdict = graded_test(session, place, loop.base, base_run)
    current = merged.winner_run
    if base_run is not None and merged.winner_verdict.ok:
        for review in sets:
            if review.loop.track == winner["id"]:
                continue
            tried, run = try_set(session, place, review, current)
            merged.tried.append(tried)
            if run is not None:
                current = run
            log(f"merged: set {review.number} ({review.loop.track}): {tried.reason}")
    else:
        reason = merged.winner_verdict.reason if base_run else "the base was not tested"
        log(f"merged: the winner's own tip does not hold the base's tests ({reason})")
    merged.run = current
    merged.tip = git.head(place)
    git.remove_worktree(session.target, place)
    if not merged.added:
        delete_branch(session.target, merged.branch, merged.tip)
        merged.branch = ""
    record(session, merged, place)
    write_text(session.folder / FILE, describe(session, merged))
    return merged


def try_set(
    session: Session, place: Path, review: ReviewSet, current: TestRun
) -> tuple[Tried, TestRun | None]:
    """Cherry-pick one set onto the merged branch's tip; keep it only if it applies and the
    tests keep every test that passed on the tip before. The run, when it was kept."""

    def tried(added: bool, reason: str) -> Tried:
        return Tried(review.number, review.loop.track, set_title(review), added, reason)

    if not review.ok:
        why = review.verdict.reason if review.verdict else "not tested"
        return tried(False, f"not a win on its own: its tests fail alone ({why})"), None
    before = git.head(place)
    # The same replay as finalize's review branches (nothing a test run left reaches the
    # next): it recommits changes the session already made through the guard.
    failed = replay(place, before, review.commits)
    if failed is not None:
        git.reset_to(place, before, ignored=True)
        sha = review.commits[failed].sha[:12]
        return tried(False, f"does not apply cleanly: commit {sha} conflicts"), None
    if git.head(place) == before:
        return tried(False, "already on the winner's branch: the same change"), None
    run, verdict = graded_test(session, place, before, current)
    if not verdict.ok:
        git.reset_to(place, before, ignored=True)
        return tried(False, f"breaks the tests: {verdict.reason}"), None
    return tried(True, f"added: {run.summary}"), run


def describe(session: Session, merged: Merged) -> str:
    name = session.layout.name
    lines = [
        f"# Merged: {merged.winner} and the other tracks' wins",
        "",
        f"Broad session `{name}`: the winner {merged.winner} (branch `{merged.winner_branch}`, "
        "comparison.md) with each other track's review set cherry-picked on top, kept only "
        "when it applied cleanly and kept every test that passed before it.",
        "",
    ]
    if merged.branch:
        lines += [f"Branch: `{merged.branch}` at {merged.tip[:12]}.", ""]
    else:
        lines += [
            "No branch was made: nothing of the other tracks was added, so the winner's "
            f"branch `{merged.winner_branch}` is the merge.",
            "",
        ]
    for heading, added in (("## Added", True), ("## Left out", False)):
        sets = [t for t in merged.tried if t.added is added]
        shown = [f"- Set {t.number} (track {t.track}): {t.title}: {t.reason}" for t in sets]
        lines += [heading, "", *(shown or ["- none"]), ""]
    base_run = session.base_runs.get(merged.base)
    lines += [
        "## Tests",
        "",
        f"- Command: `{session.record.test_command}`, {session.jail}",
        f"- On the base {merged.base[:12]}: {base_run.summary if base_run else 'not run'}",
        f"- On the winner's tip: {merged.winner_run.summary if merged.winner_run else 'not run'}"
        + (f" ({merged.winner_verdict.reason})" if merged.winner_verdict else ""),
        f"- On the merged tip: {merged.run.summary if merged.run else 'not run'}",
    ]
    return "\n".join(lines) + "\n"


def commands(session: Session, merged: Merged, remote: str) -> list[list[str]]:
    body = session.folder / FILE
    title = f"{merged.winner} and {len(merged.added)} other tracks' changes"
    return [
        ["git", "-C", str(session.target), "push", remote, merged.branch],
        ["gh", "pr", "create", "--head", merged.branch, "--title", title, "--body-file", str(body)],
    ]

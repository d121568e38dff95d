"""Undoing a cycle in the one order the engine knows.

Refactor's commits newest first, then Green's newest first, each as a `git revert`; a
revert that conflicts ends it with a hard reset to the cycle's start commit. Evaluate
stops as soon as the tests pass again; narrow mode undoes the whole cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autoresearch.safety import git


def undo_cycle(
    worktree: Path,
    cycle_start: str,
    commits: list[str],
    *,
    good_again: Callable[[], bool] | None = None,
    why: str | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> list[dict[str, str]]:
    """Revert `commits` (newest first, in the order above) until `good_again()` holds.

    Without `good_again` every commit is undone, and a tree that still differs from the
    cycle's start (a commit no record names) is reset there; with it, a check that never
    held ends in that reset too. Returns what was undone, in order:
    {commit, subject, how: revert|reset[, why]}; the last entry is a `revert` exactly when
    `good_again()` held after it.
    """
    undone: list[dict[str, str]] = []

    def entry(sha: str, subject: str, how: str) -> dict[str, str]:
        item = {"commit": sha, "subject": subject, "how": how}
        return item | ({"why": why} if why else {})

    for sha in commits:
        subject = git.subject(worktree, sha)
        if not git.revert(worktree, sha):
            log(f"reverting {sha[:10]} conflicts; hard reset to {cycle_start[:10]}")
            git.reset_to(worktree, cycle_start)
            undone.append(entry(sha, subject, "reset"))
            return undone
        undone.append(entry(sha, subject, "revert"))
        if good_again is not None and good_again():
            return undone
    # Reaching here with a check means it never held: the cycle is undone whole.
    if good_again is not None or git.changed_files(worktree, cycle_start, "HEAD"):
        git.reset_to(worktree, cycle_start)
        undone.append(entry(cycle_start, "hard reset to cycle start", "reset"))
    return undone

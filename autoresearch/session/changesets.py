"""A session's kept commits grouped into independent change sets (docs/finalize.md).

The rule, deterministic and read from git alone: a commit builds on an earlier one of the
session when a line it changes, or a line next to one (a 3-way merge treats neighbouring
changes as one), was last written by that earlier commit (`git blame` at its parent); a
change git cannot show by lines (a binary file, a mode change) builds on every earlier
commit that touched the same file. Commits that build on each other, directly or through
others, form one set (union-find); the sets are ordered by their first commit. The replay
(review.py) is the check of the rule: a set that does not apply on the base alone is joined
with the set it collided with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autoresearch.errors import SessionError
from autoresearch.safety import git

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
BLAMED = re.compile(r"^([0-9a-f]{40}) \d+ \d+")


@dataclass(frozen=True)
class ChangeNote:
    """Why one kept commit was made, as its mode recorded it: a short title for the set it
    opens, and the lines of its description."""

    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    message: str
    files: tuple[str, ...]
    note: ChangeNote | None = None  # the mode's record of why it was made


def session_commits(worktree: Path, base: str, tip: str) -> list[Commit]:
    """The commits base..tip, oldest first; a merge commit is refused (the harness never
    makes one, and a replay of one commit at a time could not reproduce it)."""
    out = git.git(worktree, "rev-list", "--reverse", "--parents", f"{base}..{tip}")
    commits = []
    for line in out.splitlines():
        sha, *parents = line.split()
        if len(parents) != 1:
            raise SessionError(
                f"commit {sha[:12]} on the session branch is a merge: finalize replays the "
                "session's own commits one by one and cannot split a merge"
            )
        files = git.git(worktree, "diff-tree", "-r", "--no-renames", "--name-only", "-z", sha)
        commits.append(
            Commit(
                sha=sha,
                subject=git.subject(worktree, sha),
                message=git.git(worktree, "log", "-1", "--format=%B", sha),
                files=tuple(sorted(f for f in files.split("\0")[1:] if f)),
            )
        )
    return commits


def _line_count(worktree: Path, commit: str, path: str) -> int | None:
    """Lines of `path` at `commit`; None when the file is not there."""
    proc = git.raw(worktree, "cat-file", "blob", f"{commit}:{path}")
    if proc.returncode != 0:
        return None
    return len(proc.stdout.splitlines())


def touched_lines(worktree: Path, commit: str, path: str) -> list[tuple[int, int]] | None:
    """The ranges of lines of `path` at the commit's parent that the commit changes, each
    widened by one line on both sides; None when the change has no lines to show."""
    diff = git.git(worktree, "diff-tree", "-p", "-U0", "--no-renames", commit, "--", path)
    ranges = []
    for line in diff.splitlines():
        match = HUNK.match(line)
        if match:
            start, count = int(match.group(1)), int(match.group(2) or "1")
            # A pure insertion after line `start` (count 0) touches that line and the next.
            last = start + count - 1 if count else start + 1
            ranges.append((max(1, start - 1), last + 1))
    return ranges or None


def builds_on(worktree: Path, commit: Commit, earlier: dict[str, Commit]) -> set[str]:
    """The commits of `earlier` that `commit` builds on (the rule above)."""
    parent = f"{commit.sha}^"
    found: set[str] = set()
    for path in commit.files:
        size = _line_count(worktree, parent, path)
        if size is None:
            continue  # a new file: nothing of it was written before
        ranges = touched_lines(worktree, commit.sha, path)
        if ranges is None or size == 0:
            found |= {sha for sha, c in earlier.items() if path in c.files}
            continue
        args = ["blame", "--porcelain", "--ignore-revs-file", ""]
        for start, end in ranges:
            start, end = min(start, size), min(end, size)
            args += ["-L", f"{start},{end}"]
        out = git.git(worktree, *args, parent, "--", path)
        found |= {m.group(1) for m in map(BLAMED.match, out.splitlines()) if m} & set(earlier)
    return found


class Groups:
    """Union-find over indexes (of commits, of findings); a set is named by its smallest."""

    def __init__(self, size: int):
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)

    def sets(self) -> list[list[int]]:
        """Every set's indexes ascending, the sets by their first index."""
        out: dict[int, list[int]] = {}
        for i in range(len(self.parent)):
            out.setdefault(self.find(i), []).append(i)
        return [out[k] for k in sorted(out)]


def group(worktree: Path, commits: list[Commit]) -> Groups:
    """The commits (oldest first) joined by the rule above."""
    groups = Groups(len(commits))
    index = {c.sha: i for i, c in enumerate(commits)}
    for i, commit in enumerate(commits):
        earlier = {c.sha: c for c in commits[:i]}
        for sha in builds_on(worktree, commit, earlier):
            groups.join(i, index[sha])
    return groups


def collided_with(commits: list[Commit], failed: int, members: list[int]) -> int | None:
    """When commit `failed` did not apply with its own set (`members`), the commit it most
    likely needs: the latest earlier commit outside the set touching one of its files, else
    the latest earlier one outside the set; None when every earlier commit is in it."""
    own = set(commits[failed].files)
    outside = [i for i in range(failed - 1, -1, -1) if i not in members]
    return next(
        (i for i in outside if own & set(commits[i].files)), outside[0] if outside else None
    )


@dataclass(frozen=True)
class ReviewLoop:
    """One branch of a session whose kept commits finalize splits: the session's own, or
    a broad track's. `context` opens every description of its sets (the goal, the
    hypothesis)."""

    track: str
    branch: str
    base: str
    context: tuple[str, ...] = ()

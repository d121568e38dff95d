"""A session's kept commits grouped into independent change sets (docs/finalize.md).

The rule, deterministic and read from git alone: a commit builds on an earlier one of the
session when a line it changes, or a line next to one (a 3-way merge treats neighbouring
changes as one), was last written by that earlier commit (`git blame` at its parent); a
change git cannot show by lines (a binary file, a mode change) builds on every earlier
commit that touched the same file. Commits that build on each other, directly or through
others, form one set (union-find); the sets are ordered by their first commit. The replay
(review.py) is the check of the rule: a set that does not apply on the base alone is joined
with the set it collided with.

On top of that, the way a reviewer reads (`grouped`): mechanical changes of one kind (a
lint rule's fixes, the refactors) form one set, a behaviour change stays its own; when that
still makes more than MAX_SETS sets, the mechanical ones are joined by rule family, then
all into one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autoresearch.errors import SessionError
from autoresearch.safety import git

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
BLAMED = re.compile(r"^([0-9a-f]{40}) \d+ \d+")
# A finding named by a lint rule (ruff's and flake8's codes: F401, E711, UP035, RUF100):
# the fix is the rule's, mechanical, one of a kind with the rule's other fixes.
RULE = re.compile(r"^([A-Z]{1,4})([0-9]{1,4})\b")
REFACTOR = "refactor"  # the kind of a Refactor commit: behaviour kept, by its stage's contract
MAX_SETS = 4  # the sets a reviewer gets by default, where the mechanical ones allow it
GROUPINGS = ("kind", "one", "commit")  # finalize's --one-set, --per-commit


@dataclass(frozen=True)
class ChangeNote:
    """Why one kept commit was made, as its mode recorded it: a short title for the set it
    opens, and the lines of its description."""

    title: str
    lines: tuple[str, ...]
    # What kind of change: a lint rule's code (mechanical, one set with the rule's other
    # fixes), REFACTOR, or "" for a change of behaviour (a set of its own).
    kind: str = ""


def rule_of(title: str) -> str:
    """The lint rule a finding's title opens with (`F401 ...`), else ""."""
    match = RULE.match(title.strip())
    return match.group(0) if match else ""


def family(kind: str) -> str:
    """A rule's family, its letters (F401 -> F, UP035 -> UP); REFACTOR is its own."""
    match = RULE.match(kind)
    return match.group(1) if match else kind


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

    def copy(self) -> Groups:
        other = Groups(0)
        other.parent = list(self.parent)
        return other

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


def kind_of(commit: Commit) -> str:
    return commit.note.kind if commit.note is not None else ""


def grouped(groups: Groups, commits: list[Commit], how: str = "kind") -> Groups:
    """The sets a reviewer gets, from the rule's sets (`groups`, left as they are): `commit`,
    those sets as they are (a set per commit wherever the lines allow); `one`, every commit
    in one set; `kind` (the default), each mechanical kind's sets joined, then each family's
    and then all mechanical ones together while there are more than MAX_SETS sets. A set
    holding a behaviour change is never joined with another but by the rule."""
    if how == "commit" or not commits:
        return groups
    if how == "one":
        whole = groups.copy()
        for i in range(1, len(commits)):
            whole.join(0, i)
        return whole
    alike = fixed_alike(commits)
    trial = groups
    for key in (lambda kind: alike.get(kind, kind), family, lambda kind: "mechanical"):
        trial = groups.copy()
        firsts: dict[str, int] = {}
        for members in groups.sets():
            kinds = [kind_of(commits[i]) for i in members]
            if all(kinds):  # a set of mechanical changes only: its first commit's kind
                trial.join(firsts.setdefault(key(kinds[0]), members[0]), members[0])
        if len(trial.sets()) <= MAX_SETS:
            break
    return trial


def fixed_alike(commits: list[Commit]) -> dict[str, str]:
    """Each rule's stand-in kind: rules of one family whose fixes are told in the same words
    (RET505's and RET508's "Remove unnecessary `else`", after a return and after a break)
    are one change to a reviewer, so one set."""
    parent: dict[str, str] = {}

    def root(kind: str) -> str:
        while parent.setdefault(kind, kind) != kind:
            kind = parent[kind]
        return kind

    told: dict[tuple[str, str], str] = {}
    for commit in commits:
        kind = kind_of(commit)
        if commit.note is None or not RULE.match(kind):
            continue
        first = told.setdefault((family(kind), commit.note.title), kind)
        parent[root(kind)] = root(first)
    return {kind: root(kind) for kind in parent}


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

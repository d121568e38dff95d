"""Git operations on the target: worktrees, branches, commits, resets, reverts.

Everything here runs in a session's own worktree or touches only refs under
autoresearch/; the user's checkout (branch, index, working tree) is never used.
"""

from __future__ import annotations

import fcntl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

AUTHOR = ["-c", "user.name=autoresearch", "-c", "user.email=autoresearch@localhost"]


class GitError(RuntimeError):
    pass


def git(repo: Path | str, *args: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", *AUTHOR, *args],
        cwd=str(repo),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def is_repo(path: Path) -> bool:
    if not path.is_dir():
        return False
    proc = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"],
        cwd=str(path),
        capture_output=True,
        text=True,
    )
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def toplevel(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--show-toplevel"))


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def is_dirty(repo: Path) -> bool:
    return bool(git(repo, "status", "--porcelain"))


def branch_exists(repo: Path, branch: str) -> bool:
    return bool(git(repo, "branch", "--list", branch))


def current_branch(repo: Path) -> str:
    return git(repo, "rev-parse", "--abbrev-ref", "HEAD")


def snapshot(repo: Path) -> dict[str, str]:
    """What the user sees: branch, HEAD, index and working tree state."""
    return {
        "branch": current_branch(repo),
        "head": head(repo),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "index": git(repo, "ls-files", "--stage"),
        "diff": git(repo, "diff", "HEAD"),
    }


@contextmanager
def repo_lock(repo: Path) -> Iterator[None]:
    """Serialise ref and worktree changes on one repository (parallel broad tracks)."""
    common = Path(git(repo, "rev-parse", "--git-common-dir"))
    if not common.is_absolute():
        common = Path(repo) / common
    with open(common / "autoresearch.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def free_branch_name(repo: Path, wanted: str) -> str:
    """`wanted`, or `wanted-2`, `wanted-3`... whichever is not taken yet."""
    if not branch_exists(repo, wanted):
        return wanted
    n = 2
    while branch_exists(repo, f"{wanted}-{n}"):
        n += 1
    return f"{wanted}-{n}"


def add_worktree(repo: Path, worktree: Path, branch: str, start: str) -> None:
    """Create `branch` at `start` checked out in `worktree`; reuse it if a rerun finds it."""
    with repo_lock(repo):
        if (worktree / ".git").exists():
            if current_branch(worktree) != branch:
                raise GitError(f"{worktree} exists but is not on branch {branch}")
            return
        git(repo, "worktree", "prune")
        worktree.parent.mkdir(parents=True, exist_ok=True)
        if branch_exists(repo, branch):
            git(repo, "worktree", "add", str(worktree), branch)
        else:
            git(repo, "worktree", "add", "-b", branch, str(worktree), start)


def reset_to(worktree: Path, commit: str) -> None:
    """Return the worktree to `commit` exactly: no stacked commits, no stray files."""
    git(worktree, "reset", "--hard", commit)
    git(worktree, "clean", "-fd")


def restore(worktree: Path) -> None:
    """Throw away uncommitted changes (a failed fix)."""
    reset_to(worktree, "HEAD")


def commit_all(worktree: Path, message: str) -> str | None:
    """Commit every change in the worktree; None when there is nothing to commit."""
    git(worktree, "add", "-A")
    if not git(worktree, "status", "--porcelain"):
        return None
    git(worktree, "commit", "-q", "--no-verify", "-m", message)
    return head(worktree)


def commits_between(worktree: Path, start: str, end: str = "HEAD") -> list[str]:
    """Commits in start..end, newest first."""
    out = git(worktree, "rev-list", f"{start}..{end}")
    return out.split() if out else []


def subject(worktree: Path, commit: str) -> str:
    return git(worktree, "log", "-1", "--format=%s", commit)


def changed_files(worktree: Path, start: str, end: str = "HEAD") -> list[str]:
    out = git(worktree, "diff", "--name-only", start, end)
    return sorted(out.splitlines()) if out else []


def revert(worktree: Path, commit: str) -> bool:
    """Revert one commit; False (and the revert abandoned) on a conflict."""
    proc = subprocess.run(
        ["git", *AUTHOR, "revert", "--no-edit", commit],
        cwd=str(worktree),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        git(worktree, "revert", "--abort", check=False)
        return False
    return True


def stash(repo: Path, message: str) -> None:
    git(repo, "stash", "push", "--include-untracked", "-m", message)

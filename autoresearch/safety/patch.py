"""An agent's change in a worktree: the files it wrote that differ from HEAD, those files
as a patch, and the patch applied again. Every mode whose agent hands in one change reads
it through these."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from autoresearch.safety import git


def changed_of(worktree: Path, written: Iterable[str]) -> list[str]:
    """Written files that differ from HEAD (an edit undone by a later one is no change).
    Only what the agent wrote makes up its change: the tests or the measurement may leave
    other files behind."""
    if not written:
        return []
    out = git.worktree_proc(
        worktree, "status", "--porcelain", "-z", "-uall", "--", *sorted(written)
    ).stdout
    return sorted({entry[3:] for entry in out.split("\0") if len(entry) > 3})


def make_patch(worktree: Path, files: list[str]) -> str:
    """`files` as they differ from HEAD, as a binary patch; the index is left as it was."""
    git.worktree_git(worktree, "add", "-A", "--", *files)
    proc = git.raw(worktree, "diff", "--cached", "--binary", "--", *files)
    git.worktree_git(worktree, "reset", "-q")
    if proc.returncode != 0:
        raise git.GitError(f"git diff --cached failed in {worktree}: {proc.stderr.decode()}")
    # Decoded by hand: text mode would turn a CRLF file's "\r\n" lines into "\n" ones,
    # and the patch would no longer apply to the file it was made from.
    return proc.stdout.decode()


def apply_patch(worktree: Path, patch: Path) -> str | None:
    """Apply a patch `make_patch` made, staged, in `worktree`: None, or why it does not
    apply (git's words)."""
    proc = git.worktree_proc(worktree, "apply", "--index", "--binary", str(Path(patch).resolve()))
    return proc.stderr.strip() if proc.returncode != 0 else None

"""The protected paths of a session and the one door every harness commit goes through
(which also refuses a change that is mostly a reformat, restyle.py).

A protected file (the spec's `protected`, plus what a mode adds at setup: narrow's
measurement script, experiment's program and metric files, fix's guard) must stay
byte-identical to the session's base commit. The agents' file tools refuse to write them,
but a command can still change one (code under test that rewrites `bench.py` on import),
so the check is made again on the files themselves, right before anything is committed,
and before anything is measured (`pristine`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from autoresearch.safety import git, restyle, tamper, worktree_files
from autoresearch.safety.sandbox import glob_match


@dataclass(frozen=True)
class Kept:
    """What `Protection.take_written` left staged: the agent's paths, and what the index
    changes against HEAD (git.staged_changes)."""

    files: list[str]
    changes: tuple[git.Staged, ...]


class ProtectedChange(Exception):
    """A change touched protected files; they were restored and the change is not kept."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        noun = "file" if len(paths) == 1 else "files"
        self.reason = f"protected {noun} {shown} changed: restored, change rejected"
        super().__init__(self.reason)


class TamperFlagged(ProtectedChange):
    """The change reaches into the process that tests or measures it (tamper.py) and the
    spec does not allow that flag: the worktree was restored and the change is not kept."""

    def __init__(self, flags: list[tamper.Flag]) -> None:
        super().__init__(sorted({f.path for f in flags}))
        self.flags = flags
        self.reason = tamper.screen_refusal(flags)
        self.args = (self.reason,)


class AlteredWrite(ProtectedChange):
    """A file the agent wrote was changed by a command afterwards (rewritten, deleted, made
    a link): what would be committed is not what the agent wrote."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        self.reason = f"{shown} changed by a command after the agent wrote it: change rejected"
        self.args = (self.reason,)


class Reformatted(ProtectedChange):
    """The change rewrites a file's layout far beyond what it changes in code (restyle.py):
    the worktree was put back and the change is not kept."""

    def __init__(self, found: list[restyle.Restyled]) -> None:
        super().__init__([r.path for r in found])
        self.reason = "; ".join(r.reason() for r in found)


class NestedRepository(ProtectedChange):
    """The change would commit a gitlink nobody wrote (a nested repository a command made,
    or a submodule moved to another commit): the worktree is restored, the change rejected."""

    def __init__(self, refused: git.GitlinkRefused) -> None:
        super().__init__(refused.paths)
        self.reason = refused.reason
        self.args = (self.reason,)


def _digest(worktree: Path, rel: str) -> str | None:
    """sha256 of the worktree's file `rel` as the worktree reader reads it; None when it
    refuses it (a link out, not a regular file, larger than the agent could have written)."""
    try:
        data = worktree_files.read_bytes(worktree, rel, max_bytes=worktree_files.MAX_WRITE_BYTES)
    except worktree_files.Refused:
        return None
    return hashlib.sha256(data).hexdigest()


def _literal(path: str) -> str:
    # A file name with glob characters must name that file only.
    return f":(literal){path}"


@dataclass(frozen=True)
class Protection:
    """The protected globs of one session and the commit they are held to."""

    base: str
    patterns: tuple[str, ...] = ()
    # The tamper screen every change passes before it is tested and committed (None: the
    # mode screens its changes itself, as experiment does); `log` hears what it let through.
    screen: tamper.Screen | None = None
    log: Callable[[str], None] | None = None

    def screen_index(
        self, worktree: Path, changes: tuple[git.Staged, ...] | None = None
    ) -> list[tamper.Flag]:
        """Screen what the index holds against HEAD: TamperFlagged (after restoring HEAD)
        when a flag the spec does not allow is raised; the flags it let through.
        `changes`: the index's changes as the caller just read them (git.staged_changes)."""
        if self.screen is None:
            return []
        blocking, allowed = self.screen.split(self.screen.flags(worktree, changes=changes))
        if blocking:
            git.restore(worktree)
            raise TamperFlagged(blocking)
        if allowed and self.log is not None:
            self.log(
                "kept although flagged (allow_tamper_flags): " + tamper.summary(allowed, limit=5)
            )
        return allowed

    def covers(self, rel: str) -> bool:
        return any(glob_match(rel, pattern) for pattern in self.patterns)

    def changed(self, worktree: Path) -> list[str]:
        """Protected paths whose working-tree or staged content differs from the base
        commit (deleted, edited, added to the index)."""
        return self._listed(
            worktree,
            ("diff", "--name-only", "--no-renames", "-z", self.base, "--"),
            ("diff", "--cached", "--name-only", "--no-renames", "-z", self.base, "--"),
        )

    def strays(self, worktree: Path) -> list[str]:
        """New untracked files under protected paths (a test run's `tests/__pycache__`)."""
        return self._listed(worktree, ("ls-files", "--others", "--exclude-standard", "-z"))

    def _listed(self, worktree: Path, *calls: tuple[str, ...]) -> list[str]:
        if not self.patterns:
            return []
        found: set[str] = set()
        for args in calls:
            proc = git.worktree_proc(worktree, *args)
            if proc.returncode != 0:
                raise git.GitError(f"git {' '.join(args)} failed in {worktree}: {proc.stderr}")
            found.update(p for p in proc.stdout.split("\0") if p)
        return sorted(p for p in found if self.covers(p))

    def restore(self, worktree: Path, paths: list[str]) -> None:
        """Put `paths` back as the base commit has them (in the index and on disk); a path
        the base does not have is removed."""
        for rel in paths:
            in_base = git.worktree_proc(worktree, "cat-file", "-e", f"{self.base}:{rel}")
            if in_base.returncode == 0:
                git.worktree_git(worktree, "checkout", self.base, "--", _literal(rel))
                continue
            git.worktree_git(
                worktree, "rm", "-q", "--cached", "--ignore-unmatch", "--", _literal(rel)
            )
            target = Path(worktree) / rel
            if target.is_file() or target.is_symlink():
                target.unlink()

    def enforce(self, worktree: Path) -> None:
        """Raise ProtectedChange, after restoring them, if protected files changed. New
        untracked files there are removed, never committed, but reject nothing: commands
        leave caches in protected folders, and the agents' tools cannot write there."""
        self.restore(worktree, self.strays(worktree))
        changed = self.changed(worktree)
        if changed:
            self.restore(worktree, changed)
            raise ProtectedChange(changed)

    def commit(
        self,
        worktree: Path,
        message: str,
        *,
        staged: bool = False,
        changes: tuple[git.Staged, ...] | None = None,
    ) -> str | None:
        """The one way the harness commits agent work: every change (`staged`: only what
        is in the index), after `enforce`. None when there is nothing to commit. A change
        that is mostly a reformat of a file is not committed (Reformatted), whoever made it.
        `changes`: what the index changes, as `take_written` just read it (`Kept.changes`),
        with nothing run in the worktree since."""
        self.enforce(worktree)
        if not staged:
            git.worktree_git(worktree, "add", "-A")
            changes = None
        # What the index changes, read once: the restyle check, whether there is anything
        # to commit and the tamper screen all ask it. (After `add -A` the index holds the
        # worktree's every change, which the restyle check read from the files before.)
        if changes is None or self.patterns:  # `enforce` may have restored a path
            changes = git.staged_changes(worktree)
        found = restyle.pending(worktree, staged=True, changes=changes)
        if found:
            git.restore(worktree)
            raise Reformatted(found)
        if not changes:
            return None
        self.screen_index(worktree, changes)
        try:
            return git.commit_index(worktree, message, changed=True)
        except git.GitlinkRefused as err:
            git.restore(worktree)
            raise NestedRepository(err) from None

    def keep_written(self, worktree: Path, written: Mapping[str, str]) -> list[str]:
        """Leave only the agent's own writes in the worktree, staged: every other change
        and new file is removed, so what a command left behind (a link a test made, a file
        it rewrote) never reaches a commit. `written`: path -> sha256 of what the agent's
        tools wrote (Toolbox.written). Returns the paths changed; AlteredWrite (after
        restoring HEAD) when a command changed one of them after the agent wrote it."""
        kept = self.take_written(worktree, written)
        return kept.files if kept else []

    def take_written(self, worktree: Path, written: Mapping[str, str]) -> Kept | None:
        """`keep_written`, with what the index then changes against HEAD (for `commit`), or
        None when the worktree held no change at all (nothing staged once the index is put
        back to HEAD, nothing unstaged, nothing untracked): then nothing else is done. One
        `git status` of the whole worktree answers both; the git calls run in two jails,
        each call's output read after its jail ended."""
        status = ("status", "--porcelain", "-z", "--no-renames", "-uall")
        out = git.worktree_batch_git(worktree, ("reset", "-q"), status)
        entries = [e for e in out.split("\0") if len(e) > 3]
        if not entries:
            return None
        files = sorted({e[3:] for e in entries if e[3:] in written})
        altered = [p for p in files if _digest(worktree, p) != written[p]]
        if altered:
            git.restore(worktree)
            raise AlteredWrite(altered)
        calls = [("add", "-A", "--", *map(_literal, files))] if files else []
        calls += [("checkout", "--", "."), ("clean", "-ffdq"), git.staged_args()]
        # `checkout` fails when no path is tracked: fine. `clean -ff`: nested repositories too.
        out = git.worktree_batch_git(worktree, *calls, may_fail=frozenset({len(calls) - 3}))
        changes = git.parse_staged(out)
        if files:  # before the gate runs the agent's code at all
            self.screen_index(worktree, changes)
        return Kept(files, changes)

    def commit_added(self, worktree: Path, paths: list[str], message: str) -> str:
        """The harness's own new files (the fix lens's regression tests), committed alone,
        protected or not: every other protected path must be as the base has it."""
        self.restore(worktree, [p for p in self.strays(worktree) if p not in paths])
        changed = [p for p in self.changed(worktree) if p not in paths]
        if changed:
            self.restore(worktree, changed)
            raise ProtectedChange(changed)
        git.worktree_git(worktree, "add", "--", *(_literal(p) for p in paths))
        try:
            git.commit_index(worktree, message)
        except git.GitlinkRefused as err:  # a path that is a nested repository
            git.restore(worktree)
            raise NestedRepository(err) from None
        return git.head(worktree)

    def pristine(self, worktree: Path, commit: str) -> list[str]:
        """Make `worktree` hold exactly `commit`: no change, no untracked and no ignored
        file (`git clean -fdx`), protected files as the base has them. Returns the
        protected paths that had to be restored (then the tree differs from `commit`)."""
        return self.pristine_state(worktree, commit)[0]

    def pristine_state(self, worktree: Path, commit: str) -> tuple[list[str], git.TreeState | None]:
        """`pristine`, and the status it read when the worktree was exact already and no
        protected path had to be restored (else None): what `tested.exact_tree` reads next."""
        state = git.reset_to(worktree, commit, ignored=True)
        changed = self.changed(worktree)
        self.restore(worktree, changed)
        return changed, (None if changed else state)

"""Where an agent's file tools may reach, and how they touch files there.

Reach: one worktree, less .git, protected, git-ignored and out-of-scope paths. Touch:
regular files only, never a hard link to a file outside, and every write atomic. Every
path an agent names goes through `Sandbox.resolve` before any file is touched. The
checks are deliberately stricter than the filesystem needs (a `..` that would land back
inside the worktree is still refused): a model that tries to climb out should get a plain
refusal, not a puzzle about which spellings happen to work.
"""

from __future__ import annotations

import os
import posixpath
import re
import secrets
import stat
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

import regex

from autoresearch.safety import git, worktree_files
from autoresearch.safety.worktree_files import Refused

MAX_PATH_CHARS = 4096  # PATH_MAX: anything longer names no file

__all__ = ["Hidden", "Refused", "Sandbox", "glob_match"]


class Hidden(Refused):
    """A path the agent must not learn of: each tool answers as for a missing one."""


def _set_member(char: str) -> str:
    return "\\" + char if char in "\\]^-[" else char


def _char_class(pattern: str, i: int) -> tuple[str, int] | None:
    """The regex for the glob class opening at pattern[i] and the index after it; None
    when the `[` has no closing `]` and so stands for itself.

    As in .gitignore: `!` or `^` first negates, a `]` first is a member, `a-z` is a range,
    a backslash is a plain member; a negated class never matches `/`.
    """
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    start = j
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    if end == -1:
        return None
    body = pattern[start:end]
    members: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            if low > high:
                raise ValueError(f"glob {pattern!r}: the range {low}-{high} is reversed")
            members.append(f"{_set_member(low)}-{_set_member(high)}")
            k += 3
        else:
            members.append(_set_member(body[k]))
            k += 1
    text = "".join(members)
    return (f"[^/{text}]" if negate else f"[{text}]"), end + 1


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> regex.Pattern[str]:
    """Translate a path glob: `*` and `?` stay within one directory, `**` spans directories.

    Raises ValueError for a glob that cannot mean anything (a reversed range).
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            while pattern.startswith("**/", i):  # `**/**/` says no more than `**/`
                i += 3
            out.append("(?:.*/)?")  # zero or more whole directories
        elif pattern.startswith("**", i):
            while i < len(pattern) and pattern[i] == "*":
                i += 1
            out.append(".*")
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[" and (translated := _char_class(pattern, i)) is not None:
            out.append(translated[0])
            i = translated[1]
        else:
            out.append(regex.escape(char))
            i += 1
    return regex.compile("".join(out) + r"\Z")


def check_glob(pattern: str) -> str | None:
    """Why a spec glob is unusable, or None; for the spec check."""
    try:
        _glob_regex(pattern)
    except (ValueError, regex.error) as err:
        return str(err)
    return None


def glob_match(rel: str, pattern: str, *, timeout: float | None = None) -> bool:
    """Whether a worktree-relative POSIX path matches a spec glob.

    A pattern also matches everything below a directory it names (`tests` covers
    `tests/a.py`), and a pattern without `/` matches a file name anywhere (`*.lock`),
    the way people expect from .gitignore, unless it starts with `./` (`./setup.py` is
    the one at the top only). `timeout` caps the matching time (an agent's
    glob such as `**a**a**a**b` can take very long on a long path): TimeoutError.
    """
    pattern = pattern.strip()
    anchored = pattern.startswith("./")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
    if not pattern:
        return False
    compiled = _glob_regex(pattern)
    parts = rel.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    if "/" not in pattern and not anchored:
        candidates += parts
    return any(compiled.match(candidate, timeout=timeout) for candidate in candidates)


def _is_absolute(path: str) -> bool:
    return path.startswith(("/", "\\")) or bool(re.match(r"^[A-Za-z]:", path))


HIDDEN = "[hidden]"
# A name someone coined (snake_case, a digit, camelCase) is no word of any output: it goes
# wherever it stands as a word. A plain word (test, eval, check) is a word of every output:
# it goes only where it stands as the hidden file's name. Hiding it everywhere garbled each
# test run ("3 [hidden]s passed (py[hidden])"), and the gaps told which word the name was.
_COINED = re.compile(r"(?!__\w+__$)(?:[A-Za-z_]\w*(?:_|\d|[a-z][A-Z])\w*|_\w+)")
_NAME = r"[\w.-]"  # a character of a file name: a match inside a longer name is another file
_MODULE = r"(?:[\w.]+\.)?"  # the package path before a module's name


def redact(text: str, paths: list[str]) -> str:
    """`text` without the hidden paths' names: each path, file name with its extension and
    dotted module path as a name (never inside a longer one), and each bare name (a stem,
    an extensionless file or folder) where it names the file: imported, quoted, compiled
    (`name.cpython-311.pyc`); anywhere as a word when it is coined."""
    tokens: set[str] = set()
    stems: set[str] = set()
    for path in paths:
        path = path.strip("/")
        name = posixpath.basename(path)
        stem, ext = posixpath.splitext(name)
        tokens |= {p for p in (path, name) if "/" in p or ext or p.startswith(".")}
        if "/" in path and ext == ".py":
            tokens.add(posixpath.splitext(path)[0].replace("/", "."))
        stems.add(stem)
    tokens = {t for t in tokens if len(t) >= 3}
    if tokens:
        names = "|".join(map(re.escape, sorted(tokens, key=len, reverse=True)))
        text = re.sub(rf"(?<!{_NAME})(?:{names})(?![\w-])", HIDDEN, text)
    for stem in sorted((s for s in stems if len(s) >= 3), key=len, reverse=True):
        word = re.escape(stem)
        if _COINED.fullmatch(stem):
            text = re.sub(rf"(?<!\w){word}(?!\w)", HIDDEN, text, flags=re.IGNORECASE)
            continue
        contexts = (
            rf"(\bimport\s+(?:[\w.]+\s*,\s*)*{_MODULE}){word}(?!\w)()",  # import a, pkg.name
            rf"(\bfrom\s+{_MODULE}){word}(\s+import\b)",
            rf"(['\"]{_MODULE}){word}(['\"])",  # No module named 'name', a listing's 'name'
            rf"((?<!{_NAME})){word}(\.(?:cpython-|pypy|pyc\b|pyo\b))",  # its compiled copy
        )
        for context in contexts:
            text = re.sub(context, rf"\1{HIDDEN}\2", text)
    return text


@dataclass
class Sandbox:
    """The rules for one worktree. `root` must be the worktree's top directory."""

    root: Path
    protected: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    allow_ignored_writes: bool = False
    # Paths the agent must not learn of (an experiment's holdout): refused as if absent.
    hidden: list[str] = field(default_factory=list)
    # (st_dev, st_ino) -> how many names the file has inside the worktree; built on demand
    # and dropped by `forget` (each tool call), since files change between calls.
    _links: Counter[tuple[int, int]] | None = field(default=None, init=False, repr=False)
    _mounts: list[Path] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    # -- path checks -------------------------------------------------------------------

    def _check_spelling(self, path: str) -> None:
        """Refuse spellings that could mean somewhere else, before touching the disk."""
        if len(path) > MAX_PATH_CHARS:
            raise Refused(f"path is longer than {MAX_PATH_CHARS} characters")
        if any(ord(c) < 32 for c in path):
            raise Refused("path contains a control character (NUL, newline, ...)")
        # A model may have learnt that %2e%2e means "..": judge the decoded form too.
        for form in {path, unquote(path)}:
            if form.startswith("~"):
                raise Refused(
                    "paths starting with '~' are not allowed; "
                    "use a path relative to the repository root"
                )
            if _is_absolute(form):
                raise Refused(
                    "absolute paths are not allowed; use a path relative to the repository root"
                )
            parts = re.split(r"[/\\]", form)
            if ".." in parts:
                raise Refused(
                    "'..' is not allowed in paths; use a path relative to the repository root"
                )
            if any(part.lower() == ".git" for part in parts):
                raise Refused("the .git directory is managed by the harness and cannot be accessed")

    def resolve(self, path: str, *, write: bool = False) -> tuple[Path, str]:
        """Return (absolute path, worktree-relative POSIX path) or raise Refused.

        `write` adds the scope, protected-path and ignored-path checks. The empty path
        and "." name the worktree root, which only read tools may use.
        """
        if not isinstance(path, str):
            raise Refused("path must be a string")
        self._check_spelling(path)
        path = path.strip(" ")
        try:
            target = (self.root / path).resolve() if path not in ("", ".") else self.root
        except (RuntimeError, OSError) as err:  # RuntimeError: a symlink loop
            raise Refused(f"{path!r} cannot be resolved ({err})") from None
        # resolve() has followed every symlink, so this also catches links that lead out.
        if target != self.root and not target.is_relative_to(self.root):
            raise Refused(f"{path!r} leads outside the repository (through a symlink)")
        if any(target.is_relative_to(mount) for mount in self._mounts_inside()):
            raise Refused(f"{path!r} lies in a filesystem mounted inside the repository")
        rel = target.relative_to(self.root).as_posix() if target != self.root else ""
        if any(part.lower() == ".git" for part in rel.split("/")):
            raise Refused("the .git directory is managed by the harness and cannot be accessed")
        # Where it lands (through a link) and the name used: either hidden reads as absent.
        if self.is_hidden(rel) or self.is_hidden(posixpath.normpath(path.replace("\\", "/"))):
            raise Hidden(f"{path!r} does not exist")
        if write:
            if not rel:
                raise Refused("cannot write the repository root itself")
            # Judge both the name the agent used and where it really lands.
            named = posixpath.normpath(path.replace("\\", "/"))
            for candidate in {rel, named}:
                if self.is_protected(candidate):
                    # Named: narrow adds the tests and the measurement's files to the list,
                    # which the user's spec never shows (session.yaml does).
                    by = next(p for p in self.protected if glob_match(candidate, p))
                    # Where to look: wcwidth's bench read table_wide.py, and "in spec key
                    # `protected`" sent its user to a spec that never named it.
                    raise Refused(
                        f"{candidate!r} is protected (by `{by}` in session.yaml's `protected`: "
                        "the spec's list, and what setup adds: the files the measurement "
                        "reads, the tests) and cannot be changed"
                    )
                if not self.in_scope(candidate):
                    raise Refused(
                        f"{candidate!r} is outside the scope the spec allows changes in "
                        "(spec keys `scope.include` / `scope.exclude`)"
                    )
            if not self.allow_ignored_writes and self.is_ignored(rel):
                raise Refused(
                    f"{rel!r} is ignored by git, so a change there would never be committed "
                    "or reviewed (spec key `allow_ignored_writes`)"
                )
        return target, rel

    def is_hidden(self, rel: str) -> bool:
        return any(rel == h or rel.startswith(f"{h}/") for h in self.hidden)

    def redact(self, text: str) -> str:
        """`text` (a command's output) without the hidden paths' names: the command ran the
        agent's code, which can list a folder the jail cannot empty."""
        return redact(text, self.hidden)

    def is_protected(self, rel: str) -> bool:
        return any(glob_match(rel, pattern) for pattern in self.protected)

    def in_scope(self, rel: str) -> bool:
        if self.include and not any(glob_match(rel, p) for p in self.include):
            return False
        return not any(glob_match(rel, p) for p in self.exclude)

    def is_ignored(self, rel: str) -> bool:
        """Whether git ignores `rel` here (tracked files never are). Outside a git
        checkout nothing is ignored; a checkout git cannot read counts as all ignored."""
        if not (self.root / ".git").exists():
            return False
        proc = git.raw(self.root, "check-ignore", "-q", "--", rel, timeout=60)
        if proc.returncode not in (0, 1):
            raise Refused(f"cannot tell whether {rel!r} is ignored: {proc.stderr.decode().strip()}")
        return proc.returncode == 0

    # -- touching files ------------------------------------------------------------------

    def forget(self) -> None:
        """Drop what was learnt about the worktree's files (call once per tool call)."""
        self._links = None
        self._mounts = None

    def _mounts_inside(self) -> list[Path]:
        """Mount points below the root: a bind mount leads outside with no link to see."""
        if self._mounts is None:
            mounts = []
            try:
                table = Path("/proc/self/mountinfo").read_text()
            except OSError:
                table = ""  # no /proc: the st_dev check on each file still applies
            for line in table.splitlines():
                fields = line.split(" ")
                if len(fields) < 5:
                    continue
                point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4]))
                if point != self.root and point.is_relative_to(self.root):
                    mounts.append(point)
            self._mounts = mounts
        return self._mounts

    def _names(self, root: Path, key: tuple[int, int]) -> int:
        """worktree_files.NamesInside for this worktree: every file counted once, till forget."""
        if self._links is None:
            links: Counter[tuple[int, int]] = Counter()
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if d != ".git"]
                for name in filenames:
                    try:
                        st = os.lstat(os.path.join(dirpath, name))
                    except OSError:
                        continue
                    if st.st_nlink > 1:
                        links[(st.st_dev, st.st_ino)] += 1
            self._links = links
        return self._links[key]

    def _check_file(self, st: os.stat_result, rel: str, *, write: bool = False) -> None:
        """The reader's rules (a regular file of this worktree's own); for a write, also no
        other names (a change through one name would show under the others)."""
        worktree_files.check_file(st, rel, self.root, self._names)
        if write and st.st_nlink > 1:
            raise Refused(f"{rel!r} has other names (hard links) and cannot be changed")

    def read_bytes(self, rel: str, limit: int) -> bytes:
        """The content of a regular file of the worktree, at most `limit` bytes or Refused."""
        return worktree_files.read_bytes(self.root, rel, max_bytes=limit, names=self._names)

    def write_bytes(self, target: Path, rel: str, data: bytes) -> bool:
        """Replace or create a worktree file atomically: a failure leaves the old content.

        The new content goes to a temporary file beside it that is renamed over the old
        name, so a hard link elsewhere never sees the write. Returns whether it existed.
        """
        try:
            old = os.lstat(target)
        except FileNotFoundError:
            old = None
        if old is not None:
            self._check_file(old, rel, write=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Every parent of a path resolve() accepted is inside the worktree; check again
        # in case one was swapped for a link meanwhile.
        if not target.parent.resolve().is_relative_to(self.root):
            raise Refused(f"{rel!r} leads outside the repository (through a symlink)")
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.autoresearch-tmp")
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
        )
        try:
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            with os.fdopen(fd, "wb", closefd=False) as handle:
                handle.write(data)
            os.close(fd)
            fd = -1
            os.replace(tmp, target)
        except BaseException:
            if fd != -1:
                os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        self.forget()
        return old is not None

    # -- listing -------------------------------------------------------------------

    def files(self) -> list[str]:
        """Files of the worktree (tracked or new, never ignored), in scope, sorted."""
        return [rel for rel, _ in self.listing()]

    def listing(self) -> list[tuple[str, Path]]:
        """`files()` with the path each name resolves to (a link inside: its target)."""
        try:
            args = ("ls-files", "--cached", "--others", "--exclude-standard", "-z")
            proc = git.raw(self.root, *args, timeout=60)
            if proc.returncode != 0:
                raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout)
            names = [n for n in proc.stdout.decode("utf-8", "replace").split("\0") if n]
        except (OSError, subprocess.SubprocessError):
            # Not a git checkout (a bare directory in tests or demos): walk it, minus .git.
            names = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if d != ".git"]
                base = Path(dirpath).relative_to(self.root)
                names += [(base / f).as_posix() for f in filenames]
        result = {}
        for name in names:
            # The index may list files deleted in the worktree, and links that lead out.
            try:
                if not (self.root / name).is_file():
                    continue
                target, _ = self.resolve(name)
            except (Refused, OSError):
                continue
            if self.in_scope(name) and not self.is_hidden(name):
                result[name] = target
        return sorted(result.items())

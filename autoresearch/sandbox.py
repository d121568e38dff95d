"""Where an agent's file tools may reach: one worktree, less .git, protected and out-of-scope paths.

Every path an agent names goes through `Sandbox.resolve` before any file is touched. The
checks are deliberately stricter than the filesystem needs (a `..` that would land back
inside the worktree is still refused): a model that tries to climb out should get a plain
refusal, not a puzzle about which spellings happen to work.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote


class Refused(Exception):
    """A path or action the sandbox will not allow; the message goes back to the agent."""


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a path glob: `*` and `?` stay within one directory, `**` spans directories."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")  # zero or more whole directories
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(char))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(rel: str, pattern: str) -> bool:
    """Whether a worktree-relative POSIX path matches a spec glob.

    A pattern also matches everything below a directory it names (`tests` covers
    `tests/a.py`), and a pattern without `/` matches a file name anywhere (`*.lock`),
    the way people expect from .gitignore.
    """
    pattern = pattern.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
    if not pattern:
        return False
    regex = _glob_regex(pattern)
    parts = rel.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    if "/" not in pattern:
        candidates += parts
    return any(regex.match(candidate) for candidate in candidates)


def _is_absolute(path: str) -> bool:
    return path.startswith(("/", "\\")) or bool(re.match(r"^[A-Za-z]:", path))


@dataclass
class Sandbox:
    """The rules for one worktree. `root` must be the worktree's top directory."""

    root: Path
    protected: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    # -- path checks -------------------------------------------------------------------

    def _check_spelling(self, path: str) -> None:
        """Refuse spellings that could mean somewhere else, before touching the disk."""
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

        `write` adds the scope and protected-path checks. The empty path and "." name the
        worktree root, which only read tools may use.
        """
        if not isinstance(path, str):
            raise Refused("path must be a string")
        self._check_spelling(path)
        path = path.strip(" ")
        target = (self.root / path).resolve() if path not in ("", ".") else self.root
        # resolve() has followed every symlink, so this also catches links that lead out.
        if target != self.root and not target.is_relative_to(self.root):
            raise Refused(f"{path!r} leads outside the repository (through a symlink)")
        rel = target.relative_to(self.root).as_posix() if target != self.root else ""
        if any(part.lower() == ".git" for part in rel.split("/")):
            raise Refused("the .git directory is managed by the harness and cannot be accessed")
        if write:
            if not rel:
                raise Refused("cannot write the repository root itself")
            # Judge both the name the agent used and where it really lands.
            named = posixpath.normpath(path.replace("\\", "/"))
            for candidate in {rel, named}:
                if self.is_protected(candidate):
                    raise Refused(
                        f"{candidate!r} is protected (spec key `protected`) and cannot be changed"
                    )
                if not self.in_scope(candidate):
                    raise Refused(
                        f"{candidate!r} is outside the scope the spec allows changes in "
                        "(spec keys `scope.include` / `scope.exclude`)"
                    )
        return target, rel

    def is_protected(self, rel: str) -> bool:
        return any(glob_match(rel, pattern) for pattern in self.protected)

    def in_scope(self, rel: str) -> bool:
        if self.include and not any(glob_match(rel, p) for p in self.include):
            return False
        return not any(glob_match(rel, p) for p in self.exclude)

    # -- listing -------------------------------------------------------------------

    def files(self) -> list[str]:
        """Files of the worktree (tracked or new, never ignored), in scope, sorted."""
        try:
            proc = subprocess.run(
                ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                cwd=self.root,
                capture_output=True,
                check=True,
                timeout=60,
            )
            names = [n for n in proc.stdout.decode("utf-8", "replace").split("\0") if n]
        except (OSError, subprocess.SubprocessError):
            # Not a git checkout (a bare directory in tests or demos): walk it, minus .git.
            names = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if d != ".git"]
                base = Path(dirpath).relative_to(self.root)
                names += [(base / f).as_posix() for f in filenames]
        result = set()
        for name in names:
            full = self.root / name
            # The index may list files deleted in the worktree, and links that lead out.
            if not full.is_file():
                continue
            try:
                self.resolve(name)
            except Refused:
                continue
            if self.in_scope(name):
                result.add(name)
        return sorted(result)

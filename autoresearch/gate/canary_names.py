"""Names, bodies and times for the canaries of go, cargo and Jest runs (runner_canary.py,
cargo_canary.py) that give nothing away by a fixed mark.

A forger in the code under test that rewrites outcomes would spare the canary if it could
recognise it: by a prefix of its file's or its tests' names, a phrase in its source, or by being
the newest file. So every name is drawn, for each run, from a secret token the harness holds
(never in the run's environment or files) out of the words of the project's own test names, its
body is an ordinary assertion with numbers drawn the same way, and its file (and the folder
holding it) gets the times of a test file of the project beside it. What still tells it apart
is said in docs/held-out-attacks.md (it is untracked in git, its inode and ctime are new, its
two tests call no code of the project).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

from autoresearch.safety import worktree_files

# Words of the project's names: camelCase and snake_case split, 3 to 10 letters.
_WORD = re.compile(r"(?:[A-Z][a-z]{2,9}|(?<![A-Za-z])[a-z]{3,10})(?![a-z])")
# Words of the languages and their test libraries: a canary named by them alone would be the
# only test so named.
_SYNTAX = frozenset(
    "func package import testing test tests string int bool byte err error nil return true "
    "false const var type struct interface range for else if fn let mut pub use mod crate self "
    "impl assert assert_eq eq panic unwrap expect describe it to be toBe require module exports "
    "async await function new this async the and with should when".split()
)
# Go reads a file name ending in one of these as a build constraint (`x_linux_test.go`).
_PLATFORMS = frozenset(
    "aix android darwin dragonfly freebsd hurd illumos ios js linux nacl netbsd openbsd plan "
    "solaris wasip windows zos arm armbe arm64 mips mipsle ppc riscv sparc wasm loong".split()
)
# Where the project has too few words of its own.
_FALLBACK = (
    "value empty parse load count order limit range merge split update default single many "
    "large small result config format number list item name path state check read write "
    "apply match sort total first last"
).split()
MIN_WORDS = 12


# Where each runner's test files name their tests (the group `name`).
GO_TESTS = re.compile(r"^func (?P<name>Test(?!Main\()\w+)\(", re.MULTILINE)
JEST_TESTS = re.compile(
    r"\b(?:it|test|describe)(?:\.\w+)*\(\s*(['\"`])(?P<name>(?:(?!\1).){1,200})\1"
)
RUST_TESTS = re.compile(r"\bfn\s+(?P<name>\w+)")


def vocabulary(names: Iterable[str]) -> tuple[str, ...]:
    """The distinct lower-case words of the tests' names, with common ones added where few.
    Names, not the files' whole text: a word of a comment or a string (a forger's own
    source) would make a name no test of the project has."""
    words = {w.lower() for name in names for w in _WORD.findall(name)} - _SYNTAX - _PLATFORMS
    if len(words) < MIN_WORDS:
        words |= set(_FALLBACK)
    return tuple(sorted(words))


class Namer:
    """Draws from a token of its own: the i-th draw is HMAC(token, i), so nothing outside this
    object can foresee a name, and a test can pass a token to see the same names twice.
    `texts`: the project's test files, whose tests' names (`tests`) give the words."""

    def __init__(
        self, texts: Iterable[str], tests: re.Pattern[str], token: bytes | None = None
    ) -> None:
        self.token = token if token is not None else secrets.token_bytes(32)
        self.texts = list(texts)
        self.words = vocabulary(m["name"] for t in self.texts for m in tests.finditer(t))
        self._drawn = 0

    def below(self, n: int) -> int:
        """A number in [0, n)."""
        self._drawn += 1
        digest = hmac.new(self.token, str(self._drawn).encode(), hashlib.sha256).digest()
        return int.from_bytes(digest, "big") % n

    def choice(self, options: list | tuple):
        return options[self.below(len(options))]

    def words_for(self, taken: Iterable[str] = ()) -> list[str]:
        """Two or three words whose name appears in none of the texts, nor in `taken`."""
        seen = [*self.texts, *taken]
        for _ in range(64):
            words = [self.choice(self.words) for _ in range(2 + self.below(2))]
            if len(set(words)) < len(words):
                continue
            snake, camel = "_".join(words), "".join(w.capitalize() for w in words)
            if not any(snake in t or camel in t or " ".join(words) in t for t in seen):
                return words
        # A project that uses every pairing of its words: add one of the common ones.
        return [*words, self.choice(_FALLBACK), str(self.below(1000))]

    def numbers(self) -> tuple[int, int]:
        """Two small numbers for an assertion's sum."""
        return 2 + self.below(97), 2 + self.below(97)


def camel(words: list[str]) -> str:
    return "".join(w.capitalize() for w in words)


def snake(words: list[str]) -> str:
    return "_".join(words)


def read_texts(root: Path, paths: Iterable[Path], limit: int = 200_000) -> list[str]:
    """The text of each file under `root` (a file that cannot be read, is too large or is
    reached through a link out is left out)."""
    texts = []
    for path in paths:
        text = worktree_files.read_if_any(root, str(path.relative_to(root)), max_bytes=limit)
        if text is not None:
            texts.append(text)
    return texts


def times_of(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return found.st_atime_ns, found.st_mtime_ns


def set_times(path: Path, times: tuple[int, int] | None) -> None:
    """Give `path` the access and modification times of another file (its change time and
    inode still show it is new: that is the bound)."""
    if times is not None:
        try:
            os.utime(path, ns=times, follow_symlinks=False)
        except OSError:
            pass

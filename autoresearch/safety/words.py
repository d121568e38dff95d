"""Words: splitting a shell command into words, the one way every module does it
(bounded), and the words a message counts and names things with (`count`, `a_or_an`).

shlex grows each word one character at a time by copying it, so its time is quadratic in
a word's length: a 5 MB command took setup minutes. A command longer than
MAX_COMMAND_CHARS is refused before it is split (no shell takes an argument that long).
"""

from __future__ import annotations

import shlex

# Below Linux's MAX_ARG_STRLEN (128 KiB): `sh -c COMMAND` could not run a longer one anyway.
MAX_COMMAND_CHARS = 64 << 10


class TooLong(ValueError):
    """The command is longer than MAX_COMMAND_CHARS."""


def split(command: str, *, comments: bool = False, punctuation: bool = False) -> list[str]:
    """The command's words, as `shlex.split` (or, with `punctuation`, as shlex's lexer with
    `|;&<>()` runs as words of their own, and comments dropped); ValueError for unbalanced
    quotes, TooLong for a huge command."""
    if len(command) > MAX_COMMAND_CHARS:
        raise TooLong(
            f"the command is {len(command)} characters long; at most {MAX_COMMAND_CHARS} are read"
        )
    if not punctuation:
        return shlex.split(command, comments=comments)
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def count(n: int, noun: str) -> str:
    """`1 fix`, `2 fixes`, `0 refactor changes`: a count with its noun agreeing."""
    if n == 1:
        return f"{n} {noun}"
    plural = noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")
    return f"{n} {plural}"


def a_or_an(word: str) -> str:
    """`an experiment`, `a sweep`: the article by the word's first letter."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"

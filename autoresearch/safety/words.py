"""Splitting a shell command into words, the one way every module does it: bounded.

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

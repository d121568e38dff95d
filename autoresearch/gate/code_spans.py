"""Where a test's own code ends in Go, Rust and JavaScript text (runner_overlay.edited).

A test's code is its call (`test('x', () => {...})`) or its function's body, up to the
bracket that closes it: what follows (the `});` of its `describe`, a table, the next
`describe(` header) is not part of it, so a test added after it leaves it as it was.
Brackets inside strings, character literals and comments are skipped. Where the brackets
do not balance before `limit` (a JavaScript regular expression holding one, a macro), the
answer is None and the caller keeps the span to the next test.
"""

from __future__ import annotations

import re

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}
# A Go rune or a Rust char: `'x'`, `'\n'`, `'\u{1F600}'` (a Rust lifetime `'a` is none).
_CHAR = re.compile(r"'(\\[^']{1,10}|[^'\\\n])'")
_RAW_RUST = re.compile(r'r(#*)"')
# Where a bracket, a quote or a comment may start (Rust: a raw string's `r` too).
_MARKS = re.compile(r"[()\[\]{}\"'`/]")
_MARKS_RUST = re.compile(r"[()\[\]{}\"'`/r]")


def own_end(runner: str, text: str, start: int, limit: int) -> int | None:
    """The index just past the bracket that closes the test starting at `start` (Jest: the
    call's `(`, found before the title; Go and cargo: the function's body `{` after its
    parameters), or None where that bracket is not found before `limit`."""
    if runner == "jest":
        return _close(runner, text, start, limit, body=False)
    return _close(runner, text, start, limit, body=True)


def _close(runner: str, text: str, at: int, limit: int, body: bool) -> int | None:
    stack: list[str] = []
    i = at
    marks = _MARKS_RUST if runner == "cargo" else _MARKS
    while i < limit:
        mark = marks.search(text, i, limit)  # past what cannot open, close or quote
        if mark is None:
            return None
        i = mark.start()
        c = text[i]
        skip = _skip(runner, text, i, limit)
        if skip is not None:
            i = skip
            continue
        if c in _OPEN:
            if not stack and body and c != "{":
                stack.append(_OPEN[c])  # the parameters, before the body
            elif not stack and not body and c != "(":
                return None
            else:
                stack.append(_OPEN[c])
        elif c in _CLOSE:
            if not stack or stack.pop() != c:
                return None
            if not stack and (not body or c == "}"):
                return i + 1
        i += 1
    return None


def _skip(runner: str, text: str, i: int, limit: int) -> int | None:
    """The index past a comment or literal starting at `i`, or None."""
    c = text[i]
    two = text[i : i + 2]
    if two == "//":
        end = text.find("\n", i)
        return limit if end < 0 else end
    if two == "/*":
        end = text.find("*/", i + 2)
        return limit if end < 0 else end + 2
    if runner == "cargo" and c == "r" and not _in_word(text, i):
        raw = _RAW_RUST.match(text, i)
        if raw:
            end = text.find('"' + raw.group(1), raw.end())
            return limit if end < 0 else end + 1 + len(raw.group(1))
    if c == '"' or (c == "`" and runner != "cargo") or (c == "'" and runner == "jest"):
        return _string_end(text, i, c, limit, escapes=not (c == "`" and runner == "go"))
    if c == "'":
        char = _CHAR.match(text, i)
        return char.end() if char else i + 1  # a lifetime's quote stands alone
    return None


def _in_word(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def _string_end(text: str, i: int, quote: str, limit: int, escapes: bool) -> int:
    j = i + 1
    while j < limit:
        if escapes and text[j] == "\\":
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    return limit

"""Whether a change rewrites a file's layout far beyond what it changes in code.

A fix of one line that comes with the whole file run through a formatter (quotes flipped,
lists exploded one item a line, blank lines moved) is a diff no maintainer of a target
without that formatter merges, and it hides the fix. Whichever team or backend made it, the
harness sees it the same way: the lines the diff changes, against the lines whose code
(tokens, with strings compared by value and layout-only tokens left out) changes.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from autoresearch.safety import git

MAX_LINES = 30  # a change of more lines of one file must be mostly code, not layout
LAYOUT_SHARE = 3  # flagged when the changed lines are more than 3 times the code lines
LAYOUT_TOKENS = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
CLOSERS = {")", "]", "}"}


@dataclass(frozen=True)
class Restyled:
    path: str
    lines: int  # lines the diff changes (added + removed)
    code: int  # logical lines whose code differs (both sides)

    def reason(self) -> str:
        return (
            f"{self.path}: the change rewrites {self.lines} lines, but the code of only "
            f"{self.code} differs: a reformat of the file (quotes, wrapping, blank lines) "
            "rides on it; change only the lines the purpose needs"
        )


def logical_lines(text: str) -> list[str] | None:
    """The file as its logical lines of code, each its tokens without layout: strings by
    value, no line breaks or indentation tokens, no trailing comma before a closer. None
    when it does not tokenize (then there is no layout to tell from code)."""
    lines: list[str] = []
    current: list[str] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    for tok in tokens:
        if tok.type == tokenize.NEWLINE or tok.type == tokenize.COMMENT and not current:
            if tok.type == tokenize.COMMENT:
                current.append(tok.string.strip())
            if current:
                lines.append(" ".join(current))
            current = []
            continue
        if tok.type in LAYOUT_TOKENS or tok.type == tokenize.ENDMARKER:
            continue
        word = tok.string
        if tok.type == tokenize.STRING:
            try:
                word = repr(ast.literal_eval(word))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                pass
        elif tok.type == tokenize.COMMENT:
            word = word.strip()
        if word in CLOSERS and current and current[-1] == ",":
            current.pop()  # a trailing comma is layout (a formatter's "magic" one)
        if word == "(" or word == ")":
            continue  # wrapping parentheses are layout; a call's stay visible by its name
        current.append(word)
    if current:
        lines.append(" ".join(current))
    return lines


def changed_count(before: list[str], after: list[str]) -> int:
    """Lines removed plus lines added between the two sequences."""
    count = 0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            count += (i2 - i1) + (j2 - j1)
    return count


def restyled(path: str, before: str, after: str) -> Restyled | None:
    """`Restyled` when the change from `before` to `after` is mostly layout."""
    lines = changed_count(before.splitlines(), after.splitlines())
    if lines <= MAX_LINES:
        return None
    old, new = logical_lines(before), logical_lines(after)
    if old is None or new is None:
        return None
    code = changed_count(old, new)
    return Restyled(path, lines, code) if code * LAYOUT_SHARE < lines else None


def pending(
    worktree: Path, *, staged: bool, changes: tuple[git.Staged, ...] | None = None
) -> list[Restyled]:
    """The Python files the change about to be committed (`staged`: the index; else the
    worktree) restyles against HEAD. A file new or deleted has no layout to keep.
    `changes`: the index's changes as the caller read them (`git.staged_changes`)."""
    if staged and changes is not None:
        names = [c.path for c in changes if c.path.endswith(".py")]
    else:
        args = ["diff", "--name-only", "--no-renames", "-z"]
        args += ["--cached", "HEAD"] if staged else ["HEAD"]
        out = git.worktree_proc(worktree, *args).stdout
        names = [n for n in out.split("\0") if n.endswith(".py")]
    found = []
    for name in names:
        old = git.raw(worktree, "show", f"HEAD:{name}")
        if staged:
            shown = git.raw(worktree, "show", f":{name}")
            new = shown.stdout if shown.returncode == 0 else None
        else:
            new = _read(Path(worktree) / name)
        if old.returncode != 0 or new is None:
            continue
        try:
            result = restyled(name, old.stdout.decode("utf-8"), new.decode("utf-8"))
        except UnicodeDecodeError:
            continue
        if result is not None:
            found.append(result)
    return found


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None

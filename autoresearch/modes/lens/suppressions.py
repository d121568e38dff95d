"""The fix lens's anti-cheating check: what a kept change's unified diff must not contain.

Rule: a change is rejected (`rejected: suppression`) for any of
- a new suppression marker: `# type: ignore`, `# noqa`, `# pragma: no cover`, a skip or xfail
  (pytest, unittest, Jest/Mocha, Go), `@ts-ignore`/`@ts-nocheck`/`@ts-expect-error`,
  `eslint-disable`, `pylint: disable`, `nolint`, Rust `#[allow(...)]`, `@SuppressWarnings`,
  `rubocop:disable`. "New" is counted per file and kind: more added than removed (a line
  that kept its marker while changing is not new);
- test functions deleted: fewer test functions defined after the diff than before (a renamed or
  moved test is not deleted; when the count drops, every removed name is reported);
- a test file left with fewer asserts than before (removed asserts outnumber added ones);
- an edit to a protected file (guard, tests or anything the spec names; glob patterns);
- a raised timeout (a changed line mentioning a timeout whose number went up);
- a new empty exception handler (`except …: pass`, `catch (e) {}`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import PurePosixPath


@dataclass
class Hunk:
    added: list[tuple[int, str]] = field(default_factory=list)  # (new line number, text)
    removed: list[tuple[int, str]] = field(default_factory=list)  # (old line number, text)


@dataclass
class FileDiff:
    old_path: str | None  # None for a new file
    new_path: str | None  # None for a deleted file
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def added(self) -> list[tuple[int, str]]:
        return [line for h in self.hunks for line in h.added]

    @property
    def removed(self) -> list[tuple[int, str]]:
        return [line for h in self.hunks for line in h.removed]


@dataclass(frozen=True)
class Violation:
    kind: str
    file: str
    line: int | None
    detail: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.kind} — {self.detail}"


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def parse_diff(text: str) -> list[FileDiff]:
    """The files of a `git diff` (unified, any context size) with their added and removed lines."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    old_line = new_line = 0
    in_hunk = False
    for line in text.splitlines():
        if line.startswith("diff --git "):
            paths = re.match(r"diff --git a/(.*) b/(.*)$", line)
            current = FileDiff(paths.group(1), paths.group(2)) if paths else FileDiff(None, None)
            files.append(current)
            in_hunk = False
        elif current is None:
            continue
        elif not in_hunk and line.startswith("new file mode"):
            current.old_path = None
        elif not in_hunk and line.startswith("deleted file mode"):
            current.new_path = None
        elif not in_hunk and line.startswith("--- "):
            current.old_path = _diff_path(line[4:], current.old_path)
        elif not in_hunk and line.startswith("+++ "):
            current.new_path = _diff_path(line[4:], current.new_path)
        elif match := _HUNK.match(line):
            old_line, new_line = int(match.group(1)), int(match.group(2))
            current.hunks.append(Hunk())
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            current.hunks[-1].added.append((new_line, line[1:]))
            new_line += 1
        elif in_hunk and line.startswith("-"):
            current.hunks[-1].removed.append((old_line, line[1:]))
            old_line += 1
        elif in_hunk and line.startswith(" "):
            old_line += 1
            new_line += 1
    return files


def _diff_path(text: str, fallback: str | None) -> str | None:
    text = text.split("\t")[0].strip()
    if text == "/dev/null":
        return None
    return text[2:] if text[:2] in ("a/", "b/") else text or fallback


# --- the checks ---

SUPPRESSIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("type: ignore", re.compile(r"#\s*type:\s*ignore|#\s*pyright:\s*ignore|#\s*mypy:\s*ignore")),
    ("noqa", re.compile(r"#\s*noqa\b", re.IGNORECASE)),
    ("pragma: no cover", re.compile(r"#\s*pragma:\s*no\s*cover")),
    (
        "skipped test",
        re.compile(
            r"pytest\.mark\.(?:skip|skipif|xfail)\b|\bpytest\.(?:skip|xfail)\(|"
            r"\bunittest\.skip|@skip(?:If|Unless)?\(|\b(?:it|test|describe)\.skip\(|"
            r"\bx(?:it|describe|test)\(|\bt\.Skip(?:f|Now)?\("
        ),
    ),
    ("@ts-ignore", re.compile(r"@ts-(?:ignore|nocheck|expect-error)")),
    ("eslint-disable", re.compile(r"eslint-disable")),
    ("pylint: disable", re.compile(r"pylint:\s*disable")),
    ("nolint", re.compile(r"//\s*nolint\b")),
    ("#[allow]", re.compile(r"#!?\[allow\(")),
    ("@SuppressWarnings", re.compile(r"@SuppressWarnings\b")),
    ("rubocop:disable", re.compile(r"rubocop:disable")),
)

_TEST_DEF = re.compile(
    r"^\s*(?:async\s+)?def\s+(test\w*)|^func\s+(Test\w+)|"
    r"^\s*(?:it|test)\(\s*[\"'`](.+?)[\"'`]|^\s*it\s+[\"'](.+?)[\"']"
)
_ASSERT = re.compile(
    r"\bassert\b|\bself\.assert\w+\(|\bpytest\.raises\(|\bexpect\(|\bassert\.\w+\(|"
    r"\bt\.(?:Error|Errorf|Fatal|Fatalf)\(|\brequire\.\w+\(|\bassert_\w+!?\("
)
_TIMEOUT = re.compile(r"(?i)time_?out\w*\D{0,12}?(\d+(?:\.\d+)?)")
_EMPTY_HANDLER = re.compile(
    r"^\s*except\b[^:]*:\s*(?:pass|\.\.\.)\s*(?:#.*)?$|catch\s*(?:\([^)]*\))?\s*\{\s*\}"
)
_HANDLER_HEAD = re.compile(r"^\s*except\b[^:]*:\s*(?:#.*)?$")
_HANDLER_BODY = re.compile(r"^\s*(?:pass|\.\.\.)\s*(?:#.*)?$")
TEST_DIRS = {"tests", "test", "__tests__", "spec", "testing"}
TEST_FILES = (
    "test_*.py",
    "*_test.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*Test.java",
    "*_spec.rb",
)


def is_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    return any(part in TEST_DIRS for part in p.parts[:-1]) or any(
        fnmatch.fnmatch(p.name, pattern) for pattern in TEST_FILES
    )


def check(diff: str | list[FileDiff], protected: Collection[str] = ()) -> list[Violation]:
    """Every violation in the diff (see the module docstring), in file order."""
    files = parse_diff(diff) if isinstance(diff, str) else diff
    added_tests = {name for f in files for _, text in f.added if (name := _test_name(text))}
    removed_tests = {name for f in files for _, text in f.removed if (name := _test_name(text))}
    tests_dropped = len(removed_tests - added_tests) > len(added_tests - removed_tests)
    violations: list[Violation] = []
    for f in files:
        violations += _protected(f, protected)
        violations += _new_suppressions(f)
        violations += _empty_handlers(f)
        violations += _raised_timeouts(f)
        if any(is_test_file(p) for p in (f.old_path, f.new_path) if p):
            if tests_dropped:
                violations += _deleted_tests(f, added_tests)
            violations += _fewer_asserts(f)
    return violations


def _protected(f: FileDiff, patterns: Collection[str]) -> list[Violation]:
    for path in (f.old_path, f.new_path):
        if path and any(fnmatch.fnmatch(path, p) for p in patterns):
            return [Violation("protected file", path, None, "the change edits a protected file")]
    return []


def _new_suppressions(f: FileDiff) -> list[Violation]:
    violations = []
    for kind, pattern in SUPPRESSIONS:
        added = [(n, text) for n, text in f.added if pattern.search(text)]
        removed = sum(1 for _, text in f.removed if pattern.search(text))
        for n, text in added[removed:]:
            violations.append(Violation(f"new {kind}", f.path, n, text.strip()[:120]))
    return violations


def _empty_handlers(f: FileDiff) -> list[Violation]:
    violations = []
    for hunk in f.hunks:
        by_line = dict(hunk.added)
        for n, text in hunk.added:
            two_lines = _HANDLER_HEAD.match(text) and _HANDLER_BODY.match(by_line.get(n + 1, "x"))
            if _EMPTY_HANDLER.search(text) or two_lines:
                violations.append(
                    Violation("empty exception handler", f.path, n, text.strip()[:120])
                )
    return violations


def _raised_timeouts(f: FileDiff) -> list[Violation]:
    violations = []
    for hunk in f.hunks:
        old = [float(m.group(1)) for _, t in hunk.removed if (m := _TIMEOUT.search(t))]
        new = [(n, t, float(m.group(1))) for n, t in hunk.added if (m := _TIMEOUT.search(t))]
        for before, (n, text, after) in zip(old, new, strict=False):
            if after > before:
                detail = f"timeout {before:g} → {after:g}: {text.strip()[:80]}"
                violations.append(Violation("raised timeout", f.path, n, detail))
    return violations


def _test_name(text: str) -> str | None:
    match = _TEST_DEF.match(text)
    return next((g for g in match.groups() if g), None) if match else None


def _deleted_tests(f: FileDiff, added_tests: set[str]) -> list[Violation]:
    violations = []
    for n, text in f.removed:
        name = _test_name(text)
        if name and name not in added_tests:
            violations.append(Violation("deleted test", f.old_path or f.path, n, name))
    return violations


def _fewer_asserts(f: FileDiff) -> list[Violation]:
    removed = [(n, t) for n, t in f.removed if _ASSERT.search(t)]
    added = sum(1 for _, t in f.added if _ASSERT.search(t))
    if len(removed) <= added:
        return []
    detail = f"asserts: {len(removed)} removed, {added} added"
    return [Violation("weakened test", f.old_path or f.path, removed[0][0], detail)]

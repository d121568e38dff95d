"""The fix lens's error count: parsers that turn a tool's output into error records with a stable
identity, the order errors are fixed in, and the before/after comparison that decides a change.

Order: build → critical/high bugs → type → test → medium/low bugs → lint → warnings.
Identity: tool, category, code, file and message — not the line, so an error that only shifted
because lines above it changed is the same error (a pytest failure is its node id: its message
holds temporary paths and addresses that change every run).
Comparison: errors newly seen in output that was incomplete before (a file ruff could not parse,
a pytest run interrupted by a collection error, a failing build hiding every other tool) are
`revealed` — queued, not counted. Of the rest, a change is `fell` when the count went down,
`moved` when it stayed equal but the errors differ, `unchanged`, or `rose`. Only `fell` may be kept.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.checks.finding_schema import normalize_text

PRIORITY = ("build", "critical", "high", "type", "test", "medium", "low", "lint", "warning")
CATEGORIES = ("build", "bug", "type", "test", "lint", "warning")
MAX_ATTEMPTS = 3  # failed attempts on one error before it goes to blocked.md


@dataclass(frozen=True)
class Error:
    tool: str
    category: str  # one of CATEGORIES
    code: str  # rule id, mypy code, pytest node id, ...
    file: str  # relative to the worktree when it was under it
    line: int | None
    message: str
    severity: str = ""  # bugs only (handed on by debug/security): critical | high | medium | low
    detail: str = ""  # shown to the agent, not part of the identity (varies from run to run)

    @property
    def identity(self) -> str:
        return "|".join(
            (self.tool, self.category, self.code, self.file, normalize_text(self.message))
        )

    @property
    def priority(self) -> str:
        """The error's place in PRIORITY: its category, or its severity for a bug."""
        if self.category == "bug":
            return self.severity if self.severity in PRIORITY[1:7] else "medium"
        return self.category

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class Count:
    """One tool's errors, and how far its output can be trusted to list them all."""

    tool: str
    errors: list[Error] = field(default_factory=list)
    complete: bool = True  # False: the tool stopped early; more errors may be hidden
    incomplete_files: frozenset[str] = frozenset()  # files the tool could not fully check
    blocks_others: bool = False  # a failing build: every other tool's count is unreliable


def order(errors: Iterable[Error]) -> list[Error]:
    """Errors in fixing order: PRIORITY, then file, line and code."""
    return sorted(
        errors, key=lambda e: (PRIORITY.index(e.priority), e.file, e.line or 0, e.code, e.message)
    )


def next_error(errors: Iterable[Error], blocked: Collection[str] = ()) -> Error | None:
    """The first error in fixing order whose identity is not blocked; None when none is left."""
    return next((e for e in order(errors) if e.identity not in blocked), None)


def is_blocked(failed_attempts: int) -> bool:
    """An error goes to blocked.md after MAX_ATTEMPTS failed attempts."""
    return failed_attempts >= MAX_ATTEMPTS


# --- comparing two counts ---


@dataclass
class Delta:
    fixed: list[Error]
    introduced: list[Error]
    revealed: list[Error]
    before: int
    after: int  # without the revealed errors
    verdict: str  # fell | moved | unchanged | rose


def by_category(counts: Sequence[Count]) -> dict[str, int]:
    """Errors per category, for summary.md's before → after table."""
    return dict(Counter(e.category for c in counts for e in c.errors))


def compare(before: Sequence[Count], after: Sequence[Count]) -> Delta:
    """How a change moved the error count; see the module docstring for the verdicts."""
    old = [e for c in before for e in c.errors]
    new = [e for c in after for e in c.errors]
    added, fixed = _beyond(new, old), _beyond(old, new)
    hidden = _hidden_before(before)
    revealed = [e for e in added if hidden(e)]
    introduced = [e for e in added if not hidden(e)]
    after_total = len(new) - len(revealed)
    if after_total < len(old):
        verdict = "fell"
    elif after_total > len(old):
        verdict = "rose"
    elif fixed or introduced:
        verdict = "moved"
    else:
        verdict = "unchanged"
    return Delta(fixed, introduced, revealed, len(old), after_total, verdict)


def _beyond(errors: list[Error], other: list[Error]) -> list[Error]:
    """The errors beyond as many of each identity as `other` holds, in their order."""
    left = Counter(e.identity for e in other)
    out = []
    for e in errors:
        if left[e.identity] > 0:
            left[e.identity] -= 1
        else:
            out.append(e)
    return out


def _hidden_before(before: Sequence[Count]) -> Callable[[Error], bool]:
    by_tool = {c.tool: c for c in before}
    build_failed = any(c.blocks_others and c.errors for c in before)

    def hidden(e: Error) -> bool:
        count = by_tool.get(e.tool)
        if count is None:
            return True  # a tool that produced no count before could not have listed it
        if build_failed and not count.blocks_others:
            return True
        return not count.complete or e.file in count.incomplete_files

    return hidden


# --- parsers ---


def _relative(path: str, root: Path | None) -> str:
    if root is None or not path:
        return path
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            return candidate.resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            return path
    return candidate.as_posix().removeprefix("./")


_PYTEST_LINE = re.compile(r"^(FAILED|ERROR) (\S.*?)(?: - (.*))?$", re.MULTILINE)
_PYTEST_FAILED = re.compile(r"\b(\d+) failed\b")


def parse_pytest(
    output: str, exit_code: int | None, root: Path | None = None, tool: str = "pytest"
) -> Count:
    """pytest's short summary lines (`FAILED id - message`, `ERROR id - message`, shown by the
    default `-rfE`). A collection error (an ERROR on a file) counts as a build error and marks
    the run incomplete, as does an exit code of 2–4 (interrupted, internal or usage error)."""
    errors: list[Error] = []
    complete = exit_code in (0, 1, 5, None)
    for kind, node, message in _PYTEST_LINE.findall(output):
        file = _relative(node.split("::", 1)[0], root)
        if kind == "ERROR" and "::" not in node:
            complete = False
            errors.append(Error(tool, "build", "collection", file, None, "", detail=message))
        else:
            errors.append(Error(tool, "test", node, file, None, "", detail=message))
    if not errors and exit_code == 1:
        # Failures without their ids (run with -rN or -q -q): counted, but not identifiable.
        match = _PYTEST_FAILED.search(output)
        n = int(match.group(1)) if match else 1
        errors = [Error(tool, "test", f"failure {i + 1}", "", None, "") for i in range(n)]
        complete = False
    if not errors and not complete:
        errors.append(Error(tool, "build", f"exit {exit_code}", "", None, "the tests did not run"))
    return Count(tool, errors, complete)


def parse_ruff_json(output: str, root: Path | None = None, tool: str = "ruff") -> Count:
    """`ruff check --output-format=json`: one lint error per diagnostic; a syntax error is a build
    error, and ruff checks nothing else in that file."""
    try:
        diagnostics = json.loads(output or "[]")
    except ValueError:
        return Count(tool, [_unreadable(tool, output)], complete=False)
    errors, broken = [], set()
    for d in diagnostics:
        file = _relative(d.get("filename", ""), root)
        code = d.get("code") or "invalid-syntax"
        category = "build" if code == "invalid-syntax" else "lint"
        if category == "build":
            broken.add(file)
        line = (d.get("location") or {}).get("row")
        errors.append(Error(tool, category, code, file, line, d.get("message", "")))
    return Count(tool, errors, incomplete_files=frozenset(broken))


_MYPY_LINE = re.compile(
    r"^(?P<file>[^:\n]+?):(?P<line>\d+)(?::\d+)?: (?P<level>error|warning): "
    r"(?P<message>.*?)(?:\s+\[(?P<code>[\w-]+)\])?$",
    re.MULTILINE,
)


def parse_mypy(output: str, root: Path | None = None, tool: str = "mypy") -> Count:
    """mypy's `file:line[:col]: error: message  [code]` lines (notes are context, not errors)."""
    errors = [
        _checker_error(
            tool, m["level"], m["code"] or "error", m["file"], int(m["line"]), m["message"], root
        )
        for m in _MYPY_LINE.finditer(output)
    ]
    complete = "errors prevented further checking" not in output
    return Count(tool, errors, complete)


_PYRIGHT_LINE = re.compile(
    r"^\s*(?P<file>\S[^\n]*?):(?P<line>\d+):\d+ - (?P<level>error|warning): (?P<message>.*?)"
    r"(?: \((?P<rule>\w+)\))?$",
    re.MULTILINE,
)


def parse_pyright(output: str, root: Path | None = None, tool: str = "pyright") -> Count:
    """pyright's `--outputjson` report, or its text lines `file:line:col - error: msg (rule)`."""
    try:
        report = json.loads(output)
    except ValueError:
        report = None
    errors = []
    if isinstance(report, dict):
        for d in report.get("generalDiagnostics", []):
            if d.get("severity") not in ("error", "warning"):
                continue
            line = ((d.get("range") or {}).get("start") or {}).get("line")
            line = None if line is None else line + 1  # pyright's JSON lines are 0-based
            rule, message = d.get("rule") or d["severity"], d.get("message", "")
            errors.append(
                _checker_error(tool, d["severity"], rule, d.get("file", ""), line, message, root)
            )
        return Count(tool, errors)
    for m in _PYRIGHT_LINE.finditer(output):
        rule, line = m["rule"] or m["level"], int(m["line"])
        errors.append(_checker_error(tool, m["level"], rule, m["file"], line, m["message"], root))
    return Count(tool, errors)


def _checker_error(
    tool: str, level: str, code: str, file: str, line: int | None, message: str, root: Path | None
) -> Error:
    """A type checker's error (a type error) or warning."""
    category = "type" if level == "error" else "warning"
    return Error(tool, category, code, _relative(file, root), line, message)


def parse_regex(
    output: str,
    pattern: str,
    tool: str = "regex",
    category: str = "lint",
    root: Path | None = None,
) -> Count:
    """One error per match. Named groups `file`, `line`, `code` and `message` are used when the
    pattern has them; otherwise the matched text is the error's code."""
    if category not in CATEGORIES:
        raise ValueError(f"category {category!r} not allowed; expected one of {CATEGORIES}")
    errors = []
    for m in re.finditer(pattern, output, re.MULTILINE):
        groups = m.groupdict()
        line = groups.get("line")
        errors.append(
            Error(
                tool,
                category,
                groups.get("code") or m.group(0).strip(),
                _relative(groups.get("file") or "", root),
                int(line) if line and line.isdigit() else None,
                groups.get("message") or "",
            )
        )
    return Count(tool, errors)


def parse_exit(exit_code: int | None, tool: str = "build", output: str = "") -> Count:
    """A build (or any command) judged by its exit code: one build error when it fails, and while
    it fails no other tool's count is trusted."""
    if exit_code == 0:
        return Count(tool, [], blocks_others=True)
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    error = Error(tool, "build", f"exit {exit_code}", "", None, "", detail=last[:200])
    return Count(tool, [error], blocks_others=True)


def _unreadable(tool: str, output: str) -> Error:
    return Error(tool, "build", "unreadable output", "", None, "", detail=output.strip()[:200])


def parse(
    parser: str, output: str, exit_code: int | None, tool: str, root: Path | None = None
) -> Count:
    """Dispatch on a spec's `parser:` value: pytest, ruff, mypy, pyright, exit, regex:<pattern>."""
    name, _, arg = parser.partition(":")
    if name == "pytest":
        return parse_pytest(output, exit_code, root, tool)
    if name == "ruff":
        return parse_ruff_json(output, root, tool)
    if name == "mypy":
        return parse_mypy(output, root, tool)
    if name == "pyright":
        return parse_pyright(output, root, tool)
    if name == "exit":
        return parse_exit(exit_code, tool, output)
    if name == "regex" and arg:
        return parse_regex(output, arg, tool, root=root)
    raise ValueError(
        f"parser {parser!r} not allowed; "
        "expected pytest, ruff, mypy, pyright, exit or regex:<pattern>"
    )

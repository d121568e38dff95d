"""The fix lens's error count: which commands count errors (the spec's `fix.errors`, or the
detected stack's tests and linter), running them in a worktree, and a count's JSON form.

Counts are kept as JSON in every decision (the next iteration's "before" is the previous
"after"), and what is written is masked; so a fresh count is masked the same way before it is
compared with a stored one, or a message with a secret-looking string would seem to change.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ... import commands
from ...errors import SpecError
from ...lenses import error_counts
from ...lenses.error_counts import Count, Error
from ..lens.output import mask_data

PARSERS = ("pytest", "ruff", "mypy", "pyright", "exit", "regex:<pattern>")
# Parsers that read a JSON report: stderr chatter must not be mixed into it.
JSON_PARSERS = ("ruff", "pyright")
RUFF_COUNT = "python -m ruff check --no-cache --exit-zero --output-format json ."
DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ErrorCommand:
    command: str
    parser: str  # pytest | ruff | mypy | pyright | exit | regex:<pattern>
    tool: str
    category: str = "lint"  # regex only: the category of each match
    timeout_s: float = DEFAULT_TIMEOUT_S


def default_commands(stack_name: str | None, test_command: str, linter: str | None) -> list[dict]:
    """Without `fix.errors`: the test command's failures and the linter's diagnostics."""
    if stack_name == "Python":
        return [
            {"command": test_command, "parser": "pytest", "tool": "pytest"},
            {"command": RUFF_COUNT, "parser": "ruff", "tool": "ruff"},
        ]
    out = [{"command": test_command, "parser": "exit", "tool": "tests"}]
    if linter:
        out.append({"command": linter, "parser": "exit", "tool": "linter"})
    return out


def resolve(
    raw: list[dict[str, Any]] | None, where: str, defaults: list[dict]
) -> list[ErrorCommand]:
    """The error commands of a spec; SpecError names the key of a bad entry."""
    items = raw if raw else defaults
    out = []
    for i, item in enumerate(items):
        parser = str(item.get("parser") or "")
        name, _, arg = parser.partition(":")
        if name not in ("pytest", "ruff", "mypy", "pyright", "exit", "regex") or (
            name == "regex" and not arg
        ):
            raise SpecError(
                f"{where}: key 'fix.errors.{i}.parser': {parser!r}; expected one of "
                f"{', '.join(PARSERS)}"
            )
        category = str(item.get("category") or "lint")
        if category not in error_counts.CATEGORIES:
            raise SpecError(
                f"{where}: key 'fix.errors.{i}.category': {category!r}; expected one of "
                f"{', '.join(error_counts.CATEGORIES)}"
            )
        out.append(
            ErrorCommand(
                command=str(item["command"]),
                parser=parser,
                tool=str(item.get("tool") or name),
                category=category,
                timeout_s=float(item.get("timeout_s") or DEFAULT_TIMEOUT_S),
            )
        )
    tools = [c.tool for c in out]
    duplicate = next((t for t in tools if tools.count(t) > 1), None)
    if duplicate:
        raise SpecError(
            f"{where}: key 'fix.errors': two commands share the tool name {duplicate!r}; "
            "give each a distinct `tool:` (errors are told apart by it)"
        )
    return out


def run(cmd: ErrorCommand, worktree: Path, secrets: list[str] | None = None) -> Count:
    """One tool's count in `worktree`; a timeout is a build error (nothing else is known)."""
    name = cmd.parser.partition(":")[0]
    result = commands.run(
        cmd.command,
        worktree,
        timeout_s=cmd.timeout_s,
        extra_secrets=secrets,
        stdout_only=name in JSON_PARSERS,
    )
    if result.timed_out:
        error = Error(cmd.tool, "build", "timeout", "", None, f"timed out after {cmd.timeout_s:g}s")
        return Count(cmd.tool, [error], complete=False)
    if name == "regex":
        return error_counts.parse_regex(
            result.output, cmd.parser.partition(":")[2], cmd.tool, cmd.category, worktree
        )
    return error_counts.parse(cmd.parser, result.output, result.exit_code, cmd.tool, worktree)


def count_all(
    cmds: list[ErrorCommand], worktree: Path, secrets: list[str] | None, keep: tuple[str, ...]
) -> list[Count]:
    """Every tool's count, masked as it will be stored."""
    return [from_json(to_json(run(c, worktree, secrets), keep)) for c in cmds]


# --- the JSON form ----------------------------------------------------------------------------


def to_json(count: Count, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    data = {
        "tool": count.tool,
        "errors": [asdict(e) for e in count.errors],
        "complete": count.complete,
        "incomplete_files": sorted(count.incomplete_files),
        "blocks_others": count.blocks_others,
    }
    return mask_data(data, keep)


def from_json(data: dict[str, Any]) -> Count:
    return Count(
        tool=data["tool"],
        errors=[Error(**e) for e in data["errors"]],
        complete=data["complete"],
        incomplete_files=frozenset(data["incomplete_files"]),
        blocks_others=data["blocks_others"],
    )


def errors_of(counts: list[Count]) -> list[Error]:
    return [e for c in counts for e in c.errors]


def error_id(error: Error) -> str:
    """A short stable id for the brief and the log: E- and 8 hex digits of the identity."""
    return "E-" + hashlib.sha256(error.identity.encode()).hexdigest()[:8]

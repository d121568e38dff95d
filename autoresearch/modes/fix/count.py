"""The fix lens's error count: which commands count errors (the spec's `fix.errors`, or the
detected stack's tests and linter), running them in a worktree, and a count's JSON form.

With `fix.from: <session>` (or as a chained lens) the errors are the findings an earlier lens
handed on: a bug with a reproduction is present until its reproduction, run by the harness,
passes; a finding quoting its code as evidence is present while that code is. A finding with
neither cannot be measured and is only listed.

Counts are kept as JSON in every decision (the next iteration's "before" is the previous
"after"), and what is written is masked; so a fresh count is masked the same way before it is
compared with a stored one, or a message with a secret-looking string would seem to change.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoresearch.measure import metrics
from autoresearch.safety import commands, worktree_files

from ...errors import SpecError
from ..lens import error_counts
from ..lens.error_counts import Count, Error
from ..lens.output import mask_data
from ..lens.reproduction import judge_reproduction

PARSERS = ("pytest", "ruff", "mypy", "pyright", "exit", "regex:<pattern>")
# Parsers that read a JSON report: stderr chatter must not be mixed into it.
JSON_PARSERS = ("ruff", "pyright")
RUFF_COUNT = "python -m ruff check --no-cache --no-fix --exit-zero --output-format json ."
HANDED_TOOL = "handoff"  # the tool name of errors handed on by an earlier lens
NO_REPORT = "no report"  # the code of the error a JSON tool that printed nothing counts as
SCRATCH = ".autoresearch-fix"  # reproductions run from here; removed after every count
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


def run(
    cmd: ErrorCommand,
    worktree: Path,
    secrets: list[str] | None = None,
    trace_to: Path | None = None,
) -> Count:
    """One tool's count in `worktree`; a timeout is a build error (nothing else is known).
    With `trace_to`, the run is traced there (commands.run)."""
    name = cmd.parser.partition(":")[0]
    metrics.pristine(worktree)  # each count starts from the tree as committed or staged
    result = commands.run(
        cmd.command,
        worktree,
        timeout_s=cmd.timeout_s,
        extra_secrets=secrets,
        stdout_only=name in JSON_PARSERS,
        trace_to=trace_to,
    )
    if result.timed_out:
        error = Error(cmd.tool, "build", "timeout", "", None, f"timed out after {cmd.timeout_s:g}s")
        return Count(cmd.tool, [error], complete=False)
    if name in JSON_PARSERS and not result.output.strip():
        # Even a clean run prints a report ("[]"): no report is no count, never zero errors.
        said = " ".join(result.stderr.split()[-40:]) or "nothing on stderr either"
        error = Error(
            cmd.tool, "build", NO_REPORT, "", None, f"no report (exit {result.exit_code}): {said}"
        )
        return Count(cmd.tool, [error], complete=False)
    if name == "regex":
        return error_counts.parse_regex(
            result.output, cmd.parser.partition(":")[2], cmd.tool, cmd.category, worktree
        )
    return error_counts.parse(cmd.parser, result.output, result.exit_code, cmd.tool, worktree)


def unrunnable(cmds: list[ErrorCommand], counts: list[Count], where: str) -> SpecError | None:
    """The error of the first command that printed no report (at the base commit: a tool
    that is not installed where the session runs), naming its key; None when all ran."""
    for i, (cmd, count) in enumerate(zip(cmds, counts, strict=False)):
        failed = next((e for e in count.errors if e.code == NO_REPORT), None)
        if failed is not None:
            return SpecError(
                f"{where}: key 'fix.errors.{i}.command': `{cmd.command}` printed {failed.message}; "
                "make it run in the target (is the tool installed in the environment "
                "snakemake runs in?)"
            )
    return None


def count_all(
    cmds: list[ErrorCommand],
    worktree: Path,
    secrets: list[str] | None,
    keep: tuple[str, ...],
    handed: list[HandedBug] | None = None,
    repro_command: str = "",
    trace_to: Path | None = None,
) -> list[Count]:
    """Every tool's count (and the handed bugs'), masked as it will be stored. With
    `trace_to`, command i's run is traced to `trace_to/i` (the setup's baseline count)."""
    counts = [
        run(c, worktree, secrets, trace_to / str(i) if trace_to else None)
        for i, c in enumerate(cmds)
    ]
    if handed:
        counts.append(count_handed(handed, worktree, repro_command, secrets))
    return [from_json(to_json(c, keep)) for c in counts]


# --- errors handed on by an earlier lens --------------------------------------------------------


@dataclass(frozen=True)
class HandedBug:
    id: str
    title: str
    severity: str
    file: str
    line: int | None
    reproduction: str = ""  # a test file that fails while the bug is there
    evidence: str = ""  # the code quoted as the finding's evidence

    def error(self) -> Error:
        return Error(HANDED_TOOL, "bug", self.id, self.file, self.line, self.title, self.severity)


def handed_bugs(findings: list[dict[str, Any]]) -> tuple[list[HandedBug], list[str]]:
    """(the measurable findings as bugs, a line on each one that cannot be measured)."""
    bugs, unmeasured = [], []
    for f in findings:
        if f.get("verdict") not in (None, "confirmed"):
            continue  # debug's leads are not bugs yet
        title = str(f.get("title") or f.get("id") or "finding")
        bug = HandedBug(
            id=str(f.get("id") or ""),
            title=title,
            severity=str(f.get("severity") or "medium"),
            file=str(f.get("file") or ""),
            line=f.get("line") if isinstance(f.get("line"), int) else None,
            reproduction=str(f.get("regression_test") or f.get("reproduction") or ""),
            evidence=str(f.get("evidence") or ""),
        )
        if bug.reproduction or (bug.evidence.strip() and bug.file):
            bugs.append(bug)
        else:
            unmeasured.append(f"{bug.id} {title}: no reproduction and no quoted code to check")
    return bugs, unmeasured


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def count_handed(
    bugs: list[HandedBug], worktree: Path, repro_command: str, secrets: list[str] | None
) -> Count:
    """The handed bugs still present: a reproduction that does not pass, or quoted code that
    is still in its file."""
    present = []
    scratch = worktree / SCRATCH
    try:
        for bug in bugs:
            if bug.reproduction:
                _fresh_scratch(scratch)
                path = f"{SCRATCH}/test_fix_{hashlib.sha256(bug.id.encode()).hexdigest()[:8]}.py"
                (worktree / path).write_text(bug.reproduction)
                command = repro_command.replace("{file}", shlex.quote(path))
                result = commands.run(command, worktree, extra_secrets=secrets)
                verdict = judge_reproduction(
                    result.output, None if result.timed_out else result.exit_code
                )
                if verdict.verdict != "not-reproduced":  # fixed only when it runs and passes
                    present.append(bug.error())
            else:
                try:
                    text = worktree_files.read_text(worktree, bug.file)
                except worktree_files.Missing:
                    text = ""
                except worktree_files.Refused:
                    present.append(bug.error())  # unread (a link out) is never "fixed"
                    continue
                if _squash(bug.evidence) in _squash(text):
                    present.append(bug.error())
    finally:
        _remove(scratch)
    return Count(HANDED_TOOL, present)


def _remove(path: Path) -> None:
    """Remove whatever is at `path`, never through a link: the target (a committed link) or a
    reproduction that ran there may have put a link to a folder outside in its place."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)  # does not follow the links inside it


def _fresh_scratch(scratch: Path) -> None:
    """An empty real folder for one reproduction, made anew before each: writing into a
    folder the last one could swap for a link would write outside the worktree."""
    _remove(scratch)
    scratch.mkdir()


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

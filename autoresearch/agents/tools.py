"""The tools an agent may call (docs/agent-tools.md), bound to one worktree and one team.

`Toolbox` is the only way a backend touches the target: file tools go through the
`Sandbox`, commands come from the spec and run through `commands.run`, and the harness
tools (report_finding, finish_fix, ...) are handed, with their text fields cleaned, to
hooks the engine supplies — the engine, not the model, tests, commits and reverts. No
input makes a tool raise or hang: every failure comes back as an `is_error` result.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import hashlib
import itertools
import json
import time
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import regex
from jsonschema import Draft202012Validator

from autoresearch.agents.backends.base import TEAMS, SessionStop, StageFailed, ToolResult
from autoresearch.agents.prompts import RED_SEVERITIES
from autoresearch.agents.shown import Shown, digest
from autoresearch.checks import finding_schema, votes
from autoresearch.gate import run_output, testrun
from autoresearch.safety import commands
from autoresearch.safety.jail import Jail
from autoresearch.safety.sandbox import Hidden, Refused, Sandbox, glob_match
from autoresearch.safety.worktree_files import MAX_WRITE_BYTES

if TYPE_CHECKING:
    from autoresearch.gate.tested import AgentRuns

# Output caps: a tool result goes back into the model's context on every later turn.
MAX_LIST_ENTRIES = 1000
MAX_READ_LINES = 2000
# What read_file shows when not asked for a range: a window, not the module. Each line
# shown is paid for again on every later turn; the agent asks for more when it needs it.
WINDOW_LINES = 100
WINDOW_BEFORE = 25  # of a window around a line, the lines above it
WHOLE_UP_TO = 150  # a file this short comes whole: a second call would cost more
EXCERPT_BEFORE, EXCERPT_AFTER = 8, 12  # a finding's code in Green's brief
MAX_LINE_CHARS = 2000
MAX_SEARCH_HITS = 200
MAX_HIT_CHARS = 300
MAX_SEARCH_FILE_BYTES = 2_000_000
MAX_READ_BYTES = 10_000_000
MAX_WRITE_CHARS = 2_000_000
MAX_EDIT_BYTES = 2_000_000  # a file edit_file may change, and old_str/new_str
MAX_PATTERN_CHARS = 1000
# Cap for one search or glob filter: a pattern like `(a|aa)+$` backtracks for ages. It is
# checked between lines by the wall clock and inside a match by the regex engine, which
# counts CPU time: on a busy machine a runaway match can take a few times this long.
SEARCH_TIME_S = 10.0
TEST_OUTPUT_TAIL = 4000

# Calls whose repeated, unchanged output is pointed at rather than sent again (read_file
# has its own, finer rule: autoresearch/agents/shown.py).
_LOOKUPS = frozenset({"list_files", "search"})

CATEGORIES = ["obvious", "bold", "creative", "adjacent", "wildcard"]

_PATH = {"type": "string", "description": "Path relative to the repository root."}
_STR = {"type": "string", "minLength": 1}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _loose(fields: dict[str, str]) -> dict[str, Any]:
    """A lens report: every field a string and none required at this door. The lens's own
    schema check decides (and counts) what is missing or not allowed: nothing is refused
    here that the harness should see and record as dropped."""
    return _schema({k: {"type": "string", "description": d} for k, d in fields.items()}, [])


# Name -> (description, input_schema). The order here is the order the model sees; it
# never changes during a run, which keeps the tool list byte-stable for prompt caching.
TOOL_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "list_files": (
        "List the repository's files (tracked and new, never git-ignored), limited to the "
        "session's scope. Optionally under one directory and/or matching a glob such as "
        "'**/*.py'.",
        _schema(
            {
                "path": {**_PATH, "description": "Directory to list; default: the root."},
                "glob": {"type": "string", "description": "Glob on the relative path."},
            },
            [],
        ),
    ),
    "read_file": (
        "Read a text file; lines come back numbered ('   12\\t...'). Without start_line or "
        f"line you get the top {WINDOW_LINES} lines (a file of up to {WHOLE_UP_TO} lines whole); "
        f"line shows the {WINDOW_LINES} lines around that line; start_line and/or end_line "
        f"(1-based, inclusive) any range, at most {MAX_READ_LINES} lines per call: end_line "
        "alone reads from the top, so the whole file is one call. A part says the file's "
        "length and how to read on.",
        _schema(
            {
                "path": _PATH,
                "line": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Show the lines around this one (instead of start_line).",
                },
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            ["path"],
        ),
    ),
    "search": (
        "Search file contents with a Python regular expression. Returns 'file:line: text' "
        f"hits, at most {MAX_SEARCH_HITS}. Optionally limit to a directory or file (path) "
        "and/or a glob.",
        _schema(
            {
                "pattern": {**_STR, "description": "Python regular expression."},
                "path": {**_PATH, "description": "Directory or file to search; default: all."},
                "glob": {"type": "string", "description": "Glob on the relative path."},
            },
            ["pattern"],
        ),
    ),
    "run_linter": (
        "Run the project's configured linter and return its exit code and output.",
        _schema({}, []),
    ),
    "run_tests": (
        "Run the project's configured test command (with a timeout) and return its exit "
        "code and the tail of its output.",
        _schema({}, []),
    ),
    "edit_file": (
        "Replace one exact occurrence of old_str with new_str in a file. old_str must occur "
        "exactly once: include enough surrounding lines to make it unique. Whitespace counts.",
        _schema(
            {"path": _PATH, "old_str": _STR, "new_str": {"type": "string"}},
            ["path", "old_str", "new_str"],
        ),
    ),
    "write_file": (
        "Create a file, or overwrite it completely, with the given content.",
        _schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
    ),
    "report_finding": (
        "Record one finding. location is 'path/to/file:line'. issue says what is wrong in one "
        "or two sentences; impact says what breaks or degrades because of it. No fix advice.",
        _schema(
            {
                "severity": {"type": "string", "enum": list(RED_SEVERITIES)},
                "title": _STR,
                "location": _STR,
                "issue": _STR,
                "impact": _STR,
            },
            ["severity", "title", "location", "issue", "impact"],
        ),
    ),
    "finish_fix": (
        "Hand the fix for one finding to the harness. It runs the tests: if they pass it "
        "commits the change, otherwise it restores the files and records the finding as "
        "skipped. The outcome comes back as this tool's result.",
        _schema(
            {
                "finding_id": {**_STR, "description": "For example F-003."},
                "summary": {**_STR, "description": "One line: what the fix does."},
            },
            ["finding_id", "summary"],
        ),
    ),
    "skip_finding": (
        "Record that a finding is left unfixed (unclear, not reproducible, out of scope) and why.",
        _schema({"finding_id": _STR, "reason": _STR}, ["finding_id", "reason"]),
    ),
    "finish_refactor": (
        "Hand your simplification to the harness. It runs the tests: if they pass it "
        "commits the change, otherwise it restores the files. The outcome comes back as "
        "this tool's result.",
        _schema(
            {"summary": {**_STR, "description": "One line: what was simplified."}}, ["summary"]
        ),
    ),
    "propose_hypothesis": (
        "Record one hypothesis for the session to test on its own track.",
        _schema(
            {
                "id": {"type": "string", "pattern": "^h[1-9][0-9]*$", "description": "h1, h2, ..."},
                "category": {"type": "string", "enum": CATEGORIES},
                "name": _STR,
                "statement": {**_STR, "description": "One sentence."},
            },
            ["id", "category", "name", "statement"],
        ),
    ),
    "finish_experiment": (
        "Hand this iteration's single change to the harness. It measures the metric and runs "
        "the guard: an improvement is kept (committed), anything else is discarded.",
        _schema(
            {
                "hypothesis": {**_STR, "description": "What you expect and why, one sentence."},
                "change_summary": {**_STR, "description": "One line: what you changed."},
            },
            ["hypothesis", "change_summary"],
        ),
    ),
    # The lenses' report tools (docs/lenses.md): one per lens, plus the debate's position.
    "report_vulnerability": (
        "Record one security finding for this iteration's vector. The harness checks every "
        "field and drops a finding that fails a check.",
        _loose(finding_schema.told(finding_schema.SECURITY)),
    ),
    "report_bug": (
        "Record this iteration's hypothesis and its outcome. A bug counts as confirmed only "
        "when its reproduction (a complete test file) fails when the harness runs it.",
        _loose(finding_schema.told(finding_schema.DEBUG)),
    ),
    "report_situation": (
        "Record one situation (use case or edge case) for this iteration's dimension.",
        _loose(finding_schema.told(finding_schema.SCENARIO)),
    ),
    "report_prediction": (
        "Record one finding from your own analysis of the target.",
        _loose(finding_schema.told(finding_schema.PREDICT)),
    ),
    "state_position": (
        "State your position on one finding of the debate: confirm, dispute, revise (confirm "
        "with another severity) or abstain.",
        _loose(
            {
                "finding_id": "The finding's id as listed.",
                "stance": " | ".join(votes.STANCES),
                "severity": "revise only: the severity you argue for.",
                "reason": "One or two sentences.",
            }
        ),
    ),
    # The repair lenses' and stop 7's own harness tools (docs/lenses.md).
    "cast_vote": (
        "Give your verdict on the session's goal: met or not met, and why in one or two "
        "sentences. Your vote is final; the other judges do not see it.",
        _schema(
            {"verdict": {"type": "string", "enum": ["met", "not met"]}, "reason": _STR},
            ["verdict", "reason"],
        ),
    ),
    "finish_docs": (
        "Hand your documentation changes to the harness. It checks every doc (paths, "
        "symbols, config keys, links, size, Mermaid) and either commits them or sends the "
        "failures back to you.",
        _schema({"summary": {**_STR, "description": "One line: what changed."}}, ["summary"]),
    ),
}

READ_TOOLS = ("list_files", "read_file", "search")
WRITE_TOOLS = ("run_tests", "edit_file", "write_file")
TEAM_TOOLS: dict[str, tuple[str, ...]] = {
    "red": (*READ_TOOLS, "run_linter", "report_finding"),
    "green": (*READ_TOOLS, *WRITE_TOOLS, "finish_fix", "skip_finding"),
    "refactor": (*READ_TOOLS, *WRITE_TOOLS, "finish_refactor"),
    "strategist": (*READ_TOOLS, "propose_hypothesis"),
    "experiment": (*READ_TOOLS, *WRITE_TOOLS, "finish_experiment"),
    # The lenses change nothing: read tools, the commands that only look, one report tool.
    "auditor": (*READ_TOOLS, "run_linter", "report_vulnerability"),
    "debugger": (*READ_TOOLS, "run_tests", "run_linter", "report_bug"),
    "explorer": (*READ_TOOLS, "report_situation"),
    "persona": (*READ_TOOLS, "report_prediction"),
    "debate": (*READ_TOOLS, "state_position"),
    # Stop 7's judges only look; the repair lenses change the target through the harness.
    "judge": (*READ_TOOLS, "cast_vote"),
    "fix": (*READ_TOOLS, *WRITE_TOOLS, "finish_fix", "skip_finding"),
    "learn": (*READ_TOOLS, "edit_file", "write_file", "finish_docs"),
    "ship": (*READ_TOOLS, *WRITE_TOOLS, "finish_fix", "skip_finding"),
}
# Every tool the toolbox does not carry out itself goes to a hook the engine supplies.
HARNESS_TOOLS = frozenset(TOOL_SPECS) - {*READ_TOOLS, *WRITE_TOOLS, "run_linter"}

_VALIDATORS = {name: Draft202012Validator(schema) for name, (_, schema) in TOOL_SPECS.items()}

# The text fields of the harness tools: (single line?, most characters). They end up in
# Markdown records, commit messages and other teams' briefs, so a line break in a title
# could forge a finding, and control characters could hide text from the human reader.
TEXT_FIELDS: dict[str, dict[str, tuple[bool, int]]] = {
    "report_finding": {
        "title": (True, 200),
        "location": (True, 300),
        "issue": (False, 2000),
        "impact": (False, 2000),
    },
    "finish_fix": {"finding_id": (True, 20), "summary": (True, 300)},
    "skip_finding": {"finding_id": (True, 20), "reason": (False, 2000)},
    "finish_refactor": {"summary": (True, 300)},
    "propose_hypothesis": {"name": (True, 200), "statement": (False, 1000)},
    "finish_experiment": {"hypothesis": (False, 1000), "change_summary": (True, 300)},
}
# Invisible characters that reorder or hide text (bidirectional overrides and isolates).
_HIDING = {
    chr(c)
    for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200B, 0x200C, 0x200E, 0x200F]
    + [0x2060, 0xFEFF]
}

Hook = Callable[..., ToolResult | str]
# Pattern syntax under which a match in a file's joined lines need not be a match in one
# line alone (lookarounds, inline flags, string anchors, atomic and possessive forms):
# such patterns skip the whole-file pre-check and are run line by line only.
_LINE_BY_LINE_ONLY = regex.compile(r"\(\?(?![:P])|\\[AZzGK]|[*+?}]\+")


def _error(message: str) -> ToolResult:
    return ToolResult(message, is_error=True)


def _validation_message(name: str, args: dict[str, Any]) -> str | None:
    errors = sorted(_VALIDATORS[name].iter_errors(args), key=lambda e: list(e.path))
    if not errors:
        return None
    parts = []
    for err in errors[:5]:
        where = ".".join(str(p) for p in err.path)
        # The message quotes the offending value, which may be megabytes long.
        message = err.message if len(err.message) <= 300 else err.message[:300] + " [...]"
        parts.append(f"{where}: {message}" if where else message)
    schema = json.dumps(TOOL_SPECS[name][1]["properties"], sort_keys=True)
    return f"invalid input for {name}: " + "; ".join(parts) + f". Expected properties: {schema}"


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _whole_numbers(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema counts 1.0 as an integer; hand the tools a real int."""
    properties = TOOL_SPECS[name][1]["properties"]
    return {
        key: int(value)
        if isinstance(value, float) and properties.get(key, {}).get("type") == "integer"
        else value
        for key, value in args.items()
    }


def clean_field(field: str, value: str, one_line: bool, limit: int) -> str:
    """A harness field with control and hiding characters removed and whitespace runs
    folded to one space; ValueError (for the agent) when it breaks a line it must not,
    is empty once cleaned, or is longer than `limit`."""
    value = value.strip()
    if one_line and len(value.splitlines()) > 1:
        raise ValueError(f"{field} must be a single line (it is shown as one)")
    kept = []
    for char in value:
        if char in _HIDING:
            continue
        if char.isspace():
            kept.append(" ")
        elif unicodedata.category(char) not in ("Cc", "Cs"):
            kept.append(char)
    text = " ".join("".join(kept).split())
    if not text:
        raise ValueError(f"{field} is empty once control characters are removed")
    if len(text) > limit:
        raise ValueError(f"{field} is {len(text)} characters long; at most {limit} are kept")
    return text


def _clean_fields(name: str, args: dict[str, Any]) -> dict[str, Any]:
    cleaned = dict(args)
    for field, (one_line, limit) in TEXT_FIELDS.get(name, {}).items():
        if isinstance(cleaned.get(field), str):
            cleaned[field] = clean_field(field, cleaned[field], one_line, limit)
    return cleaned


def _candidate_lines(whole: Any, lines: list[str], deadline: float) -> Iterator[int]:
    """Numbers of the lines in which a match may start, found with few regex calls.

    Every call with a timeout costs microseconds, so one per line adds up to seconds on a
    large tree. With `^`/`$` at line ends (`whole` is compiled MULTILINE), a match inside
    one line is also a match of the joined lines starting at the same place: searching the
    joined text from the start of each line after the last hit finds every such line.
    Each candidate is then checked on its own. `whole` is None for patterns where that
    does not hold (see _LINE_BY_LINE_ONLY): then every line is a candidate.
    """
    if whole is None:
        yield from range(1, len(lines) + 1)
        return
    starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    text = "\n".join(lines)
    pos = 0
    while pos <= len(text):
        found = whole.search(text, pos, timeout=_remaining(deadline))
        if found is None:
            return
        index = bisect.bisect_right(starts, found.start()) - 1
        if index >= len(lines):
            return
        yield index + 1
        pos = starts[index + 1]


def _read_range(
    length: int, start: int | None, end: int | None, around: int | None
) -> tuple[int, int]:
    """(first, last) line of a read_file call: a window unless a range is asked for."""
    if around is not None:
        first = max(1, min(around - WINDOW_BEFORE, length - WINDOW_LINES + 1))
        return first, min(length, first + WINDOW_LINES - 1)
    first = start or 1
    if end is None:
        span = length if start is None and length <= WHOLE_UP_TO else WINDOW_LINES
        return first, min(length, first + span - 1)
    return first, min(length, end, first + MAX_READ_LINES - 1)


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


class Toolbox:
    """The tools of one team, bound to one worktree (satisfies `agents.Toolbox`)."""

    def __init__(
        self,
        team: str,
        worktree: Path,
        *,
        test_command: str | None = None,
        linter_command: str | None = None,
        test_timeout_s: float = 600,
        protected: list[str] | None = None,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        secrets: list[str] | None = None,
        hooks: dict[str, Hook] | None = None,
        allow_ignored_writes: bool = False,
        search_time_s: float = SEARCH_TIME_S,
        jail: Jail | None = None,
        hidden: list[str] | None = None,
        agent_runs: AgentRuns | None = None,
    ) -> None:
        if team not in TEAM_TOOLS:
            raise ValueError(f"unknown team {team!r}; expected one of {', '.join(TEAMS)}")
        self.team = team
        self.sandbox = Sandbox(
            Path(worktree),
            list(protected or []),
            list(include or []),
            list(exclude or []),
            allow_ignored_writes=allow_ignored_writes,
            hidden=list(hidden or []),
        )
        self.test_command = test_command
        self.linter_command = linter_command
        self.test_timeout_s = test_timeout_s
        self.search_time_s = search_time_s
        self.secrets = list(secrets or [])
        self.jail = jail
        # How run_tests is made as the gate makes its runs, and filed for it (tested.py).
        self.agent_runs = agent_runs
        self.hooks = dict(hooks or {})
        # What the agent wrote through edit_file and write_file: path -> sha256 of the bytes.
        # Only these make up a change; what a command leaves behind is not the agent's.
        self.written: dict[str, str] = {}
        self.tool_names = TEAM_TOOLS[team]
        # Built once: the same objects, in the same order, for every request of the stage.
        self._definitions = [
            {"name": name, "description": TOOL_SPECS[name][0], "input_schema": TOOL_SPECS[name][1]}
            for name in self.tool_names
        ]
        self._finished = False
        # What this conversation has already been shown of the files (autoresearch/agents/shown.py).
        self.shown = Shown()

    # -- Toolbox protocol ------------------------------------------------------------------

    def definitions(self) -> list[dict[str, Any]]:
        # A deep copy, so a backend adding cache_control cannot alter the next call's list.
        return copy.deepcopy(self._definitions)

    @property
    def finished(self) -> bool:
        return self._finished

    def mark_finished(self) -> None:
        """Called by a harness hook when the team's work is over."""
        self._finished = True

    def forget_shown(self) -> None:
        """Called by a backend that keeps a conversation, when one starts and whenever it
        shortens earlier outputs: from then on a file's text already sent (and still
        there) is pointed at rather than sent again, until that happens again."""
        self.shown.forget()

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        available = ", ".join(self.tool_names)
        if not isinstance(name, str) or name not in TOOL_SPECS:
            return _error(f"unknown tool {str(name)[:100]!r}; available: {available}")
        if name not in self.tool_names:
            return _error(
                f"{name} is not available to the {self.team} team; available: {available}"
            )
        if not isinstance(args, dict):
            return _error(f"input for {name} must be a JSON object, got {type(args).__name__}")
        if self._finished:
            return _error("this stage is already finished; no further tool calls are carried out")
        try:
            problem = _validation_message(name, args)
        except RecursionError:  # arguments nested thousands deep
            return _error(f"invalid input for {name}: the arguments are nested too deeply")
        if problem:
            return _error(problem)
        args = _whole_numbers(name, args)
        if name in HARNESS_TOOLS:
            try:
                args = _clean_fields(name, args)
            except ValueError as err:
                return _error(f"invalid input for {name}: {err}")
            return self._hook(name, args)
        self.sandbox.forget()
        try:
            result = getattr(self, f"_tool_{name}")(**args)
        except Refused as refusal:
            return _error(f"refused: {refusal}")
        except TimeoutError:
            return _error(
                f"{name} stopped after {self.search_time_s:g}s: the pattern or glob is too slow "
                "to match; simplify it or narrow the search with path"
            )
        except RecursionError:
            return _error(f"{name} failed: the input is nested too deeply; simplify it")
        except Exception as err:  # noqa: BLE001 - any failure is the agent's to read, not a crash
            return _error(f"{name} failed: {type(err).__name__}: {err}")
        if name in _LOOKUPS and not result.is_error:
            call = json.dumps([name, args], sort_keys=True)
            if self.shown.same_output(call, result.content):
                lines = result.content.count("\n") + 1
                return ToolResult(
                    f"[the same output ({lines} lines) as this very call gave earlier in this "
                    "conversation: read it there. Ask again for the text.]"
                )
        return result

    # -- harness tools ---------------------------------------------------------------------

    def _hook(self, name: str, args: dict[str, Any]) -> ToolResult:
        hook = self.hooks.get(name)
        if hook is None:
            return _error(f"{name} is not connected to the harness in this stage")
        try:
            result = hook(**args)
        except (StageFailed, SessionStop):
            raise
        except Refused as refusal:
            return _error(f"refused: {refusal}")
        except (OSError, ValueError) as err:
            # Hooks signal bad input (an unknown finding id, a duplicate) with ValueError;
            # anything else is a harness bug and must surface, not be shown to the model.
            return _error(str(err))
        if isinstance(result, ToolResult):
            return result
        return ToolResult(str(result))

    # -- read tools ------------------------------------------------------------------------

    def _matching(self, names: list[str], glob: str | None, deadline: float) -> list[str]:
        if not glob:
            return names
        try:
            return [n for n in names if glob_match(n, glob, timeout=_remaining(deadline))]
        except (ValueError, regex.error) as err:
            raise Refused(f"invalid glob: {err}") from None

    def _tool_list_files(self, path: str = "", glob: str | None = None) -> ToolResult:
        deadline = time.monotonic() + self.search_time_s
        try:
            _, base = self.sandbox.resolve(path)
        except Hidden:
            return ToolResult("(no files)")  # what a missing path lists
        prefix = f"{base}/" if base else ""
        names = [n for n in self.sandbox.files() if not prefix or n.startswith(prefix) or n == base]
        names = self._matching(names, glob, deadline)
        if not names:
            return ToolResult("(no files)")
        shown = names[:MAX_LIST_ENTRIES]
        text = "\n".join(shown)
        if len(names) > len(shown):
            text += f"\n[... {len(names) - len(shown)} more files; narrow with path or glob]"
        return ToolResult(text)

    def _read_text(self, path: str) -> tuple[str, str, str]:
        """(relative path, text, digest of the bytes) of a text file."""
        _, rel = self.sandbox.resolve(path)
        data = self.sandbox.read_bytes(rel or ".", MAX_READ_BYTES)
        if _is_binary(data):
            raise Refused(f"{path!r} is a binary file")
        return rel, data.decode("utf-8", errors="replace"), digest(data)

    def _tool_read_file(
        self,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        line: int | None = None,
    ) -> ToolResult:
        rel, text, file_digest = self._read_text(path)
        lines = text.splitlines()
        if not lines:
            return ToolResult("(empty file)")
        if line is not None and start_line is not None:
            return _error("give line (a window around it) or start_line, not both")
        first, last = _read_range(len(lines), start_line, end_line, line)
        if first > len(lines):
            return _error(f"start_line {first} is past the end of the file ({len(lines)} lines)")
        if last < first:
            return _error("end_line is before start_line")
        asked = range(first, last + 1)
        if self.shown.note_instead(rel, file_digest, asked):
            return ToolResult(
                f"[{rel} has the same content as when earlier output in this conversation "
                f"showed lines {first}-{last} of it: read them there. Ask again for the "
                "text.]"
            )
        width = len(str(last))
        out = []
        if first > 1 or last < len(lines):
            out.append(f"[{rel}: lines {first}-{last} of {len(lines)}]")
        whole: list[int] = []  # the lines shown in full, not cut
        for number in asked:
            shown = lines[number - 1]
            if len(shown) > MAX_LINE_CHARS:
                shown = shown[:MAX_LINE_CHARS] + " [... line cut ...]"
            else:
                whole.append(number)
            out.append(f"{number:>{width}}\t{shown}")
        if last < len(lines) and (end_line is None or end_line > last):
            if end_line is not None:  # the cap cut the range asked for
                rest = f"at most {MAX_READ_LINES} lines come a call"
            elif first == 1:
                rest = f"the whole file with end_line={len(lines)}"
            else:
                rest = f"lines 1-{first - 1} with end_line={first - 1}"
            out.append(
                f"[... lines {last + 1}-{len(lines)} not shown: read on with "
                f"start_line={last + 1}, or {rest}]"
            )
        elif first > 1 and start_line is None:
            out.append(f"[lines 1-{first - 1} not shown: end_line={first - 1} reads them]")
        self.shown.add(rel, file_digest, whole)
        return ToolResult("\n".join(out))

    def excerpt(self, location: str) -> str | None:
        """The numbered lines around a finding's `path:line` (the first place named), as the
        agent could read them, for Green's brief; None when there is no such line or the
        file may not be read (hidden, binary, refused)."""
        match = regex.match(r"\s*([^:,\s][^:,]*?):(\d+)", location)
        if not match:
            return None
        try:
            rel, text, _ = self._read_text(match[1].strip())
        except (Refused, OSError):
            return None
        lines, at = text.splitlines(), int(match[2])
        if not 1 <= at <= len(lines):
            return None
        first, last = max(1, at - EXCERPT_BEFORE), min(len(lines), at + EXCERPT_AFTER)
        width = len(str(last))
        body = [f"{n:>{width}}\t{lines[n - 1][:MAX_LINE_CHARS]}" for n in range(first, last + 1)]
        return f"{rel}, lines {first}-{last} of {len(lines)}:\n" + "\n".join(body)

    def _tool_search(self, pattern: str, path: str = "", glob: str | None = None) -> ToolResult:
        deadline = time.monotonic() + self.search_time_s
        if len(pattern) > MAX_PATTERN_CHARS:
            return _error(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
        try:
            compiled = regex.compile(pattern)
        except regex.error as err:
            return _error(f"invalid regular expression: {err}")
        target, base = self.sandbox.resolve(path)
        single = not target.is_dir()
        if single:
            # One named file: refusals (a FIFO, a hard link out) go back to the agent.
            self.sandbox.read_bytes(base, MAX_SEARCH_FILE_BYTES)
            listing = [(base, target)] if self.sandbox.in_scope(base) else []
        else:
            prefix = f"{base}/" if base else ""
            listing = [(n, t) for n, t in self.sandbox.listing() if n.startswith(prefix)]
        candidates = self._matching([n for n, _ in listing], glob, deadline)
        whole = None if _LINE_BY_LINE_ONLY.search(pattern) else regex.compile(pattern, regex.M)
        hits: list[str] = []
        more = skipped = 0
        for rel in candidates:
            try:
                data = self.sandbox.read_bytes(rel, MAX_SEARCH_FILE_BYTES)
            except (Refused, OSError):
                if single:
                    raise
                skipped += 1
                continue
            if _is_binary(data):
                continue
            lines = data.decode("utf-8", "replace").splitlines()
            # Lines whose text this conversation already has, from this very file content.
            known = self.shown.lines_of(rel, data)
            pointed: list[int] = []
            for number in _candidate_lines(whole, lines, deadline):
                line = lines[number - 1]
                if compiled.search(line, timeout=_remaining(deadline)):
                    if number in known:
                        if not pointed:
                            hits.append("")  # its place: the file's first hit
                            at = len(hits) - 1
                        pointed.append(number)
                    elif len(hits) < MAX_SEARCH_HITS:
                        text = line.strip()
                        if len(text) > MAX_HIT_CHARS:
                            text = (
                                f"{text[:MAX_HIT_CHARS]} "
                                f"[... {len(text) - MAX_HIT_CHARS} more characters]"
                            )
                        hits.append(f"{rel}:{number}: {text}")
                    else:
                        more += 1
            if pointed:
                hits[at] = (
                    f"{rel}: {len(pointed)} matching line{'s' if len(pointed) > 1 else ''} "
                    "already shown above, unchanged: " + ", ".join(map(str, pointed))
                )
        if more:
            hits.append(f"[... {more} more matches; narrow with path or glob]")
        if skipped:
            hits.append(
                f"[{skipped} files not searched: larger than {MAX_SEARCH_FILE_BYTES} bytes, "
                "or refused (hard link out, not a regular file)]"
            )
        return ToolResult("\n".join(hits) if hits else "(no matches)")

    # -- commands --------------------------------------------------------------------------

    def _run(self, command: str | None, key: str, *, tests: bool = False) -> ToolResult:
        if not command:
            return _error(f"no command is configured for this (spec key `{key}`)")
        result = commands.run(
            command,
            self.sandbox.root,
            timeout_s=self.test_timeout_s,
            extra_secrets=self.secrets,
            jail=self.jail,
        )
        return self._shown(command, result, tests=tests)

    def _shown(self, command: str, result: commands.CommandResult, *, tests: bool) -> ToolResult:
        if result.timed_out:
            head = f"timed out after {self.test_timeout_s:g}s (counts as a failure)"
        else:
            head = f"exit code: {result.exit_code}"
        if tests:  # the lines of passing tests left out first, so the tail holds more
            result = dataclasses.replace(result, output=run_output.condense(result.output))
        tail = self.sandbox.redact(result.tail(TEST_OUTPUT_TAIL))
        return ToolResult(f"$ {command}\n{head}\n{tail}")

    def _tool_run_tests(self) -> ToolResult:
        runs, command = self.agent_runs, self.test_command
        if not runs or not runs.serves(command, self.jail, self.test_timeout_s, self.secrets):
            return self._run(command, "test_command", tests=True)
        # The gate's run of the tree this change would be committed as, filed for the gate.
        run, result = runs.run(dict(self.written))
        if result is None:  # that tree's run was filed before: what it said
            timed_out = run.outcome == testrun.TIMED_OUT
            result = commands.CommandResult("", run.exit_code, run.tail, 0.0, timed_out)
            note = "[this very tree was tested before in this session: that run's output]\n"
        else:
            note = ""
        if run.outcome in (testrun.TAMPERED, testrun.UNCHECKED):
            note += f"[the harness cannot trust this run and keeps no change on it: {run.cause}]\n"
        shown = self._shown(command or "", result, tests=True)
        if not note:
            return shown
        head, _, rest = shown.content.partition("\n")
        return ToolResult(f"{head}\n{note}{rest}", is_error=shown.is_error)

    def _tool_run_linter(self) -> ToolResult:
        return self._run(self.linter_command, "linter_command")

    # -- write tools -----------------------------------------------------------------------

    def _tool_edit_file(self, path: str, old_str: str, new_str: str) -> ToolResult:
        target, rel = self.sandbox.resolve(path, write=True)
        if not target.exists():
            return _error(f"{rel!r} does not exist; use write_file to create a file")
        if max(len(old_str), len(new_str)) > MAX_EDIT_BYTES:
            return _error(f"old_str and new_str may have at most {MAX_EDIT_BYTES} characters")
        data = self.sandbox.read_bytes(rel, MAX_EDIT_BYTES)
        if _is_binary(data):
            return _error(f"{rel!r} is a binary file")
        text = data.decode("utf-8")  # edits must round-trip exactly: no lossy decoding
        count = text.count(old_str)
        if count == 0 and "\r\n" in text and "\r\n" not in old_str:
            # read_file shows lines without their CRLF; accept the agent's LF spelling.
            old_str, new_str = old_str.replace("\n", "\r\n"), new_str.replace("\n", "\r\n")
            count = text.count(old_str)
        if count == 0:
            return _error(
                f"old_str was not found in {rel}; read the file again and copy it exactly"
            )
        if count > 1:
            return _error(f"old_str occurs {count} times in {rel}; include more surrounding lines")
        if old_str == new_str:
            return _error("old_str and new_str are identical; nothing to change")
        # Encoded before anything is written: a lone surrogate fails here, file untouched.
        try:
            new = text.replace(old_str, new_str, 1).encode("utf-8")
        except UnicodeEncodeError as err:
            return _error(f"new_str cannot be written as UTF-8 ({err.reason}); nothing was changed")
        if len(new) > MAX_WRITE_BYTES:
            return _error(f"the edited file would be larger than {MAX_WRITE_BYTES} bytes")
        self.sandbox.write_bytes(target, rel, new)
        self.written[rel] = hashlib.sha256(new).hexdigest()
        self.shown.drop(rel)
        return ToolResult(f"edited {rel}")

    def _tool_write_file(self, path: str, content: str) -> ToolResult:
        target, rel = self.sandbox.resolve(path, write=True)
        if len(content) > MAX_WRITE_CHARS:
            return _error(f"content is larger than {MAX_WRITE_CHARS} characters")
        # Encoded before anything is written: a lone surrogate fails here, file untouched.
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as err:
            return _error(
                f"content cannot be written as UTF-8 ({err.reason} at character {err.start}); "
                "nothing was changed"
            )
        if len(data) > MAX_WRITE_BYTES:
            return _error(f"content is larger than {MAX_WRITE_BYTES} bytes as UTF-8")
        existed = self.sandbox.write_bytes(target, rel, data)
        self.written[rel] = hashlib.sha256(data).hexdigest()
        self.shown.drop(rel)
        return ToolResult(
            f"{'overwrote' if existed else 'created'} {rel} ({len(content)} characters)"
        )

"""A run of the target's test suite and what it proved: the command instrumented for its
runner's own report, run, and judged into a `TestRun` (outcome, cause, counts, test ids).

The gate that compares two runs is verdict.py; setup's check of the first run baseline.py;
the runners' reports are read in runner_reports.py.
"""

from __future__ import annotations

import os
import re
import secrets as random_names
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autoresearch.gate import cargo_canary, diagnosis, report_plugin, runner_canary
from autoresearch.gate.runner_reports import (
    ANSI,
    Streamed,
    Tally,
    read_cargo,
    read_go_json,
    read_jest_reports,
    read_stream,
)
from autoresearch.safety import commands
from autoresearch.safety.growth import GROWTH_KEY
from autoresearch.safety.held_pipe import HeldPipe
from autoresearch.safety.jail import Jail
from autoresearch.session.stack import (
    package_test_script_is_jest,
    parse_test_output,
    uncached_test_command,
)

MAX_REPORT_BYTES = 200_000_000  # a JUnit or Jest report; a big suite's stays far below

PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not_run"  # collection or usage error, no tests collected, command not found
TIMED_OUT = "timed_out"
# The run's report cannot be trusted: the harness's canary tests did not come out as they
# must (something rewrites outcomes), or the ids and the runner's count of outcomes disagree.
# Never a pass, never a reference.
TAMPERED = "tampered"
UNCHECKED = "unchecked"
PLUGIN = "_autoresearch_report"  # the module name report_plugin.py is loaded under
STREAM_WAIT_S = 30  # for the report pipe's end once the command has ended
TAIL_CHARS = 3000


@dataclass(frozen=True)
class TestRun:
    """One run of the test command; counts and ids are None when the runner did not give them."""

    __test__ = False  # a record, not a pytest test class

    command: str  # the test command as the spec gives it
    ran: str  # what actually ran: the command with the flags we added
    outcome: str  # PASSED | FAILED | NOT_RUN | TIMED_OUT
    cause: str  # why, in a few words: "2 tests failed", "collection error", "no tests collected"
    passed: int | None
    failed: int | None
    skipped: int | None
    errors: int | None
    failing_ids: frozenset[str] | None  # failed and errored tests
    passing_ids: frozenset[str] | None
    exit_code: int | None
    duration_s: float
    tail: str
    source: str  # junit | go-json | cargo | jest-json | regex | exit-code-only
    skipped_ids: frozenset[str] | None = None  # skipped and xfailed tests
    # Files the tests read or imported, (how, path): "read", "read-via-code", "import"
    # (report_plugin._Inputs); None where the runner's report does not say (not pytest's).
    test_inputs: frozenset[tuple[str, str]] | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == PASSED

    @property
    def summary(self) -> str:
        """One line for logs and the console. A run with failures never reads as a pass, and a run
        that never got to its tests never reads as "N failed"."""
        if self.outcome == TIMED_OUT:
            return f"TIMED OUT after {self.duration_s:.0f} s"
        if self.outcome == NOT_RUN:
            return f"NOT RUN: {self.cause} ({exit_text(self.exit_code)})"
        if self.outcome in (TAMPERED, UNCHECKED):
            return f"{self.outcome.upper()}: {self.cause}"
        if self.outcome == PASSED:
            if self.passed is None:
                return "passed (exit code 0; counts unavailable)"
            return f"{self.passed} passed" + (f", {self.skipped} skipped" if self.skipped else "")
        if self.failed is None:
            return f"FAILED: {self.cause} (counts unavailable)"
        parts = [f"{self.failed} failed"]
        if self.errors:
            parts.append(f"{self.errors} error{'s' if self.errors != 1 else ''}")
        parts.append(f"{self.passed or 0} ok")
        if self.skipped:
            parts.append(f"{self.skipped} skipped")
        if self.failed == 0 and not self.errors:
            parts.append(self.cause)  # e.g. a coverage threshold: exit code 1, no failing test
        return "FAILED: " + ", ".join(parts)

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict (setup.json, decision.json, test-runs.jsonl); `ok` and `summary`
        are kept for older readers. The passing ids are kept: a later change is held to them."""
        return {
            "outcome": self.outcome,
            "ok": self.ok,
            "summary": self.summary,
            "cause": self.cause,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "errors": self.errors,
            "failing_ids": _sorted_or_none(self.failing_ids),
            "passing_ids": _sorted_or_none(self.passing_ids),
            "skipped_ids": _sorted_or_none(self.skipped_ids),
            "test_inputs": None
            if self.test_inputs is None
            else [{"how": how, "path": path} for how, path in sorted(self.test_inputs)],
            "exit_code": self.exit_code,
            "timed_out": self.outcome == TIMED_OUT,
            "duration_s": round(self.duration_s, 3),
            "source": self.source,
            "command": self.command,
            "ran": self.ran,
            "tail": self.tail,
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> TestRun:
        def ids(key: str) -> frozenset[str] | None:
            value = data.get(key)
            return None if value is None else frozenset(value)

        return cls(
            command=data.get("command", ""),
            ran=data.get("ran", data.get("command", "")),
            outcome=data["outcome"],
            cause=data.get("cause", ""),
            passed=data.get("passed"),
            failed=data.get("failed"),
            skipped=data.get("skipped"),
            errors=data.get("errors"),
            failing_ids=ids("failing_ids"),
            passing_ids=ids("passing_ids"),
            exit_code=data.get("exit_code"),
            duration_s=float(data.get("duration_s") or 0.0),
            tail=data.get("tail", ""),
            source=data.get("source", "exit-code-only"),
            skipped_ids=ids("skipped_ids"),
            test_inputs=_inputs(data.get("test_inputs")),
        )


def run_tests(
    command: str,
    cwd: Path | str,
    *,
    stack: str | None,
    timeout_s: float,
    secrets: list[str] | None = None,
    uncached: bool = False,
    results_dir: Path | None = None,
    jail: Jail | None = None,
    on_result: Callable[[commands.CommandResult], None] | None = None,
) -> TestRun:
    """Run the test command in `cwd` and read what it proved.

    `stack` is the detected stack's name (it decides how `npm test` is treated). With `uncached`
    the tool's cache is defeated first (`stack.uncached_test_command`). Where the runner has a
    report of its own it is asked for: pytest loads the harness's plugin (report_plugin.py),
    which streams each outcome through a pipe the harness holds and runs two canary tests;
    `go test -json`; cargo's `--no-fail-fast` so every test binary runs; jest `--json
    --outputFile`. Result files go to a fresh folder under `results_dir` (default: the system
    temp folder), outside the worktree. A command jail must let the command write there.
    `on_result` is handed the command's own result (its whole output: what an agent reads).
    """
    cwd = Path(cwd)
    base = uncached_test_command(stack, command, cwd) if uncached else command
    parent = None if results_dir is None else str(results_dir)
    with (
        tempfile.TemporaryDirectory(prefix="autoresearch-tests-", dir=parent) as folder,
        tempfile.TemporaryDirectory(prefix="autoresearch-plugin-") as plugin,
        tempfile.TemporaryDirectory(prefix="autoresearch-report-") as fifo_folder,
        HeldPipe(
            MAX_REPORT_BYTES, STREAM_WAIT_S, _fifo(Path(fifo_folder), base, cwd, stack)
        ) as report,
    ):
        plan = instrument(base, cwd, stack, Path(folder), Path(plugin), report.path)
        # The jail lets the command write `folder`, at this same path, and read the plugin's.
        inside = jail.allowing(Path(folder)) if jail is not None else None
        if inside is not None and report.fifo:
            # Shown read-only: the FIFO is opened to write all the same, never swapped.
            inside = replace(inside, read_only=(*inside.read_only, Path(fifo_folder)))
        streamed: Streamed | None = None
        if plan.runner == "pytest" and plan.added:
            result, streamed = _run_streamed(
                plan, cwd, Path(plugin), report, timeout_s=timeout_s, secrets=secrets, jail=inside
            )
            tally = streamed.tally
        else:
            # Go's and cargo's reports are their output, Jest's its --outputFile (the named
            # pipe, opened by its path: no descriptor to hand over): each comes through a
            # pipe the harness reads as the run goes, so a process of the run can add to it
            # but never rewrite what the runner wrote (and adding shows: a second or cut
            # report is no pass, runner_reports.py).
            # The canary: a test file of the harness's where the runner finds it, this run only.
            canary = _lay_canary(plan, cwd)
            try:
                result = commands.run(
                    plan.command,
                    cwd,
                    timeout_s=timeout_s,
                    extra_secrets=secrets,
                    jail=inside,
                    stream=True,
                )
            finally:
                if canary is not None:
                    runner_canary.take_back(canary)
            streamed = _read(plan, result, cwd, report)
            if canary is not None and canary.runner == "cargo":
                result, streamed = cargo_canary.judge(canary, result, streamed)
            elif canary is not None:
                result, streamed = runner_canary.judge(canary, result, streamed)
            tally = streamed.tally if streamed is not None else None
        if tally is None and (streamed is None or not streamed.problem):
            if _rejects_our_flags(plan, result):
                # The target's setup refused a flag we added (a plugin turned off, say): run
                # the command as given and make do with its text.
                plan = _Plan(base, plan.runner, (), (), ())
                result = commands.run(
                    base, cwd, timeout_s=timeout_s, extra_secrets=secrets, jail=jail, stream=True
                )
                tally, streamed = None, None
        if on_result is not None:
            on_result(result)
        return judge(command, plan, result, tally, cwd, streamed)


def _jest_run(command: str, cwd: Path, stack: str | None) -> bool:
    """Whether Jest runs: its report then comes through a named pipe, opened by its path. A
    /dev/fd path would not do: `npm test` and `npx jest` hand the process they start no
    descriptor beyond 0-2, and /dev/fd/N is then another file of Jest's own (or none)."""
    return instrument(command, cwd, stack, Path("/nonexistent")).runner == "jest"


def _lay_canary(plan: _Plan, cwd: Path) -> runner_canary.Canary | None:
    if plan.runner == "cargo":
        return cargo_canary.lay(cwd, plan.command)
    if plan.runner == "go":
        return runner_canary.lay_go(cwd, plan.command)
    if plan.runner == "jest":
        return runner_canary.lay_jest(cwd, plan.command)
    return None


def _report_of(report: HeldPipe) -> tuple[bytes | None, str | None]:
    """What came through the report pipe, or None and why not."""
    data = report.finish()
    if data is None:
        return None, "the test report was still open after the run"
    if report.too_large:
        return None, "the test report is larger than any suite's"
    return data, None


def _fifo(folder: Path, command: str, cwd: Path, stack: str | None) -> Path | None:
    """Where Jest's report pipe is made, a named one it opens by path (npm and npx hand what
    they start no descriptor beyond 0-2), or None for an anonymous pipe. The jail's user may
    pass through the folder but not list, add or remove in it."""
    if not _jest_run(command, cwd, stack):
        return None
    folder.chmod(0o711)
    return folder / "jest-report"


def _run_streamed(
    plan: _Plan,
    cwd: Path,
    plugin: Path,
    report: HeldPipe,
    *,
    timeout_s: float,
    secrets: list[str] | None,
    jail: Jail | None,
) -> tuple[commands.CommandResult, Streamed]:
    """A pytest command with the harness's plugin: its stream read from a pipe as the run
    goes, and the canaries' names chosen afresh for this run."""
    # The jail may run the tests as an unprivileged user (jail.py): the folder is read-only
    # to it (mounted so), but it must be able to read it at all.
    plugin.chmod(0o755)
    shutil.copyfile(report_plugin.__file__, plugin / f"{PLUGIN}.py")
    (plugin / f"{PLUGIN}.py").chmod(0o644)
    must_pass, must_fail = (f"test_{random_names.token_hex(8)}" for _ in range(2))
    canary = plugin / f"test_{random_names.token_hex(8)}.py"
    canary.write_text(
        f"def {must_pass}():\n    pass\n\n\n"
        f"def {must_fail}():\n    raise AssertionError('the harness canary must fail')\n"
    )
    path = os.pathsep.join([str(plugin), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {
        report_plugin.FD_VARIABLE: str(report.write_fd),
        report_plugin.RUN_VARIABLE: "1",
        report_plugin.CANARY_VARIABLE: os.pathsep.join([str(canary), must_pass, must_fail]),
        "PYTHONPATH": path,
    }
    if jail is not None:
        jail = replace(jail, read_only=(*jail.read_only, plugin))
    try:
        result = commands.run(
            plan.command,
            cwd,
            timeout_s=timeout_s,
            extra_secrets=secrets,
            jail=jail,
            extra_env=env,
            pass_fds=(report.write_fd,),
        )
    finally:
        report.close_ours()
    data, problem = _report_of(report)
    if data is None:
        return result, Streamed(None, problem=problem)
    sessions = len(PYTEST.findall(plan.command))
    return result, read_stream(data, must_pass, must_fail, sessions)


@dataclass(frozen=True)
class _Plan:
    command: str  # what will run
    runner: str  # pytest | go | cargo | jest | other
    added: tuple[str, ...]  # the flags we added, to recognise a refusal
    files: tuple[Path, ...]  # structured output we asked for
    theirs: tuple[Path, ...]  # structured output the command asks for itself (unused now)


_CMD_START = r"(?<![\w./-])"
PYTEST = re.compile(_CMD_START + r"((?:python[\d.]*\s+-m\s+)?(?:[\w./-]*/)?py\.?test)(?=\s|$)")
_OWN_JUNIT = re.compile(r"--junit-?xml(?:=|\s+)(\S+)")
_GO_CMD = re.compile(_CMD_START + r"(go\s+test)(?=\s|$)")
_CARGO_CMD = re.compile(_CMD_START + r"(cargo\s+(?:\+\S+\s+)?test)(?=\s|$)")
_JEST = re.compile(_CMD_START + r"((?:[\w./-]*/)?jest)(?=\s|$)")
_NPM_TEST = re.compile(r"^\s*(npm\s+(?:run\s+)?test|yarn\s+test|pnpm\s+(?:run\s+)?test)\b")


def instrument(
    command: str,
    cwd: Path,
    stack_name: str | None,
    folder: Path,
    plugin: Path | None = None,
    report: str | None = None,
) -> _Plan:
    """The command with structured-output flags for its runner, and where that output will be.

    Flags go right after the runner's name (every occurrence), so `pytest -q && echo ok` still
    hands them to pytest. pytest's report is the harness's plugin's stream, never a file the
    command writes (a JUnit file the tested process could rewrite after the run). `plugin` is
    the plugin's folder: a `PYTHONPATH=` the command sets itself keeps it on the path.
    `report` is where Jest writes its `--json` report: the report pipe's named pipe (a file in
    `folder` when the caller has no pipe).
    """
    if PYTEST.search(command):
        ran = PYTEST.sub(lambda match: f"{match.group(1)} -p {PLUGIN}", command)
        if plugin is not None:
            ran = _PYTHONPATH_SET.sub(lambda m: _add_path(m, plugin), ran)
        return _Plan(ran, "pytest", (PLUGIN,), (), ())
    if _GO_CMD.search(command):
        if re.search(r"(?<!\S)-json\b", command):
            return _Plan(command, "go", (), (), ())
        return _Plan(_GO_CMD.sub(r"\1 -json", command), "go", ("-json",), (), ())
    if _CARGO_CMD.search(command):
        if "--no-fail-fast" in command:
            return _Plan(command, "cargo", (), (), ())
        ran = _CARGO_CMD.sub(r"\1 --no-fail-fast", command)
        return _Plan(ran, "cargo", ("--no-fail-fast",), (), ())
    jest_flags = "--json --outputFile={}"
    if _JEST.search(command):
        files = []

        def add_json(match: re.Match[str]) -> str:
            path = Path(report) if report else folder / f"jest-{len(files)}.json"
            files.append(path)
            return f"{match.group(1)} {jest_flags.format(shlex.quote(str(path)))}"

        ran = _JEST.sub(add_json, command)
        return _Plan(ran, "jest", ("--json", "--outputFile"), tuple(files), ())
    if _npm_jest(command, cwd, stack_name):
        path = Path(report) if report else folder / "jest-0.json"
        flags = jest_flags.format(shlex.quote(str(path)))
        given = command.rstrip()
        ran = given + (f" {flags}" if given.endswith("--no-cache") else f" -- {flags}")
        return _Plan(ran, "jest", ("--json", "--outputFile"), (path,), ())
    return _Plan(command, "other", (), (), ())


def _npm_jest(command: str, cwd: Path, stack_name: str | None) -> bool:
    """Whether `command` is `npm test` (or `npm run test`, `yarn test`, `pnpm test`, with
    `-- --no-cache` at most) of a package whose test script is Jest alone, so flags after
    `--` reach Jest (`_JEST` commands are instrumented directly)."""
    npm = _NPM_TEST.match(command)
    rest = command[npm.end() :].strip() if npm else None
    return (
        rest in ("", "-- --no-cache")
        and stack_name == "Node/TS"
        and not _JEST.search(command)
        and package_test_script_is_jest(cwd)
    )


_PYTHONPATH_SET = re.compile(r"(?<![\w$])PYTHONPATH=(\"[^\"]*\"|'[^']*'|[^\s;&|]*)")


def _add_path(match: re.Match[str], plugin: Path) -> str:
    value = match.group(1)
    folder = shlex.quote(str(plugin))
    if value[:1] in ("'", '"'):
        return f"PYTHONPATH={value[:-1]}{os.pathsep}{str(plugin)}{value[-1]}"
    return f"PYTHONPATH={value}{os.pathsep}{folder}" if value else f"PYTHONPATH={folder}"


def _rejects_our_flags(plan: _Plan, result: commands.CommandResult) -> bool:
    if not plan.added or result.exit_code in (0, None):
        return False
    if plan.runner == "pytest" and result.exit_code != 4:  # pytest's code for a usage error
        return False
    refusal = re.search(
        r"unrecognized arguments|unknown option|unrecognized option|flag provided but not defined"
        r"|unexpected argument",
        result.output,
        re.IGNORECASE,
    )
    return refusal is not None and any(flag in result.output for flag in plan.added)


def _read(
    plan: _Plan, result: commands.CommandResult, cwd: Path, report: HeldPipe
) -> Streamed | None:
    """The report of a go, cargo or Jest run, and why it cannot be trusted when it cannot."""
    if plan.runner == "jest":
        data, problem = _report_of(report)
        if data is None:
            return Streamed(None, problem=problem)
        tally = read_jest_reports(data, cwd, sessions=len(plan.files))
    elif plan.runner in ("go", "cargo"):
        if result.output_open:
            return Streamed(None, problem="the test output was still open after the run")
        reader = read_go_json if plan.runner == "go" else read_cargo
        tally = reader(result.output)
    else:
        return None
    return Streamed(tally, problem=tally.problem if tally is not None else None)


# Text that means the runner never got to the tests, whatever the exit code says.
_NOT_RUN_TEXT = (
    (re.compile(r"errors? during collection"), "collection error"),
    (re.compile(r"ImportError while loading conftest"), "import error while loading conftest"),
    (re.compile(r"^ERROR: usage:", re.MULTILINE), "usage error"),
    (re.compile(r"^[=\s]*no tests ran in [\d.]+s", re.MULTILINE), "no tests collected"),
    (re.compile(r"No tests found, exiting with code"), "no tests collected"),
    (re.compile(r'Missing script: "?test'), "no test script"),
    (re.compile(r"Error: no test specified"), "no test script"),
    (re.compile(r"No rule to make target"), "no such make target"),
    (diagnosis.NO_PYTEST, "pytest is not installed"),
)


_PYTEST_EXIT = {
    2: "interrupted before the tests ran",
    3: "pytest internal error",
    4: "usage error",
    5: "no tests collected",
}


def judge(
    command: str,
    plan: _Plan,
    result: commands.CommandResult,
    tally: Tally | None,
    cwd: Path,
    streamed: Streamed | None = None,
) -> TestRun:
    """The TestRun for a finished command: outcome and cause from the exit code, the structured
    results and the output's own words. A stream that cannot be trusted (`streamed`: a second
    or cut report, canaries that did not come out as they must, ids that disagree with the
    runner's count) makes the run no pass, whatever the exit code says."""
    text = tally.text if tally is not None and tally.text is not None else result.output
    text = ANSI.sub("", text).replace("\r\n", "\n")
    tail = text if len(text) <= TAIL_CHARS else "[... output cut ...]\n" + text[-TAIL_CHARS:]
    code = result.exit_code

    def make(outcome: str, cause: str, counts: tuple, ids: tuple, source: str) -> TestRun:
        return TestRun(
            command,
            plan.command,
            outcome,
            cause,
            *counts,
            *ids,
            code,
            result.duration_s,
            tail,
            source,
            skipped_ids,
            inputs,
        )

    counts: tuple = (None, None, None, None)
    ids: tuple = (None, None)
    skipped_ids: frozenset[str] | None = None
    inputs: frozenset[tuple[str, str]] | None = None
    source = "exit-code-only"
    if tally is not None:
        counts = (len(tally.passed), len(tally.failed), len(tally.skipped), len(tally.errored))
        failing = frozenset(tally.failed | tally.errored)
        ids = (failing if tally.ids_complete else None, frozenset(tally.passed))
        skipped_ids = frozenset(tally.skipped)
        if tally.source == "pytest-stream":
            inputs = frozenset(tally.inputs)
        source = tally.source
    else:
        parsed = parse_test_output(text, code)
        if parsed.parsed:
            counts = (parsed.passed, parsed.failed, parsed.skipped, None)
            source = "regex"

    if result.timed_out:
        return make(TIMED_OUT, "timed out", counts, ids, source)
    if result.over_bound:
        cause = f"the run grew the worktree past its bound ({GROWTH_KEY})"
        return make(FAILED, cause, counts, (None, None), source)
    if streamed is not None and streamed.problem:
        stream_source = "pytest-stream" if plan.runner == "pytest" else source
        return make(FAILED, streamed.problem, counts, (None, None), stream_source)
    if streamed is not None and streamed.tampered:
        return make(TAMPERED, streamed.tampered, counts, (None, None), source)
    unchecked = streamed.unchecked if streamed is not None else None
    if tally is not None and tally.stream_counts is not None and unchecked is None:
        unchecked = _count_disagrees(tally.stream_counts, text, code, plan.command)
    if unchecked:
        return make(UNCHECKED, unchecked, counts, (None, None), source)
    not_run = _not_run_cause(plan.runner, code, text, tally)
    if not_run:
        return make(NOT_RUN, not_run, counts, ids, source)
    passed, failed, skipped, errors = counts
    bad = (failed or 0) + (errors or 0)
    if code == 0 and bad == 0:
        return make(PASSED, "all tests passed", counts, ids, source)
    if bad:
        noun = "test" if bad == 1 else "tests"
        return make(FAILED, f"{bad} {noun} failed", counts, ids, source)
    # A failing exit code and no failing test: a coverage threshold, a crash after the run, a
    # second command. Nothing names the culprit, so there are no ids to compare with.
    return make(
        FAILED, f"{exit_text(code)} with no failing test reported", counts, (None, ids[1]), source
    )


def not_graded(command: str, why: str) -> TestRun:
    """The run that could not be made: the start's tests could not be laid over a change."""
    return TestRun(command, command, NOT_RUN, why, *(None,) * 6, None, 0.0, "", "none")


def _count_disagrees(
    streamed: tuple[int, int, int], text: str, code: int | None, command: str
) -> str | None:
    """Why the stream's counts are not pytest's own summary line's, when a single pytest run
    printed one: a test the report left out, or one it named twice."""
    if len(PYTEST.findall(command)) != 1:
        return None
    summary = parse_test_output(text[-TAIL_CHARS:], code)
    if not summary.parsed:
        return None
    said = (summary.passed, summary.failed, summary.skipped)
    if said == streamed:
        return None
    return (
        f"pytest's summary counts {said[0]} passed, {said[1]} failed or errored, {said[2]} "
        f"skipped where its report names {streamed[0]}, {streamed[1]}, {streamed[2]}, so which "
        "tests ran cannot be told by id"
    )


def _not_run_cause(runner: str, code: int | None, text: str, tally: Tally | None) -> str | None:
    if code == 127:
        return "command not found"
    if code == 126:
        return "command cannot be executed"
    if tally is not None:
        if tally.collection_errors:
            return "collection error"
        if runner == "pytest" and code in _PYTEST_EXIT:
            return _PYTEST_EXIT[code]
        if not tally.tests_seen:
            if any("build failed]" in unit or "setup failed]" in unit for unit in tally.broken):
                return "build failed"
            return "no test could be loaded" if tally.broken else "no tests collected"
        return None
    # No structured results: the runner's own words, read near the end only, where runners put
    # their verdict (a failing test's captured output may quote anything).
    end = text[-TAIL_CHARS:]
    for pattern, cause in _NOT_RUN_TEXT:
        if pattern.search(end):
            return cause
    if runner == "pytest" and code in _PYTEST_EXIT:
        return _PYTEST_EXIT[code]
    if runner in ("go", "cargo", "jest") and code != 0:
        built = re.search(r"could not compile|\[build failed\]|\[setup failed\]", end)
        return "build failed" if built else f"{runner} stopped before any test ran"
    return None


def exit_text(code: int | None) -> str:
    return "no exit code" if code is None else f"exit code {code}"


def _inputs(value: Any) -> frozenset[tuple[str, str]] | None:
    if not isinstance(value, list):
        return None
    return frozenset(
        (str(item.get("how", "")), str(item.get("path", "")))
        for item in value
        if isinstance(item, dict)
    )


def _sorted_or_none(ids: frozenset[str] | None) -> list[str] | None:
    return None if ids is None else sorted(ids)

"""A run of the target's test suite and what it proved: outcome, counts, the ids of its tests,
and the gate that compares a run after a change with the run where the change started."""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from junitparser import Attr, Error, Failure, JUnitXml, JUnitXmlError, TestCase, TestSuite

from . import commands, diagnosis, worktree_files
from .jail import Jail
from .stack import (
    package_test_script_is_jest,
    parse_test_output,
    pytest_addopts,
    uncached_test_command,
)

PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not_run"  # collection or usage error, no tests collected, command not found
TIMED_OUT = "timed_out"

IDS_SHOWN = 10  # failing ids named in a reason before "and N more"
LINES_SHOWN = 8  # of a command's output, in a setup error; the whole output goes to the log
TAIL_CHARS = 3000
MAX_REPORT_BYTES = 200_000_000  # a JUnit or Jest report; a big suite's stays far below


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
            return f"NOT RUN: {self.cause} ({_exit_text(self.exit_code)})"
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
        )


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str
    removed: tuple[str, ...] = ()  # test ids let go by allow_test_removal


# --- the gate ---------------------------------------------------------------------------------

# What became of a test of the start that no longer passes.
FAILS_NOW = "failed or errored"
SKIPPED_NOW = "skipped or xfailed"
GONE = "not reported (deselected, not collected, renamed, or its parametrize id changed)"
# A failing id that names no test: a Go package that did not build, a crashed cargo binary, a
# Jest suite that did not load, a pytest collection error. Fixing it makes it go away.
_NOT_A_TEST = re.compile(r" \[[^\]]+\]$")


def regressions(baseline: TestRun, after: TestRun) -> set[str] | None:
    """Tests failing after a change that did not fail in the baseline, by id; None when either run
    has no ids (the caller then asks for a run that passes outright).

    A test the change added counts too: it did not fail before, and a change must not bring in a
    failing test any more than break a passing one.
    """
    usable = (PASSED, FAILED)
    if baseline.outcome not in usable or after.outcome not in usable:
        return None
    if baseline.failing_ids is None or after.failing_ids is None:
        return None
    return set(after.failing_ids - baseline.failing_ids)


def lost_tests(start: TestRun, after: TestRun) -> dict[str, str] | None:
    """The tests of `start` that `after` no longer has as it had them, each with what became of
    it: one that passed and does not pass now, one that failed and is neither failing nor
    passing now (a known-bad test deleted is no fix). None when either run names no passing
    tests."""
    if start.passing_ids is None or after.passing_ids is None:
        return None
    failing_now = after.failing_ids or frozenset()
    skipped_now = after.skipped_ids or frozenset()

    def fate(test_id: str) -> str:
        if test_id in failing_now:
            return FAILS_NOW
        return SKIPPED_NOW if test_id in skipped_now else GONE

    lost = {t: fate(t) for t in start.passing_ids - after.passing_ids}
    for test_id in (start.failing_ids or frozenset()) - after.passing_ids - failing_now:
        if not _NOT_A_TEST.search(test_id):
            lost[test_id] = fate(test_id)
    return lost


def acceptable(
    after: TestRun,
    baseline: TestRun | None,
    allow_failing_baseline: bool = False,
    allow_test_removal: bool = False,
) -> Verdict:
    """Whether a change whose test run is `after` may be kept; `baseline` is the run of the
    tree the change started from.

    The gate judges test identity: every test that passed at the start must pass after, by id
    (a test skipped, deselected, no longer collected or renamed counts as gone), and only
    `allow_test_removal` lets one go, named in the verdict. With a green start the run must
    also pass outright; with a failing one (allowed only by `allow_failing_baseline`) no test
    may fail that did not fail at the start. Without ids the counts are compared (fewer passing
    tests is never a pass), and a runner that gives neither is said to be unchecked. A run that
    did not get to its tests, or timed out, is never acceptable.
    """
    if after.outcome == TIMED_OUT:
        return Verdict(False, f"the test run timed out after {after.duration_s:.0f} s")
    if after.outcome == NOT_RUN:
        return Verdict(False, f"no test ran: {after.cause} ({_exit_text(after.exit_code)})")
    if after.outcome == PASSED:
        held = f"tests pass ({after.summary})"
    else:
        failing_before = (
            allow_failing_baseline and baseline is not None and baseline.outcome == FAILED
        )
        if not failing_before:
            return Verdict(False, f"tests fail: {_failure_detail(after)}")
        new = regressions(baseline, after)
        if new is None:
            return Verdict(
                False,
                f"tests fail ({_failure_detail(after)}) and the failing tests cannot be compared "
                "with the baseline's by id, so the suite must pass outright",
            )
        if new:
            return Verdict(False, f"tests that did not fail before fail now: {name_ids(new)}")
        still = len(after.failing_ids or ())
        held = f"no test fails that did not fail before ({still} still failing from the baseline)"
    if baseline is None:
        return Verdict(True, held)
    return _same_tests(after, baseline, held, allow_test_removal)


def _same_tests(after: TestRun, start: TestRun, held: str, allow_removal: bool) -> Verdict:
    """`held` (the run passes as it must) stands only if no test of `start` went missing."""
    lost = lost_tests(start, after)
    if lost:
        broken = any(fate == FAILS_NOW for fate in lost.values())
        if broken or not allow_removal:
            return Verdict(
                False,
                "tests that passed where the change started do not pass now: "
                + describe_lost(lost)
                + ("" if broken else "; removing a test needs allow_test_removal: true"),
            )
        removed = tuple(sorted(lost))
        return Verdict(
            True,
            f"{held}; {len(removed)} test(s) removed, allowed by allow_test_removal: "
            + describe_lost(lost),
            removed,
        )
    if lost is not None:
        return Verdict(True, held)
    if start.passing_ids is not None:
        # Whatever made this run stop naming its tests (a config that turns the report off)
        # also hides which of them are gone.
        return Verdict(
            False,
            f"this run names no tests where the run at the change's start named "
            f"{len(start.passing_ids)} passing, so whether they still pass cannot be checked",
        )
    before, now = start.passed, after.passed
    if before is not None and now is None:
        return Verdict(
            False,
            f"this run counts no tests where the run at the change's start counted {before} "
            "passing, so whether they still pass cannot be checked",
        )
    if before is not None and now is not None:
        if now < before:
            if not allow_removal:
                return Verdict(
                    False,
                    f"{now} tests pass where {before} passed at the change's start (the runner "
                    "names no tests, so which are gone cannot be said); removing a test needs "
                    "allow_test_removal: true",
                )
            return Verdict(
                True,
                f"{held}; {before - now} fewer passing tests than at the change's start, "
                "allowed by allow_test_removal (the runner names no tests)",
            )
        return Verdict(True, f"{held}; compared by count only: the runner names no tests")
    return Verdict(
        True,
        f"{held}, unchecked: the runner gives no test ids or counts, so a test skipped or "
        "removed would go unseen",
    )


def describe_lost(lost: dict[str, str]) -> str:
    """The lost tests grouped by what became of them, each group capped as name_ids caps."""
    groups: dict[str, set[str]] = {}
    for test_id, fate in lost.items():
        groups.setdefault(fate, set()).add(test_id)
    order = (FAILS_NOW, SKIPPED_NOW, GONE)
    return "; ".join(f"{fate}: {name_ids(groups[fate])}" for fate in order if fate in groups)


def name_ids(ids: set[str] | frozenset[str]) -> str:
    """At most IDS_SHOWN ids, sorted, then "and N more"."""
    shown = sorted(ids)[:IDS_SHOWN]
    text = ", ".join(shown)
    if len(ids) > IDS_SHOWN:
        text += f" and {len(ids) - IDS_SHOWN} more"
    return text


def _failure_detail(run: TestRun) -> str:
    if run.failing_ids:
        return name_ids(run.failing_ids)
    return f"{_exit_text(run.exit_code)}: {run.cause}"


def tests_word(decision: dict[str, Any], baseline: dict[str, Any]) -> str:
    """How `done` says a decision's tests went: pass or FAIL, and when what fails is only
    what already failed at the base (`baseline`, setup's record), that it is."""
    if decision.get("tests_pass"):
        return "pass"
    failing = set((decision.get("tests") or {}).get("failing_ids") or ())
    before = set(baseline.get("failing_ids") or ())
    if decision.get("broken") or not failing or not failing <= before:
        return "FAIL"
    n = len(failing)
    if failing == before:
        return f"FAIL (the same {n} test{'s' if n != 1 else ''} as at the base)"
    return f"FAIL ({n} of the {len(before)} tests that failed at the base; no other)"


# --- setup ------------------------------------------------------------------------------------


def check_baseline(
    run: TestRun,
    repo: Path,
    *,
    allow_failing_baseline: bool = False,
    origin: str = "the spec",
    jailed: bool = False,
    full_log: str | None = None,
) -> str | None:
    """The error that stops setup, or None when this baseline can be compared against.

    `origin` names the file the user should edit (the spec file that set test_command). The
    message is one line naming the key, then the command's last lines and `full_log`, where
    the whole output is. `jailed`: the command ran in a bwrap jail (a program the host has
    may be hidden from it).
    """
    head: str | None = None
    if run.outcome == NOT_RUN:
        fix = likely_fix(run, repo, jailed=jailed)
        head = (
            f"{origin}: key 'test_command': `{run.command}` ran no tests: {run.cause} "
            f"({_exit_text(run.exit_code)})" + (f"; likely fix: {fix}" if fix else "")
        )
    elif run.outcome == TIMED_OUT:
        head = (
            f"{origin}: key 'test_timeout_s': `{run.command}` did not finish in "
            f"{run.duration_s:.0f} s; raise test_timeout_s or run fewer tests"
        )
    elif run.outcome == FAILED and run.failing_ids is None and run.failed == 0 and not run.errors:
        # Nothing failed that names a test: what broke is the run itself, not a test.
        head = (
            f"{origin}: key 'test_command': `{run.command}` {_exit_text(run.exit_code)} "
            "although no test failed (a crash after the tests, a coverage threshold, a second "
            "command that failed), so whether a change breaks a test could not be told; make "
            "the command exit 0 when its tests pass"
        )
    elif run.outcome == FAILED and not allow_failing_baseline:
        head = (
            f"{origin}: key 'allow_failing_baseline' is false and the tests already fail "
            f"before any change ({_failure_detail(run)}); fix them first, or drop the key (by "
            "default a test failing at the base may stay failing, and no other test may fail)"
        )
    elif run.outcome == FAILED and stops_at_first_failure(run.command, repo):
        head = (
            f"{origin}: key 'test_command': the tests already fail and `{run.command}` stops at "
            "the first failure, so a test broken later in the run would go unseen; drop the "
            "stop-early option (-x, --maxfail, -failfast, --bail)"
        )
    elif run.outcome == FAILED and run.failing_ids is None:
        head = (
            f"{origin}: key 'test_command': the tests already fail and the failing tests cannot "
            f"be told apart ({run.source} gives no test ids), so no change could ever be kept; "
            "fix the failing tests first"
        )
    if head is None:
        return None
    if run.ran != run.command:
        head += f"\nran: {run.ran}"
    shown = _last_lines(run.tail, LINES_SHOWN)
    head += "\nlast lines:\n" + (_indent(shown) if shown.strip() else "    (no output)")
    return head + (f"\nthe whole output: {full_log}" if full_log else "")


_PYTEST_STOPS = re.compile(
    r"(?<!\S)(?:-[qvsl]*x[qvsl]*|--exitfirst|--maxfail(?:=|\s+)[1-9]\d*|--sw|--stepwise)(?!\S)"
)
_OTHER_STOPS = re.compile(r"(?<!\S)(?:-failfast|--bail(?:=\S+)?)(?!\S)")  # go test, jest


def stops_at_first_failure(command: str, repo: Path) -> bool:
    """Whether the test command (or pytest's addopts) stops the run at a failure, which hides
    the tests after it: harmless with a green baseline, fatal to comparing failing tests."""
    if _PYTEST.search(command):
        return bool(
            _PYTEST_STOPS.search(command) or _PYTEST_STOPS.search(pytest_addopts(Path(repo)))
        )
    return _OTHER_STOPS.search(command) is not None


def describe_baseline(run: TestRun) -> str:
    """The baseline line for the console, session.md and `status`."""
    if run.outcome == FAILED:
        count = len(run.failing_ids) if run.failing_ids is not None else run.failed
        ids = f": {name_ids(run.failing_ids)}" if run.failing_ids else ""
        return (
            f"warning: baseline FAILS ({run.summary}); going on: {count} failing test(s) may "
            f"stay failing, no other test may fail (listed in session.md){ids}"
        )
    return f"baseline: {run.summary}"


def likely_fix(run: TestRun, repo: Path, *, jailed: bool = False) -> str | None:
    """A hint for a run that never got to its tests, read from its error output."""
    fix = diagnosis.likely_fix(run.command, run.tail, run.exit_code, repo, jailed=jailed)
    if fix is None and run.cause == "no tests collected":
        return "point test_command (or the runner's config) at the folder that holds the tests"
    return fix


# --- running ----------------------------------------------------------------------------------


def measure_baseline(
    command: str,
    repo: Path,
    *,
    stack: str | None,
    timeout_s: float,
    secrets: list[str] | None = None,
    allow_failing_baseline: bool = False,
    origin: str = "the spec",
    jail: Jail | None = None,
    full_log: str | None = None,
) -> tuple[TestRun, str | None]:
    """Setup's test run: the uncached command, once, and the error that stops setup (or None).

    Running the uncached command here is also its check: evaluate runs the same command, so one
    that cannot run (a flag the target's pytest rejects) stops setup as a spec error.
    """
    run = run_tests(
        command, repo, stack=stack, timeout_s=timeout_s, secrets=secrets, uncached=True, jail=jail
    )
    error = check_baseline(
        run,
        repo,
        allow_failing_baseline=allow_failing_baseline,
        origin=origin,
        jailed=jail is not None and jail.mode == "bwrap",
        full_log=full_log,
    )
    return run, error


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
) -> TestRun:
    """Run the test command in `cwd` and read what it proved.

    `stack` is the detected stack's name (it decides how `npm test` is treated). With `uncached`
    the tool's cache is defeated first (`stack.uncached_test_command`). Flags for structured output
    are added where the runner has them (pytest `--junitxml`, `go test -json`, cargo's
    `--no-fail-fast` so every test binary runs, jest `--json --outputFile`); the result files go
    to a fresh folder under `results_dir` (default: the system temp folder), outside the worktree.
    A command jail must let the command write there.
    """
    cwd = Path(cwd)
    base = uncached_test_command(stack, command, cwd) if uncached else command
    parent = None if results_dir is None else str(results_dir)
    with tempfile.TemporaryDirectory(prefix="autoresearch-tests-", dir=parent) as folder:
        plan = instrument(base, cwd, stack, Path(folder))
        started = time.time()
        # The jail lets the command write `folder`, at this same path, for the reports.
        inside = jail.allowing(Path(folder)) if jail is not None else None
        result = commands.run(
            plan.command, cwd, timeout_s=timeout_s, extra_secrets=secrets, jail=inside
        )
        tally = _read(plan, result, cwd, started)
        if tally is None and _rejects_our_flags(plan, result):
            # The target's setup refused a flag we added (a plugin turned off, say): run the
            # command as given and make do with its text.
            plan = _Plan(base, plan.runner, (), (), ())
            result = commands.run(base, cwd, timeout_s=timeout_s, extra_secrets=secrets, jail=jail)
            tally = None
        return judge(command, plan, result, tally, cwd)


@dataclass(frozen=True)
class _Plan:
    command: str  # what will run
    runner: str  # pytest | go | cargo | jest | other
    added: tuple[str, ...]  # the flags we added, to recognise a refusal
    files: tuple[Path, ...]  # structured output we asked for
    theirs: tuple[Path, ...]  # structured output the command asks for itself (pytest)


_CMD_START = r"(?<![\w./-])"
_PYTEST = re.compile(_CMD_START + r"((?:python[\d.]*\s+-m\s+)?(?:[\w./-]*/)?py\.?test)(?=\s|$)")
_OWN_JUNIT = re.compile(r"--junit-?xml(?:=|\s+)(\S+)")
_GO_CMD = re.compile(_CMD_START + r"(go\s+test)(?=\s|$)")
_CARGO_CMD = re.compile(_CMD_START + r"(cargo\s+(?:\+\S+\s+)?test)(?=\s|$)")
_JEST = re.compile(_CMD_START + r"((?:[\w./-]*/)?jest)(?=\s|$)")
_NPM_TEST = re.compile(r"^\s*(npm\s+(?:run\s+)?test|yarn\s+test|pnpm\s+(?:run\s+)?test)\b")


def instrument(command: str, cwd: Path, stack_name: str | None, folder: Path) -> _Plan:
    """The command with structured-output flags for its runner, and where that output will be.

    Flags go right after the runner's name (every occurrence), so `pytest -q && echo ok` still
    hands them to pytest. Our `--junitxml` on the command line beats one in the target's `addopts`.
    """
    if _PYTEST.search(command):
        if "no:junitxml" in command:
            return _Plan(command, "pytest", (), (), ())
        files: list[Path] = []

        def add_junit(match: re.Match[str]) -> str:
            path = folder / f"junit-{len(files)}.xml"
            files.append(path)
            flags = f"--junitxml={shlex.quote(str(path))} -o junit_family=xunit1"
            return f"{match.group(1)} {flags}"

        ran = _PYTEST.sub(add_junit, command)
        theirs = tuple(cwd / Path(p).expanduser() for p in _OWN_JUNIT.findall(command))
        return _Plan(ran, "pytest", ("--junitxml", "junit_family"), tuple(files), theirs)
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
            path = folder / f"jest-{len(files)}.json"
            files.append(path)
            return f"{match.group(1)} {jest_flags.format(shlex.quote(str(path)))}"

        ran = _JEST.sub(add_json, command)
        return _Plan(ran, "jest", ("--json", "--outputFile"), tuple(files), ())
    npm = _NPM_TEST.match(command)
    rest = command[npm.end() :].strip() if npm else None
    if rest in ("", "-- --no-cache") and stack_name == "Node/TS":
        if package_test_script_is_jest(cwd):
            path = folder / "jest-0.json"
            flags = jest_flags.format(shlex.quote(str(path)))
            ran = command.rstrip() + (f" {flags}" if rest else f" -- {flags}")
            return _Plan(ran, "jest", ("--json", "--outputFile"), (path,), ())
    return _Plan(command, "other", (), (), ())


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


# --- reading the results ----------------------------------------------------------------------


@dataclass
class _Tally:
    """Test ids by what happened to them in one run."""

    source: str
    passed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    errored: set[str] = field(default_factory=set)  # errors in setup or teardown
    skipped: set[str] = field(default_factory=set)
    # What failed without being a test: a Go package that did not build, a cargo test binary that
    # crashed, a Jest suite that did not load. Counted and compared as errored tests.
    broken: set[str] = field(default_factory=set)
    collection_errors: int = 0
    ids_complete: bool = True  # False when a failure was counted but not named
    text: str | None = None  # readable output when the raw output is machine-readable

    def settle(self) -> None:
        # One id, one fate: a test that passed its call and then errored in teardown failed.
        self.errored -= self.failed
        self.errored |= self.broken
        bad = self.failed | self.errored
        self.skipped -= bad
        self.passed -= bad | self.skipped

    @property
    def tests_seen(self) -> bool:
        return bool(self.passed or self.failed or self.skipped or (self.errored - self.broken))


def _read(plan: _Plan, result: commands.CommandResult, cwd: Path, started: float) -> _Tally | None:
    # The command may write where its reports go: each is read by the worktree reader's rules
    # (a link it left there to a file outside, or a FIFO, is not read).
    ours = [_report(p, p.parent) for p in plan.files]
    if plan.runner == "pytest":
        theirs = [_report(p, cwd) for p in plan.theirs if _written_since(p, started)]
        return read_junit([data for data in ours + theirs if data is not None])
    if plan.runner == "go":
        return read_go_json(result.output)
    if plan.runner == "cargo":
        return read_cargo(result.output)
    if plan.runner == "jest":
        return read_jest_json([data for data in ours if data is not None], cwd)
    return None


def _report(path: Path, root: Path) -> bytes | None:
    """A report file under `root`, through the worktree reader; None when absent or refused."""
    try:
        rel = os.path.relpath(path, root)
        return worktree_files.read_bytes(root, rel, max_bytes=MAX_REPORT_BYTES)
    except (worktree_files.Refused, ValueError):
        return None


def _written_since(path: Path, started: float) -> bool:
    try:
        return path.stat().st_mtime >= started - 1
    except OSError:
        return False


class _PytestCase(TestCase):
    """pytest's xunit1 test case also names the file the test is in."""

    file = Attr()


def read_junit(paths: list[Path] | list[bytes]) -> _Tally | None:
    """pytest's JUnit XML files (or their contents); ids as pytest's node ids
    (`tests/test_x.py::TestK::test_y[1]`)."""
    tally = _Tally("junit")
    read_any = False
    for path in paths:
        try:
            if isinstance(path, bytes):
                xml = JUnitXml.fromstring(path)
            else:
                xml = JUnitXml.fromfile(str(path))
        except (JUnitXmlError, SyntaxError, OSError, ValueError):
            continue  # killed mid-write, or not ours: the text fallback still has the summary
        read_any = True
        suites = [xml] if isinstance(xml, TestSuite) else list(xml)
        for suite in suites:
            for case in suite.iterchildren(_PytestCase):
                _tally_case(tally, case)
    if not read_any:
        return None
    tally.settle()
    return tally


def _tally_case(tally: _Tally, case: _PytestCase) -> None:
    results = case.result  # each property of TestCase walks the children again: read them once
    if any(isinstance(r, Error) and r.message == "collection failure" for r in results):
        tally.collection_errors += 1
        tally.errored.add(f"{case.file or case.name} [collection error]")
        return
    test_id = _pytest_id(case)
    if any(isinstance(r, Failure) for r in results):
        tally.failed.add(test_id)
    elif any(isinstance(r, Error) for r in results):
        tally.errored.add(test_id)
    elif results:  # only Skipped is left
        tally.skipped.add(test_id)
    else:
        tally.passed.add(test_id)


def _pytest_id(case: _PytestCase) -> str:
    classname, name, file = case.classname or "", case.name or "", case.file
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else None
    if module and classname.startswith(module + "."):
        return "::".join([file, *classname[len(module) + 1 :].split("."), name])
    return f"{file}::{name}"


def read_go_json(output: str) -> _Tally | None:
    """`go test -json` events; ids are `package::Test/subtest`, a package that failed without a
    failing test (build failure, panic in TestMain) is `package [build failed]` or
    `package [package failed]`."""
    tally = _Tally("go-json")
    text: list[str] = []
    failed_packages: dict[str, str] = {}
    failing_packages: set[str] = set()
    events = 0
    for line in output.splitlines():
        event = _json_object(line) if line.startswith("{") else None
        if event is None or "Action" not in event:
            text.append(line)
            build = _GO_BUILD_FAILED.match(line)
            if build:
                failed_packages[build.group(1)] = f"[{build.group(2)} failed]"
            continue
        events += 1
        action, package, test = event["Action"], event.get("Package", ""), event.get("Test")
        if action in ("output", "build-output"):  # go 1.24+ reports compile errors as events
            text.append(str(event.get("Output", "")).rstrip("\n"))
        elif test and action in ("pass", "fail", "skip"):
            test_id = f"{package}::{test}"
            {"pass": tally.passed, "fail": tally.failed, "skip": tally.skipped}[action].add(test_id)
            if action == "fail":
                failing_packages.add(package)
        elif action == "fail" and package:
            failed_packages.setdefault(
                package, "[build failed]" if event.get("FailedBuild") else "[package failed]"
            )
    if not events and not failed_packages:
        return None
    for package, how in failed_packages.items():
        if package not in failing_packages:
            tally.broken.add(f"{package} {how}")
    tally.text = "\n".join(text)
    tally.settle()
    return tally


_GO_BUILD_FAILED = re.compile(r"^FAIL\s+(\S+)\s+\[(build|setup) failed\]")


def _json_object(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_CARGO_RUNNING = re.compile(r"^\s*Running (?:unittests )?(\S+)(?: \((.+)\))?\s*$")
_CARGO_DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)\s*$")
_CARGO_LINE = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)\b")
_CARGO_RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
_CARGO_LISTED = re.compile(r"^    (\S.*?)\s*$")
_DOCTEST_LINE = re.compile(r" \(line \d+\)$")


def read_cargo(output: str) -> _Tally | None:
    """`cargo test`'s `test name ... ok|FAILED|ignored` lines, one section per test binary; ids are
    `<binary> <source>::<test>`. A binary that stops without its result line (a crash) fails as
    `<binary> <source> [crashed]`."""
    tally = _Tally("cargo")
    label: str | None = None
    has_result = True
    named_failures = 0
    listing = False
    sections = 0

    def close() -> None:
        if label is not None and not has_result:
            tally.broken.add(f"{label} [crashed]")

    for line in _ANSI.sub("", output).splitlines():
        running, doc = _CARGO_RUNNING.match(line), _CARGO_DOCTESTS.match(line)
        if running or doc:
            close()
            sections += 1
            label = f"doc-tests {doc.group(1)}" if doc else _cargo_binary(*running.groups())
            has_result, named_failures, listing = False, 0, False
            continue
        if label is None:
            continue
        if line == "failures:":
            listing = True
            continue
        listed = _CARGO_LISTED.match(line) if listing else None
        if listed and not listed.group(1).startswith("----"):
            test_id = _cargo_id(label, listed.group(1))
            if test_id not in tally.failed:
                tally.failed.add(test_id)
                named_failures += 1
            continue
        listing = False
        result = _CARGO_RESULT.match(line)
        if result:
            has_result = True
            if int(result.group(2)) > named_failures:
                tally.ids_complete = False  # failures the output did not name
            continue
        test = _CARGO_LINE.match(line)
        if test:
            test_id = _cargo_id(label, test.group(1))
            if test.group(2) == "FAILED":
                if test_id not in tally.failed:
                    tally.failed.add(test_id)
                    named_failures += 1
            else:
                (tally.passed if test.group(2) == "ok" else tally.skipped).add(test_id)
    close()
    if not sections:
        return None
    tally.settle()
    return tally


def _cargo_binary(source: str, executable: str | None) -> str:
    if executable is None:  # older cargo names only the executable
        return re.sub(r"-[0-9a-f]{16}$", "", Path(source).name)
    return f"{re.sub(r'-[0-9a-f]{16}$', '', Path(executable).name)} {source}"


def _cargo_id(label: str, test: str) -> str:
    # A doc-test's name carries its line number, which moves whenever code above it does.
    return f"{label}::{_DOCTEST_LINE.sub('', test)}"


def read_jest_json(paths: list[Path] | list[bytes], cwd: Path) -> _Tally | None:
    """Jest's `--json` report (files or their contents); ids are `file > describe > test`, a
    suite that failed to load is `file [suite failed to run]`."""
    tally = _Tally("jest-json")
    read_any = False
    for path in paths:
        try:
            report = json.loads(path if isinstance(path, bytes) else path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(report, dict):
            continue
        read_any = True
        for suite in report.get("testResults") or []:
            name = str(suite.get("name", ""))
            file = os.path.relpath(name, cwd) if os.path.isabs(name) else name
            assertions = suite.get("assertionResults") or []
            if suite.get("status") == "failed" and not assertions:
                tally.broken.add(f"{file} [suite failed to run]")
            for test in assertions:
                test_id = " > ".join([file, *test.get("ancestorTitles", []), test.get("title", "")])
                status = test.get("status")
                if status == "passed":
                    tally.passed.add(test_id)
                elif status == "failed":
                    tally.failed.add(test_id)
                else:  # pending, skipped, todo, disabled
                    tally.skipped.add(test_id)
    if not read_any:
        return None
    tally.settle()
    return tally


# --- judging ----------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

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
    tally: _Tally | None,
    cwd: Path,
) -> TestRun:
    """The TestRun for a finished command: outcome and cause from the exit code, the structured
    results and the output's own words."""
    text = tally.text if tally is not None and tally.text is not None else result.output
    text = _ANSI.sub("", text).replace("\r\n", "\n")
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
        )

    counts: tuple = (None, None, None, None)
    ids: tuple = (None, None)
    skipped_ids: frozenset[str] | None = None
    source = "exit-code-only"
    if tally is not None:
        counts = (len(tally.passed), len(tally.failed), len(tally.skipped), len(tally.errored))
        failing = frozenset(tally.failed | tally.errored)
        ids = (failing if tally.ids_complete else None, frozenset(tally.passed))
        skipped_ids = frozenset(tally.skipped)
        source = tally.source
    else:
        parsed = parse_test_output(text, code)
        if parsed.parsed:
            counts = (parsed.passed, parsed.failed, parsed.skipped, None)
            source = "regex"

    if result.timed_out:
        return make(TIMED_OUT, "timed out", counts, ids, source)
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
        FAILED, f"{_exit_text(code)} with no failing test reported", counts, (None, ids[1]), source
    )


def _not_run_cause(runner: str, code: int | None, text: str, tally: _Tally | None) -> str | None:
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


# --- small helpers ----------------------------------------------------------------------------


def _exit_text(code: int | None) -> str:
    return "no exit code" if code is None else f"exit code {code}"


def _sorted_or_none(ids: frozenset[str] | None) -> list[str] | None:
    return None if ids is None else sorted(ids)


def _last_lines(text: str, count: int) -> str:
    lines = [line for line in text.rstrip().splitlines()]
    return "\n".join(lines[-count:])


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())

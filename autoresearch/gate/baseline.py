"""Setup's test run: the suite where a session starts, and whether later runs can be
compared with it (a spec error naming the key when not, with the likely fix)."""

from __future__ import annotations

import re
from pathlib import Path

from autoresearch.gate import diagnosis
from autoresearch.gate.testrun import (
    FAILED,
    NOT_RUN,
    PYTEST,
    TAMPERED,
    TIMED_OUT,
    UNCHECKED,
    TestRun,
    exit_text,
    run_tests,
)
from autoresearch.gate.verdict import failure_detail, name_ids
from autoresearch.safety.jail import Jail
from autoresearch.session.stack import pytest_addopts

LINES_SHOWN = 8  # of a command's output, in a setup error; the whole output goes to the log


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
            f"({exit_text(run.exit_code)})" + (f"; likely fix: {fix}" if fix else "")
        )
    elif run.outcome in (TAMPERED, UNCHECKED):
        # The start is what every change is held to: one whose report cannot be trusted
        # (the target's own code rewrites outcomes, or ids and counts disagree) holds nothing.
        head = (
            f"{origin}: key 'test_command': `{run.command}` gave a report that cannot be "
            f"trusted ({run.outcome}): {run.cause}"
        )
    elif run.outcome == TIMED_OUT:
        head = (
            f"{origin}: key 'test_timeout_s': `{run.command}` did not finish in "
            f"{run.duration_s:.0f} s; raise test_timeout_s or run fewer tests"
        )
    elif run.outcome == FAILED and run.failing_ids is None and run.failed == 0 and not run.errors:
        # Nothing failed that names a test: what broke is the run itself, not a test.
        head = (
            f"{origin}: key 'test_command': `{run.command}` {exit_text(run.exit_code)} "
            "although no test failed (a crash after the tests, a coverage threshold, a second "
            "command that failed), so whether a change breaks a test could not be told; make "
            "the command exit 0 when its tests pass"
        )
    elif run.outcome == FAILED and not allow_failing_baseline:
        head = (
            f"{origin}: key 'allow_failing_baseline' is false and the tests already fail "
            f"before any change ({failure_detail(run)}); fix them first, or drop the key (by "
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
    if PYTEST.search(command):
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


def no_tests() -> TestRun:
    """The baseline of a session with no test command (a mode whose tests are optional)."""
    return TestRun("", "", NOT_RUN, "no test command", *(None,) * 6, None, 0.0, "", "none")


def _last_lines(text: str, count: int) -> str:
    lines = [line for line in text.rstrip().splitlines()]
    return "\n".join(lines[-count:])


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())

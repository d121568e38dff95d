"""Setup's test run: the suite where a session starts, and whether later runs can be
compared with it (a spec error naming the key when not, with the likely fix)."""

from __future__ import annotations

import re
from pathlib import Path

from .jail import Jail
from .stack import pytest_addopts
from .testrun import FAILED, NOT_RUN, PYTEST, TIMED_OUT, TestRun, exit_text, run_tests
from .verdict import failure_detail, name_ids


def check_baseline(
    run: TestRun,
    repo: Path,
    *,
    allow_failing_baseline: bool = False,
    origin: str = "the spec",
) -> str | None:
    """The error that stops setup, or None when this baseline can be compared against.

    `origin` names the file the user should edit (the spec file that set test_command). The
    message is one line naming the key, then the command's last lines.
    """
    head: str | None = None
    if run.outcome == NOT_RUN:
        fix = likely_fix(run, repo)
        head = (
            f"{origin}: key 'test_command': `{run.command}` ran no tests: {run.cause} "
            f"({exit_text(run.exit_code)})" + (f"; likely fix: {fix}" if fix else "")
        )
    elif run.outcome == TIMED_OUT:
        head = (
            f"{origin}: key 'test_timeout_s': `{run.command}` did not finish in "
            f"{run.duration_s:.0f} s; raise test_timeout_s or run fewer tests"
        )
    elif run.outcome == FAILED and not allow_failing_baseline:
        head = (
            f"{origin}: key 'allow_failing_baseline': the tests already fail before any change "
            f"({failure_detail(run)}); fix them first, or set allow_failing_baseline: true to "
            "keep only changes that break no test that passed"
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
    return head + "\nlast lines:\n" + _indent(_last_lines(run.tail, 15))


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
            f"baseline FAILS ({run.summary}); allowed by allow_failing_baseline, "
            f"{count} failing test(s) may stay failing{ids}"
        )
    return f"baseline: {run.summary}"


_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?([\w.]+)'?")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)")
_NOT_FOUND = re.compile(r"ERROR: file or directory not found: (\S+)")


def likely_fix(run: TestRun, repo: Path) -> str | None:
    """A hint for a run that never got to its tests, read from its error output."""
    repo = Path(repo)
    text = run.tail
    missing = _NO_MODULE.search(text)
    if missing:
        top = missing.group(1).split(".")[0]
        at_root = (repo / top).is_dir() or (repo / f"{top}.py").is_file()
        in_src = (repo / "src" / top).is_dir() or (repo / "src" / f"{top}.py").is_file()
        if at_root and not _runs_python_m_pytest(run.command):
            return (
                f"use `python -m pytest` (module '{top}' is at the repository root; plain "
                "`pytest` does not put the root on sys.path, so a tests/ folder cannot import it)"
            )
        if in_src:
            return (
                f"module '{top}' is under src/: use `PYTHONPATH=src python -m pytest`, set "
                '`pythonpath = ["src"]` in the pytest config, or install the package first'
            )
        if not at_root:
            return f"install the target's dependencies (module '{top}' is not in the repository)"
    absent = _NOT_FOUND.search(text)
    if absent:
        return f"{absent.group(1)} does not exist: fix the path in test_command"
    rejected = _UNRECOGNIZED.search(text)
    if rejected:
        return f"pytest rejected {rejected.group(1).strip()}: check the options in test_command"
    if run.exit_code == 127:
        return "install the test runner or set test_command to one that exists"
    if run.cause == "no tests collected":
        return "point test_command (or the runner's config) at the folder that holds the tests"
    return None


def _runs_python_m_pytest(command: str) -> bool:
    return re.search(r"python[\d.]*\s+-m\s+pytest\b", command) is not None


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
) -> tuple[TestRun, str | None]:
    """Setup's test run: the uncached command, once, and the error that stops setup (or None).

    Running the uncached command here is also its check: evaluate runs the same command, so one
    that cannot run (a flag the target's pytest rejects) stops setup as a spec error.
    """
    run = run_tests(
        command, repo, stack=stack, timeout_s=timeout_s, secrets=secrets, uncached=True, jail=jail
    )
    error = check_baseline(run, repo, allow_failing_baseline=allow_failing_baseline, origin=origin)
    return run, error


def _last_lines(text: str, count: int) -> str:
    lines = [line for line in text.rstrip().splitlines()]
    return "\n".join(lines[-count:])


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())

"""The test run's report comes through a channel the tested process cannot rewrite: the harness's
pytest plugin streams each outcome through a pipe the harness holds; two canary tests of the
harness's, named afresh for each run, catch outcomes rewritten wholesale; ids are pytest's node
ids, and a count that disagrees with them is no pass.

Each attack is code under test (a broken `mean`) that tries to make its run read as a pass.
Runs real pytest on temp projects, unjailed and in the bwrap jail where it works.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import CALC, PATCH_REPORTS, make_repo

from autoresearch.gate import testrun
from autoresearch.gate.testrun import FAILED, PASSED, TAMPERED, UNCHECKED, TestRun
from autoresearch.gate.verdict import acceptable, lost_tests
from autoresearch.safety import jail

PYTEST = f"{sys.executable} -m pytest"
BROKEN = CALC.replace("/ len", "/ 2 / len")
TESTS = """\
from calc import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2
"""

# An atexit handler rewrites the JUnit report the command was told to write, and exits 0.
ATEXIT_JUNIT = """
import atexit, os, sys

def _rewrite():
    for arg in sys.argv:
        if arg.startswith("--junitxml="):
            path = arg.split("=", 1)[1]
            case = '<testcase classname="tests.test_calc" name="%s" file="tests/test_calc.py"/>'
            with open(path, "w") as f:
                f.write('<testsuites><testsuite name="pytest" tests="2">'
                        + case % "test_add" + case % "test_mean" + '</testsuite></testsuites>')
    os._exit(0)

atexit.register(_rewrite)
"""


# A sitecustomize.py on the path does the same before pytest starts.
SITECUSTOMIZE = """
from _pytest import reports

_init = reports.TestReport.__init__

def _passing(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.outcome = "passed"
    self.longrepr = None

reports.TestReport.__init__ = _passing
"""


# Code under test keeps a copy of every pipe it holds (the report's among them) and writes a
# second report into each at exit.
SECOND_REPORT = """
import atexit, json, os
_copies = []
for _fd in os.listdir("/proc/self/fd"):
    try:
        if int(_fd) > 2 and os.readlink(f"/proc/self/fd/{_fd}").startswith("pipe:"):
            _copies.append(os.dup(int(_fd)))
    except OSError:
        pass

def _forge():
    lines = [{"t": "start"}, {"t": "report", "id": "tests/test_calc.py::test_mean",
             "when": "call", "outcome": "passed", "xfail": False}, {"t": "end", "exitstatus": 0}]
    for fd in _copies:
        try:
            os.write(fd, "".join(json.dumps(x) + "\\n" for x in lines).encode())
        except OSError:
            pass

atexit.register(_forge)
"""


def project(tmp_path: Path, calc: str = BROKEN, **extra: str) -> Path:
    return make_repo(tmp_path / "target", {"calc.py": calc, "tests/test_calc.py": TESTS, **extra})


def run(command: str, repo: Path, **options) -> TestRun:
    return testrun.run_tests(command, repo, stack="Python", timeout_s=300, **options)


def start(repo: Path) -> TestRun:
    """The run at the change's start: both tests pass (calc as it was)."""
    good = make_repo(repo.parent / "start", {"calc.py": CALC, "tests/test_calc.py": TESTS})
    run_ = run(PYTEST, good)
    assert run_.ok and run_.passing_ids == {
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::test_mean",
    }
    return run_


JAILS = [
    "none",
    pytest.param("bwrap", marks=pytest.mark.skipif(not jail.probe().works, reason="no bwrap")),
]


def jail_of(kind: str, repo: Path) -> jail.Jail | None:
    return jail.build_jail({"sandbox": "bwrap"}, repo) if kind == "bwrap" else None


@pytest.mark.parametrize("kind", JAILS)
def test_an_atexit_handler_that_rewrites_the_junit_report_does_not_make_a_pass(tmp_path, kind):
    repo = project(tmp_path, calc=BROKEN + ATEXIT_JUNIT)
    after = run(f"{PYTEST} --junitxml=report.xml", repo, jail=jail_of(kind, repo))
    assert after.outcome == FAILED
    assert "tests/test_calc.py::test_mean" in after.failing_ids
    assert not acceptable(after, start(repo)).ok


@pytest.mark.parametrize("kind", JAILS)
def test_code_that_patches_pytests_report_class_is_a_tampered_run(tmp_path, kind):
    repo = project(tmp_path, calc=BROKEN + PATCH_REPORTS)
    after = run(PYTEST, repo, jail=jail_of(kind, repo))
    assert after.outcome == TAMPERED
    assert "canary" in after.cause
    verdict = acceptable(after, start(repo))
    assert not verdict.ok and "canary" in verdict.reason


def test_a_sitecustomize_on_the_path_that_rewrites_outcomes_is_a_tampered_run(tmp_path):
    repo = project(tmp_path, **{"site/sitecustomize.py": SITECUSTOMIZE})
    after = run(f"PYTHONPATH=site {PYTEST}", repo)
    assert after.outcome == TAMPERED
    assert not acceptable(after, start(repo)).ok


def test_a_second_report_written_after_the_run_is_a_failed_run(tmp_path):
    repo = project(tmp_path, calc=BROKEN + SECOND_REPORT)
    after = run(PYTEST, repo)
    assert (after.outcome, after.failing_ids) == (FAILED, None)
    assert "second test report" in after.cause
    assert not acceptable(after, start(repo)).ok


# A child forked while the tests import calc writes a whole report of its own into every pipe
# it inherited: {wait} first. tests/e2e/test_heldout_attacks.py's attack waits for the run's
# end; a fixed sleep there wrote while a slow pytest still ran, and named another layer.
CHILD_REPORT = """
import json as _json
import os as _os
import select as _select

_child = _os.fork()
if _child == 0:
{wait}
    _lines = [{{"t": "start"}}, {{"t": "report", "id": "tests/test_calc.py::test_mean",
              "when": "call", "outcome": "passed", "xfail": False}},
              {{"t": "end", "exitstatus": 0}}]
    for _fd in range(3, 64):
        try:
            _os.write(_fd, "".join(_json.dumps(x) + "\\n" for x in _lines).encode())
        except OSError:
            pass
    _os._exit(0)
{parent}
"""
# The end of the first process of the child's process namespace: the jail's, which ends with
# the command (outside a jail: the machine's, which does not end).
AFTER_THE_RUN = """\
    try:
        _first = _select.poll()
        _first.register(_os.pidfd_open(1), _select.POLLIN)
        _first.poll()
    except OSError:
        pass"""


@pytest.mark.parametrize("kind", JAILS)
def test_a_child_waiting_for_the_runs_end_gets_no_report_in_and_the_failure_stands(tmp_path, kind):
    child = CHILD_REPORT.format(wait=AFTER_THE_RUN, parent="")
    repo = project(tmp_path, calc=BROKEN + child)
    after = run(PYTEST, repo, jail=jail_of(kind, repo))
    assert (after.outcome, after.failing_ids) == (FAILED, {"tests/test_calc.py::test_mean"})
    verdict = acceptable(after, start(repo))
    assert not verdict.ok and "tests/test_calc.py::test_mean" in verdict.reason


def test_a_child_report_written_while_pytest_runs_is_a_second_report(tmp_path):
    # What a fixed sleep in the child came to where pytest outlasted it: the write is forced
    # before pytest goes on (it waits for the child), and the run's own failure is not named.
    child = CHILD_REPORT.format(wait="    pass", parent="else:\n    _os.waitpid(_child, 0)")
    repo = project(tmp_path, calc=BROKEN + child)
    after = run(PYTEST, repo)
    assert after.outcome == FAILED and "second test report" in after.cause
    verdict = acceptable(after, start(repo))
    assert not verdict.ok and "tests/test_calc.py::test_mean" not in verdict.reason


def test_a_report_cut_short_is_a_failed_run(tmp_path):
    # The process ends without pytest finishing its session: no end to the report.
    repo = project(tmp_path, calc=CALC + "\nimport os\nos._exit(0)\n")
    after = run(PYTEST, repo)
    assert after.outcome != PASSED
    assert not acceptable(after, start(repo)).ok


def test_the_canary_names_are_new_for_every_run_and_never_reported_as_tests(tmp_path):
    repo = project(tmp_path, calc=CALC)
    first, second = run(PYTEST, repo), run(PYTEST, repo)
    assert first.ok and second.ok
    assert (
        first.passing_ids
        == second.passing_ids
        == {
            "tests/test_calc.py::test_add",
            "tests/test_calc.py::test_mean",
        }
    )
    assert (first.passed, first.failed) == (2, 0)


MIXIN = """\
class Checks:
""" + "".join(f"    def test_check_{i}(self):\n        assert True\n\n" for i in range(8))

MIXED = """\
from tests.mixins import Checks


class TestFirst(Checks):
    pass


class TestSecond(Checks):
    pass


class TestThird(Checks):
    pass
"""


def test_inherited_tests_keep_their_class_and_a_deleted_class_is_a_removal(tmp_path):
    files = {"tests/__init__.py": "", "tests/mixins.py": MIXIN, "tests/test_mixed.py": MIXED}
    repo = make_repo(tmp_path / "target", {"calc.py": CALC, **files})
    before = run(PYTEST, repo)
    assert before.ok and len(before.passing_ids) == 24 == before.passed
    assert "tests/test_mixed.py::TestSecond::test_check_3" in before.passing_ids
    (repo / "tests/test_mixed.py").write_text(MIXED.split("class TestSecond")[0])
    after = run(PYTEST, repo)
    assert after.ok and after.passed == 8
    lost = lost_tests(before, after)
    assert len(lost) == 16
    assert "tests/test_mixed.py::TestThird::test_check_7" in lost
    refused = acceptable(after, before)
    assert not refused.ok and "allow_test_removal" in refused.reason
    allowed = acceptable(after, before, allow_test_removal=True)
    assert allowed.ok and len(allowed.removed) == 16


def test_ids_that_disagree_with_the_runners_count_are_unchecked_never_a_pass(tmp_path):
    # The same file given twice and kept twice: pytest runs each test twice under one id.
    repo = project(tmp_path, calc=CALC)
    after = run(f"{PYTEST} --keep-duplicates tests/test_calc.py tests/test_calc.py", repo)
    assert after.outcome == UNCHECKED
    verdict = acceptable(after, start(repo))
    assert not verdict.ok and "unchecked" in verdict.reason


def test_a_module_skipped_while_collected_is_counted_as_pytest_counts_it(tmp_path):
    skipped = "import pytest\n\npytest.skip('not here', allow_module_level=True)\n"
    repo = project(tmp_path, calc=CALC, **{"tests/test_skipped.py": skipped})
    after = run(PYTEST, repo)
    assert (after.outcome, after.passed, after.skipped) == (PASSED, 2, 0)


def test_a_test_that_fails_and_errors_in_teardown_is_one_failing_id(tmp_path):
    tests = (
        "import pytest\n\n\n@pytest.fixture\ndef broken():\n    yield\n    raise RuntimeError\n\n\n"
        "def test_both(broken):\n    assert False\n\n\ndef test_fine():\n    pass\n"
    )
    repo = project(tmp_path, calc=CALC, **{"tests/test_calc.py": tests})
    after = run(PYTEST, repo)
    assert after.outcome == FAILED
    assert after.failing_ids == {"tests/test_calc.py::test_both"}
    assert after.passing_ids == {"tests/test_calc.py::test_fine"}


SUBTESTS = """\
def test_sub(subtests):
    for i in range(3):
        with subtests.test(i=i):
            assert i != {bad}


def test_plain():
    pass
"""


@pytest.mark.skipif(pytest.version_tuple < (9,), reason="pytest's own subtests came in 9.0")
def test_subtests_are_no_tests_of_their_own_and_a_failing_one_fails_its_test(tmp_path):
    repo = project(tmp_path, calc=CALC, **{"tests/test_calc.py": SUBTESTS.format(bad=-1)})
    passing = run(PYTEST, repo)
    assert (passing.outcome, passing.passed) == (PASSED, 2)
    (repo / "tests/test_calc.py").write_text(SUBTESTS.format(bad=1))
    failing = run(PYTEST, repo)
    assert failing.outcome == FAILED
    assert failing.failing_ids == {"tests/test_calc.py::test_sub"}


SKIPPED_SUBTESTS = """\
import unittest


class TestCalc(unittest.TestCase):
    def test_backends(self):
        for name in ("fast", "slow"):
            with self.subTest(name):
                if name == "slow":
                    self.skipTest("backend not installed")

    def test_plain(self):
        pass
"""


@pytest.mark.skipif(pytest.version_tuple < (9,), reason="pytest's own subtests came in 9.0")
@pytest.mark.parametrize("verbosity", ["", " -q", " -v"])
def test_a_skipped_subtest_is_counted_as_the_summary_counts_it(tmp_path, verbosity):
    # pytest 9 counts a skipped subtest in its summary line only when it prints subtests
    # (-q or -v, not its default verbosity): the report's count must follow it, or an honest
    # unittest suite that skips subtests (a backend not installed) reads as untrustworthy.
    repo = project(tmp_path, calc=CALC, **{"tests/test_calc.py": SKIPPED_SUBTESTS})
    result = run(PYTEST + verbosity, repo)
    assert (result.outcome, result.passed) == (PASSED, 2), result.summary


# Code under test that passes only the worktree's failing tests (the canaries stay as they must):
# pytest's report class reached by a module name built at run time.
TARGETED_PATCH = """
import importlib as _il

_R = _il.import_module("_py" + "test.reports").TestReport
_make = _R.from_item_and_call


def _passing(item, call):
    report = _make(item, call)
    if "mean" in item.name:
        report.outcome, report.longrepr = "passed", None
    return report


_R.from_item_and_call = _passing
"""
# The same patch put in place while the test runs, and taken back by itself after one use.
SELF_RESTORING = """
def _patch():
    import importlib as _il

    R = _il.import_module("_py" + "test.reports").TestReport
    make = R.from_item_and_call

    def passing(item, call):
        R.from_item_and_call = make
        report = make(item, call)
        report.outcome, report.longrepr = "passed", None
        return report

    R.from_item_and_call = passing
"""


@pytest.mark.parametrize("kind", JAILS)
def test_a_patch_of_the_runner_aimed_at_some_tests_is_a_tampered_run(tmp_path, kind):
    repo = project(tmp_path, calc=BROKEN + TARGETED_PATCH)
    after = run(PYTEST, repo, jail=jail_of(kind, repo))
    assert after.outcome == TAMPERED
    assert "_pytest.reports: TestReport.from_item_and_call" in after.cause
    assert not acceptable(after, start(repo)).ok


def test_a_patch_made_during_a_test_and_taken_back_after_one_report_is_a_tampered_run(tmp_path):
    calc = BROKEN.replace("def mean(values):\n", "def mean(values):\n    _patch()\n")
    repo = project(tmp_path, calc=calc + SELF_RESTORING)
    after = run(PYTEST, repo)
    assert after.outcome == TAMPERED
    assert "runner's own code was changed" in after.cause


# An honest suite that uses what tests use: fixtures, monkeypatch, parametrize, marks,
# capture, logging, warnings, unittest, approx, raises: none of it changes the runner.
HONEST_SUITE = """
import logging
import unittest
import warnings

import pytest

from calc import add, mean


@pytest.fixture
def numbers():
    return [1, 2, 3]


@pytest.mark.parametrize("a,b", [(1, 2), (3, 4)])
def test_add(a, b):
    assert add(a, b) == a + b


def test_mean(numbers, monkeypatch, capsys, caplog, tmp_path):
    monkeypatch.setenv("X", "1")
    monkeypatch.setattr("calc.add", lambda a, b: 0)
    print("hello")
    logging.getLogger("t").warning("w")
    assert capsys.readouterr().out == "hello\\n"
    assert mean(numbers) == pytest.approx(2)
    with pytest.raises(ZeroDivisionError):
        mean([])
    with pytest.warns(UserWarning):
        warnings.warn("u", UserWarning)


@pytest.mark.xfail(strict=True)
def test_known():
    assert False


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass


class TestCase(unittest.TestCase):
    def test_case(self):
        self.assertEqual(add(1, 1), 2)
"""


def test_an_honest_suite_does_not_change_the_runner(tmp_path):
    repo = make_repo(tmp_path / "honest", {"calc.py": CALC, "tests/test_calc.py": HONEST_SUITE})
    after = run(PYTEST, repo)
    assert after.outcome == PASSED, after.cause
    assert after.passed == 4

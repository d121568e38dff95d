"""Test runs whose results can be trusted: outcome, failing ids, the gate and the setup check.

Runs real pytest, go and cargo on temp projects; go, cargo and jest tests skip when the tool is
not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CALC, ROOT, make_repo

from autoresearch.gate import testrun, verdict
from autoresearch.gate.baseline import (
    check_baseline,
    describe_baseline,
    likely_fix,
    measure_baseline,
    stops_at_first_failure,
)
from autoresearch.gate.diagnosis import likely_fix as likely_fix_of
from autoresearch.gate.runner_reports import read_go_json
from autoresearch.gate.testrun import FAILED, NOT_RUN, PASSED, TIMED_OUT, TestRun
from autoresearch.gate.verdict import GONE, SKIPPED_NOW, acceptable, regressions
from autoresearch.safety import jail
from autoresearch.session.stack import pytest_cache_disabled, uncached_test_command

PY = sys.executable
PYTEST = f"{PY} -m pytest"
PLAIN_PYTEST = str(Path(PY).parent / "pytest")  # `pytest` itself, as stack detection chose it

TESTS = """\
import pytest

from calc import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2


class TestNames:
    @pytest.mark.parametrize("x", [1, 2])
    def test_param(self, x):
        assert add(0, x) == x
"""


def python_project(tmp_path: Path, **extra: str) -> Path:
    """calc.py at the root, tests/ beside it, no pytest config: the layout of the bug report."""
    return make_repo(tmp_path / "target", {"calc.py": CALC, "tests/test_calc.py": TESTS, **extra})


def run(command: str, repo: Path, **options) -> TestRun:
    options.setdefault("stack", "Python")
    options.setdefault("timeout_s", 300)
    return testrun.run_tests(command, repo, **options)


def record(outcome: str, failing: set[str] | None, exit_code: int | None = 1) -> TestRun:
    """A TestRun for the pure gate functions."""
    return TestRun(
        command="pytest",
        ran="pytest",
        outcome=outcome,
        cause="reason",
        passed=3,
        failed=None if failing is None else len(failing),
        skipped=0,
        errors=0,
        failing_ids=None if failing is None else frozenset(failing),
        passing_ids=None,
        exit_code=exit_code,
        duration_s=1.0,
        tail="",
        source="junit" if failing is not None else "exit-code-only",
    )


# --- runs that never got to the tests ---


def test_plain_pytest_on_a_tests_layout_without_config_is_not_run(tmp_path):
    repo = python_project(tmp_path)
    result = run(PLAIN_PYTEST, repo)
    assert result.outcome == NOT_RUN
    assert result.cause == "collection error"
    assert not re.search(r"\d+ failed", result.summary)


def test_setup_error_for_plain_pytest_names_test_command_and_python_m_pytest(tmp_path):
    repo = python_project(tmp_path)
    result = run(PLAIN_PYTEST, repo)
    message = check_baseline(result, repo, origin="config/sessions/s.yaml")
    first = message.splitlines()[0]
    assert first.startswith("config/sessions/s.yaml: key 'test_command':")
    assert "use `python -m pytest`" in first
    assert "No module named 'calc'" in message  # the command's last lines


def test_python_m_pytest_runs_the_same_layout(tmp_path):
    repo = python_project(tmp_path)
    result = run(PYTEST, repo)
    assert (result.outcome, result.passed, result.failed, result.source) == (
        PASSED,
        4,
        0,
        "pytest-stream",
    )
    assert check_baseline(result, repo) is None


def test_src_layout_hint_puts_src_on_the_path(tmp_path):
    repo = make_repo(
        tmp_path / "target", {"src/calc/__init__.py": CALC, "tests/test_calc.py": TESTS}
    )
    result = run(PYTEST, repo)
    assert result.outcome == NOT_RUN
    assert "PYTHONPATH=src python -m pytest" in likely_fix(result, repo)


def test_a_module_the_build_writes_is_named_not_the_src_hint_the_command_follows(tmp_path):
    # humanize: hatch-vcs writes src/humanize/_version.py at build; git does not hold it.
    init = "from ._version import __version__\n" + CALC
    pyproject = '[tool.hatch]\nbuild.hooks.vcs.version-file = "src/calc/_version.py"\n'
    files = {"src/calc/__init__.py": init, "tests/test_calc.py": TESTS}
    repo = make_repo(tmp_path / "target", {**files, "pyproject.toml": pyproject})
    command = f"PYTHONPATH=src {PYTEST}"
    result = run(command, repo)
    assert result.outcome == NOT_RUN
    hint = likely_fix(result, repo)
    assert "prefix the command" not in hint  # it already does
    assert "module 'calc._version' (src/calc/_version.py) is not in git" in hint
    assert "pyproject.toml names it" in hint
    assert "> src/calc/_version.py && " in hint


def test_missing_third_party_module_hint_says_install_dependencies(tmp_path):
    repo = python_project(tmp_path, **{"tests/test_dep.py": "import not_installed_anywhere_xyz\n"})
    result = run(PYTEST, repo)
    assert result.outcome == NOT_RUN
    assert "install the target's dependencies" in likely_fix(result, repo)


def test_collection_error_is_not_run(tmp_path):
    repo = python_project(tmp_path, **{"tests/test_broken.py": "def test_x(:\n    pass\n"})
    result = run(PYTEST, repo)
    assert (result.outcome, result.cause, result.exit_code) == (NOT_RUN, "collection error", 2)


def test_no_tests_collected_is_not_run(tmp_path):
    repo = python_project(tmp_path)
    result = run(f"{PYTEST} -k no_such_test", repo)
    assert (result.outcome, result.cause, result.exit_code) == (NOT_RUN, "no tests collected", 5)


def test_usage_error_is_not_run(tmp_path):
    repo = python_project(tmp_path)
    result = run(f"{PYTEST} --no-such-option", repo)
    assert (result.outcome, result.exit_code) == (NOT_RUN, 4)
    assert "--no-such-option" in likely_fix(result, repo)


def test_import_error_in_conftest_is_not_run(tmp_path):
    repo = python_project(tmp_path, **{"tests/conftest.py": "import not_installed_anywhere_xyz\n"})
    result = run(PYTEST, repo)
    assert result.outcome == NOT_RUN
    assert check_baseline(result, repo) is not None


def test_command_not_found_is_not_run(tmp_path):
    repo = python_project(tmp_path)
    result = run("no-such-test-runner-xyz", repo)
    assert (result.outcome, result.cause) == (NOT_RUN, "command not found")


def test_not_run_is_never_acceptable_even_with_a_failing_baseline(tmp_path):
    repo = python_project(tmp_path)
    not_run = run(f"{PYTEST} -k no_such_test", repo)
    baseline = record(FAILED, {"tests/test_calc.py::test_add"})
    verdict = acceptable(not_run, baseline, allow_failing_baseline=True)
    assert not verdict.ok
    assert "no tests collected" in verdict.reason


def test_timed_out_run_is_never_acceptable(tmp_path):
    repo = python_project(tmp_path)
    result = run(f"{PY} -c 'import time; time.sleep(60)'", repo, timeout_s=1)
    assert result.outcome == TIMED_OUT
    assert not acceptable(result, result, allow_failing_baseline=True).ok


# --- failing tests, by id ---


def test_failing_test_is_named_by_its_node_id(tmp_path):
    repo = python_project(tmp_path, **{"calc.py": CALC.replace("a + b", "a - b")})
    result = run(PYTEST, repo)
    assert result.outcome == FAILED
    assert result.failing_ids == {
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::TestNames::test_param[1]",
        "tests/test_calc.py::TestNames::test_param[2]",
    }
    assert result.passing_ids == {"tests/test_calc.py::test_mean"}


def test_summary_of_a_failing_run_never_says_pass(tmp_path):
    repo = python_project(tmp_path, **{"calc.py": CALC.replace("a + b", "a - b")})
    result = run(PYTEST, repo)
    assert result.summary.startswith("FAILED: 3 failed")
    assert "pass" not in result.summary.lower()


def test_failing_exit_code_without_a_failing_test_gives_no_ids(tmp_path):
    repo = python_project(tmp_path)
    result = run(f"{PYTEST} && false", repo)
    assert result.outcome == FAILED
    assert result.failing_ids is None
    assert "exit code 1 with no failing test reported" in result.summary


def test_fixture_error_counts_as_a_failing_test(tmp_path):
    broken_fixture = (
        "import pytest\n\n@pytest.fixture\ndef boom():\n    raise RuntimeError('x')\n\n"
        "def test_uses_it(boom):\n    pass\n"
    )
    repo = python_project(tmp_path, **{"tests/test_fixture.py": broken_fixture})
    result = run(PYTEST, repo)
    assert result.outcome == FAILED
    assert result.failing_ids == {"tests/test_fixture.py::test_uses_it"}
    assert result.errors == 1


# --- the gate ---


def test_green_baseline_refuses_any_failing_run(tmp_path):
    repo = python_project(tmp_path)
    baseline = run(PYTEST, repo)
    (repo / "calc.py").write_text(CALC.replace("a + b", "a - b"))
    verdict = acceptable(run(PYTEST, repo), baseline, allow_failing_baseline=True)
    assert not verdict.ok
    assert "tests/test_calc.py::test_add" in verdict.reason


def failing_baseline_project(tmp_path: Path) -> Path:
    """mean is wrong (one failing test), and a second module has one failing test too."""
    extra = {"tests/test_more.py": "def test_known_bad():\n    assert 1 == 2\n"}
    return python_project(tmp_path, **{"calc.py": CALC.replace("/ len", "/ 2 / len"), **extra})


def test_failing_baseline_refuses_a_change_that_breaks_another_test(tmp_path):
    repo = failing_baseline_project(tmp_path)
    baseline = run(PYTEST, repo)
    assert baseline.failing_ids == {
        "tests/test_calc.py::test_mean",
        "tests/test_more.py::test_known_bad",
    }
    (repo / "calc.py").write_text((repo / "calc.py").read_text().replace("a + b", "a - b"))
    after = run(PYTEST, repo)
    verdict = acceptable(after, baseline, allow_failing_baseline=True)
    assert not verdict.ok
    assert "tests/test_calc.py::test_add" in verdict.reason
    assert regressions(baseline, after) == {
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::TestNames::test_param[1]",
        "tests/test_calc.py::TestNames::test_param[2]",
    }


def test_failing_baseline_accepts_a_change_that_fixes_a_test(tmp_path):
    repo = failing_baseline_project(tmp_path)
    baseline = run(PYTEST, repo)
    (repo / "calc.py").write_text(CALC)
    after = run(PYTEST, repo)
    assert after.outcome == FAILED  # test_known_bad still fails
    verdict = acceptable(after, baseline, allow_failing_baseline=True)
    assert verdict.ok
    assert "1 still failing" in verdict.reason


def test_failing_baseline_without_the_flag_refuses_every_failing_run(tmp_path):
    repo = failing_baseline_project(tmp_path)
    baseline = run(PYTEST, repo)
    (repo / "calc.py").write_text(CALC)
    assert not acceptable(run(PYTEST, repo), baseline).ok


def test_a_new_failing_test_is_a_regression():
    baseline = record(FAILED, {"t::old"})
    after = record(FAILED, {"t::old", "t::new"})
    assert regressions(baseline, after) == {"t::new"}


def test_regressions_are_unknown_without_ids():
    assert regressions(record(FAILED, {"t::a"}), record(FAILED, None)) is None
    assert regressions(record(FAILED, None), record(FAILED, {"t::a"})) is None


def test_failing_baseline_without_ids_asks_for_a_full_pass():
    verdict = acceptable(record(FAILED, None), record(FAILED, None), True)
    assert not verdict.ok
    assert "must pass outright" in verdict.reason


def test_reason_names_ten_ids_then_how_many_more():
    after = record(FAILED, {f"t::test_{i:02}" for i in range(25)})
    reason = acceptable(after, record(PASSED, set(), exit_code=0)).reason
    assert "t::test_09" in reason
    assert "t::test_10" not in reason
    assert reason.endswith("and 15 more")


def test_reason_without_ids_names_exit_code_and_cause():
    reason = acceptable(record(FAILED, None), None).reason
    assert "exit code 1" in reason
    assert "reason" in reason  # the run's cause


# --- setup ---


def test_failing_baseline_stops_setup_unless_allowed(tmp_path):
    repo = failing_baseline_project(tmp_path)
    baseline = run(PYTEST, repo)
    message = check_baseline(baseline, repo, origin="spec.yaml")
    assert message.startswith("spec.yaml: key 'allow_failing_baseline'")
    assert "tests/test_calc.py::test_mean" in message
    assert check_baseline(baseline, repo, allow_failing_baseline=True) is None


def test_allowed_failing_baseline_without_ids_still_stops_setup(tmp_path):
    repo = failing_baseline_project(tmp_path)
    baseline = run(f"{PYTEST} -p no:{testrun.PLUGIN}", repo)  # the harness's report refused
    assert (baseline.outcome, baseline.failing_ids) == (FAILED, None)
    message = check_baseline(baseline, repo, allow_failing_baseline=True)
    assert "no change could ever be kept" in message


def test_allowed_failing_baseline_that_stops_at_the_first_failure_stops_setup(tmp_path):
    repo = failing_baseline_project(tmp_path)
    baseline = run(f"{PYTEST} -x", repo)
    message = check_baseline(baseline, repo, allow_failing_baseline=True)
    assert "stops at the first failure" in message.splitlines()[0]


def test_a_runner_that_crashes_after_passing_tests_stops_setup_as_a_crash(tmp_path):
    # Every test passed, then the process died: no test failed, so no key about failing
    # tests can help, whatever allow_failing_baseline says.
    crash = (
        "import os, signal\n\n\n"
        "def pytest_unconfigure(config):\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    repo = python_project(tmp_path, **{"conftest.py": crash})
    baseline = run(PYTEST, repo)
    assert (baseline.outcome, baseline.failed, baseline.failing_ids) == (FAILED, 0, None)
    for allowed in (True, False):
        message = check_baseline(baseline, repo, allow_failing_baseline=allowed)
        first = message.splitlines()[0]
        assert "key 'test_command'" in first and "although no test failed" in first
        assert "allow_failing_baseline" not in message


def test_stop_early_options_are_recognised_per_runner(tmp_path):
    assert stops_at_first_failure("python -m pytest -qx", tmp_path)
    assert stops_at_first_failure("pytest --maxfail=2", tmp_path)
    assert not stops_at_first_failure("pytest -rxs", tmp_path)
    assert stops_at_first_failure("go test -failfast ./...", tmp_path)
    assert not stops_at_first_failure("go test -x ./...", tmp_path)  # -x prints commands


def test_stop_early_in_pytest_addopts_is_recognised(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -x -q\n")
    assert stops_at_first_failure("python -m pytest", tmp_path)


def test_describe_baseline_names_the_failing_tests(tmp_path):
    repo = failing_baseline_project(tmp_path)
    line = describe_baseline(run(PYTEST, repo))
    assert line.startswith("warning: baseline FAILS")
    assert "tests/test_more.py::test_known_bad" in line


def test_baseline_survives_a_round_trip_through_json(tmp_path):
    repo = failing_baseline_project(tmp_path)
    baseline = run(PYTEST, repo)
    stored = TestRun.from_record(json.loads(json.dumps(baseline.to_record())))
    assert stored.failing_ids == baseline.failing_ids
    assert (stored.outcome, stored.summary) == (baseline.outcome, baseline.summary)
    (repo / "calc.py").write_text(CALC)
    assert acceptable(run(PYTEST, repo), stored, allow_failing_baseline=True).ok


# --- test identity: a test that passed where the change started must still pass ---

BROKEN_MEAN = CALC.replace("/ len", "/ 2 / len")
SKIP_MEAN = """\
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.name == "test_mean":
            item.add_marker(pytest.mark.skip(reason="flaky"))
"""
PLUGIN = "[pytest]\naddopts = -p skipper\n"
RENAMED = TESTS.replace(
    "def test_mean():\n    assert mean([1, 2, 3]) == 2", "def test_mean_of_one():\n    assert 1\n"
)
HIDES = {
    "-k in a new pytest.ini": {"pytest.ini": '[pytest]\naddopts = -k "not test_mean"\n'},
    "--deselect in pyproject.toml": {
        "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "--deselect '
        'tests/test_calc.py::test_mean"\n'
    },
    "a -p plugin that skips": {"skipper.py": SKIP_MEAN, "pytest.ini": PLUGIN},
    "a conftest.py that skips": {"tests/conftest.py": SKIP_MEAN},
    "an xfail marker": {
        "tests/test_calc.py": TESTS.replace("def test_mean", "@pytest.mark.xfail\ndef test_mean")
    },
    "the test renamed": {"tests/test_calc.py": RENAMED},
}
FATE = {
    "-k in a new pytest.ini": GONE,
    "--deselect in pyproject.toml": GONE,
    "a -p plugin that skips": SKIPPED_NOW,
    "a conftest.py that skips": SKIPPED_NOW,
    "an xfail marker": SKIPPED_NOW,
    "the test renamed": GONE,
}


def hide_broken_mean(repo: Path, how: str) -> None:
    """mean() broken, and test_mean, which would catch it, kept from failing."""
    (repo / "calc.py").write_text(BROKEN_MEAN)
    for name, text in HIDES[how].items():
        (repo / name).write_text(text)


@pytest.mark.parametrize("how", sorted(HIDES))
def test_a_passing_test_hidden_from_the_run_is_not_a_pass(tmp_path, how):
    repo = python_project(tmp_path)
    start = run(PYTEST, repo)
    hide_broken_mean(repo, how)
    after = run(PYTEST, repo)
    assert after.outcome == PASSED  # the exit code and counts alone would have kept it
    verdict = acceptable(after, start)
    assert not verdict.ok
    assert verdict.reason.startswith("tests that passed where the change started do not pass")
    assert f"{FATE[how]}: tests/test_calc.py::test_mean" in verdict.reason
    assert "allow_test_removal" in verdict.reason


def test_a_hidden_test_is_refused_even_with_a_failing_baseline(tmp_path):
    repo = failing_baseline_project(tmp_path)
    start = run(PYTEST, repo)
    (repo / "pytest.ini").write_text('[pytest]\naddopts = -k "not test_add"\n')
    after = run(PYTEST, repo)
    assert regressions(start, after) == set()  # no new failure: by failures, a keep
    verdict = acceptable(after, start, allow_failing_baseline=True)
    assert not verdict.ok
    assert f"{GONE}: tests/test_calc.py::test_add" in verdict.reason


def test_a_known_failing_test_deleted_is_a_removal_not_a_fix(tmp_path):
    repo = failing_baseline_project(tmp_path)
    start = run(PYTEST, repo)
    (repo / "tests/test_more.py").unlink()
    (repo / "calc.py").write_text(CALC)
    after = run(PYTEST, repo)
    assert after.outcome == PASSED
    verdict = acceptable(after, start, allow_failing_baseline=True)
    assert not verdict.ok
    assert f"{GONE}: tests/test_more.py::test_known_bad" in verdict.reason


def test_new_parametrize_ids_are_a_removal_of_the_old_ones(tmp_path):
    repo = python_project(tmp_path)
    start = run(PYTEST, repo)
    (repo / "tests/test_calc.py").write_text(TESTS.replace("[1, 2]", "[1, 3]"))
    verdict = acceptable(run(PYTEST, repo), start)
    assert not verdict.ok
    assert "tests/test_calc.py::TestNames::test_param[2]" in verdict.reason
    assert "parametrize id changed" in verdict.reason


def test_allow_test_removal_lets_a_deleted_test_go_and_names_it(tmp_path):
    repo = python_project(tmp_path)
    start = run(PYTEST, repo)
    (repo / "tests/test_calc.py").write_text(TESTS.replace("def test_mean", "def _unused"))
    verdict = acceptable(run(PYTEST, repo), start, allow_test_removal=True)
    assert verdict.ok
    assert verdict.removed == ("tests/test_calc.py::test_mean",)
    assert "1 test(s) removed, allowed by allow_test_removal" in verdict.reason
    assert "tests/test_calc.py::test_mean" in verdict.reason


def test_allow_test_removal_never_lets_a_failing_test_through(tmp_path):
    repo = failing_baseline_project(tmp_path)
    start = run(PYTEST, repo)
    (repo / "calc.py").write_text(BROKEN_MEAN.replace("a + b", "a - b"))
    after = run(PYTEST, repo)
    verdict = acceptable(after, start, allow_failing_baseline=True, allow_test_removal=True)
    assert not verdict.ok and verdict.removed == ()


def test_a_test_added_since_the_baseline_is_held_through_the_record(tmp_path):
    """A later cycle is held to the run recorded where it starts (decision.json): the ids of
    tests that passed there survive the round trip, so a test added by a kept change counts."""
    repo = python_project(tmp_path)
    (repo / "tests/test_new.py").write_text("def test_added():\n    pass\n")
    recorded = TestRun.from_record(json.loads(json.dumps(run(PYTEST, repo).to_record())))
    assert "tests/test_new.py::test_added" in recorded.passing_ids
    (repo / "tests/test_new.py").unlink()
    verdict = acceptable(run(PYTEST, repo), recorded)
    assert not verdict.ok
    assert "tests/test_new.py::test_added" in verdict.reason


def counted(passed: int | None, ids: frozenset[str] | None = None) -> TestRun:
    """A passing run as a runner without ids (regex counts) or without counts gives it."""
    source = "junit" if ids is not None else "regex" if passed is not None else "exit-code-only"
    return TestRun(
        command="t",
        ran="t",
        outcome=PASSED,
        cause="all tests passed",
        passed=passed,
        failed=None if passed is None else 0,
        skipped=None,
        errors=None,
        failing_ids=None if ids is None else frozenset(),
        passing_ids=ids,
        exit_code=0,
        duration_s=1.0,
        tail="",
        source=source,
    )


def test_without_ids_fewer_passing_tests_is_not_a_pass():
    verdict = acceptable(counted(1), counted(2))
    assert not verdict.ok
    assert "1 tests pass where 2 passed" in verdict.reason


def test_without_ids_allow_test_removal_lets_the_count_drop_and_says_so():
    verdict = acceptable(counted(1), counted(2), allow_test_removal=True)
    assert verdict.ok
    assert "1 fewer passing tests" in verdict.reason


def test_without_ids_the_same_count_passes_compared_by_count_only():
    verdict = acceptable(counted(2), counted(2))
    assert verdict.ok and "compared by count only" in verdict.reason


def test_without_ids_or_counts_a_pass_says_it_is_unchecked():
    verdict = acceptable(counted(None), counted(None))
    assert verdict.ok
    assert "unchecked" in verdict.reason and "would go unseen" in verdict.reason


def test_a_run_that_stops_naming_its_tests_is_refused():
    """A change that turns the runner's report off (junitxml disabled in addopts) must not
    hide which tests are gone: the start named them, the run after the change must too."""
    start = counted(2, frozenset({"t::a", "t::b"}))
    assert not acceptable(counted(2), start).ok
    assert not acceptable(counted(None), counted(2)).ok


# --- the uncached command ---


def test_cache_clear_is_not_added_when_the_command_disables_the_cache():
    command = "python -m pytest -p no:cacheprovider -q"
    assert uncached_test_command("Python", command) == command


def test_cache_clear_is_not_added_when_the_config_disables_the_cache(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "-q -p no:cacheprovider"\n'
    )
    assert pytest_cache_disabled("python -m pytest", tmp_path)
    assert uncached_test_command("Python", "python -m pytest", tmp_path) == "python -m pytest"


def test_cache_clear_is_still_added_when_the_cache_is_on(tmp_path):
    (tmp_path / "tox.ini").write_text("[pytest]\naddopts = -q\n")
    assert uncached_test_command("Python", "python -m pytest", tmp_path) == (
        "python -m pytest --cache-clear"
    )


def test_setup_baseline_with_cache_provider_disabled_runs_the_tests(tmp_path):
    repo = python_project(tmp_path)
    baseline, error = measure_baseline(
        f"{PYTEST} -p no:cacheprovider", repo, stack="Python", timeout_s=300
    )
    assert error is None
    assert "--cache-clear" not in baseline.ran
    assert (baseline.outcome, baseline.passed) == (PASSED, 4)


def test_setup_baseline_uses_the_uncached_command(tmp_path):
    repo = python_project(tmp_path)
    baseline, error = measure_baseline(PYTEST, repo, stack="Python", timeout_s=300)
    assert error is None
    assert "--cache-clear" in baseline.ran


# --- the target's own pytest setup ---


def test_target_addopts_with_its_own_junitxml_does_not_change_the_report(tmp_path):
    repo = python_project(tmp_path, **{"pytest.ini": "[pytest]\naddopts = --junitxml=own.xml\n"})
    (repo / "calc.py").write_text(CALC.replace("a + b", "a - b"))
    result = run(PYTEST, repo)
    assert result.source == "pytest-stream"
    assert "tests/test_calc.py::test_add" in result.failing_ids


def test_a_junit_file_the_command_writes_is_never_read(tmp_path):
    # The tested process could rewrite it after the run; the harness's stream decides.
    repo = python_project(tmp_path, **{"calc.py": CALC.replace("a + b", "a - b")})
    result = run(f"{PYTEST} --junitxml=reports/out.xml", repo)
    assert result.source == "pytest-stream"
    assert "tests/test_calc.py::test_add" in result.failing_ids


def test_junit_plugin_turned_off_in_config_changes_nothing(tmp_path):
    repo = python_project(tmp_path, **{"pytest.ini": "[pytest]\naddopts = -p no:junitxml\n"})
    result = run(PYTEST, repo)
    assert (result.outcome, result.passed, result.source) == (PASSED, 4, "pytest-stream")


def test_wrapper_that_rejects_our_flags_is_run_as_given(tmp_path):
    wrapper = (
        '#!/bin/sh\nif [ "$1" = -p ]; then echo "error: unrecognized arguments: $*" >&2; '
        f'exit 4; fi\nexec {PY} -m pytest "$@"\n'
    )
    repo = python_project(tmp_path, **{"bin/pytest": wrapper})
    (repo / "bin" / "pytest").chmod(0o755)
    result = run("bin/pytest", repo)
    assert testrun.PLUGIN not in result.ran
    assert (result.outcome, result.passed, result.source) == (PASSED, 4, "regex")


def test_a_thousand_tests_are_counted_and_named(tmp_path):
    many = (
        "import pytest\n\n@pytest.mark.parametrize('i', range(1000))\n"
        "def test_many(i):\n    assert i != 500\n"
    )
    repo = make_repo(tmp_path / "target", {"tests/test_many.py": many})
    result = run(PYTEST, repo)
    assert (result.passed, result.failed) == (999, 1)
    assert result.failing_ids == {"tests/test_many.py::test_many[500]"}
    assert len(result.passing_ids) == 999


# --- go ---

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")

GO_MOD = "module example.com/m\n\ngo 1.19\n"
GO_TESTS = """\
package a

import "testing"

func TestAdd(t *testing.T) {}
func TestBad(t *testing.T) { t.Fatal("always") }
func TestSub(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) { t.Fatal("x") })
}
func TestSkip(t *testing.T) { t.Skip("later") }
"""


@pytest.fixture
def go_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GOCACHE", str(tmp_path / "gocache"))
    monkeypatch.setenv("GOFLAGS", "-mod=mod")


@pytest.mark.e2e
@needs_go
def test_go_failing_tests_and_subtests_are_named(tmp_path, go_env):
    repo = make_repo(
        tmp_path / "g", {"go.mod": GO_MOD, "a/a.go": "package a\n", "a/a_test.go": GO_TESTS}
    )
    result = run("go test ./...", repo, stack="Go", uncached=True)
    assert (result.outcome, result.source) == (FAILED, "go-json")
    assert "-json" in result.ran
    assert result.failing_ids == {
        "example.com/m/a::TestBad",
        "example.com/m/a::TestSub",
        "example.com/m/a::TestSub/two",
    }
    assert "--- FAIL: TestBad" in result.tail  # the readable text, not the JSON events


@pytest.mark.e2e
@needs_go
def test_go_package_that_does_not_build_is_a_failing_id(tmp_path, go_env):
    repo = make_repo(
        tmp_path / "g",
        {
            "go.mod": GO_MOD,
            "a/a.go": "package a\n",
            "a/a_test.go": 'package a\n\nimport "testing"\n\nfunc TestA(t *testing.T) {}\n',
            "b/b.go": "package b\n\nfunc B() int { return undefined }\n",
            "b/b_test.go": 'package b\n\nimport "testing"\n\nfunc TestB(t *testing.T) {}\n',
        },
    )
    result = run("go test ./...", repo, stack="Go")
    assert result.outcome == FAILED
    assert result.failing_ids == {"example.com/m/b [build failed]"}
    only_b = run("go test ./b/...", repo, stack="Go")
    assert (only_b.outcome, only_b.cause) == (NOT_RUN, "build failed")


def test_go_build_failure_reported_as_events_is_a_failing_id():
    # Go 1.24 and later: compile errors come as build-output events, the package's fail event
    # names the failed build (the shape of cmd/go's test_json_build script).
    events = [
        {"ImportPath": "m/b [m/b.test]", "Action": "build-output", "Output": "# m/b\n"},
        {"ImportPath": "m/b [m/b.test]", "Action": "build-output", "Output": "b.go:3: bad\n"},
        {"ImportPath": "m/b [m/b.test]", "Action": "build-fail"},
        {"Action": "start", "Package": "m/b"},
        {"Action": "output", "Package": "m/b", "Output": "FAIL\tm/b [build failed]\n"},
        {"Action": "fail", "Package": "m/b", "Elapsed": 0, "FailedBuild": "m/b [m/b.test]"},
        {"Action": "run", "Package": "m/a", "Test": "TestA"},
        {"Action": "pass", "Package": "m/a", "Test": "TestA", "Elapsed": 0},
    ]
    tally = read_go_json("\n".join(json.dumps(e) for e in events))
    assert tally.errored == {"m/b [build failed]"}
    assert tally.passed == {"m/a::TestA"}
    assert "b.go:3: bad" in tally.text


@pytest.mark.e2e
@needs_go
def test_go_without_test_files_is_not_run(tmp_path, go_env):
    repo = make_repo(tmp_path / "g", {"go.mod": GO_MOD, "a/a.go": "package a\n"})
    result = run("go test ./...", repo, stack="Go")
    assert (result.outcome, result.cause) == (NOT_RUN, "no tests collected")


# --- cargo ---

needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")

CARGO_TOML = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
LIB_RS = """\
/// ```
/// assert_eq!(calc::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    #[test]
    fn adds() { assert_eq!(super::add(1, 2), 3); }
    #[test]
    fn broken() { assert_eq!(super::add(1, 2), 4); }
}
"""


@pytest.mark.e2e
@needs_cargo
def test_cargo_runs_every_test_binary_and_names_the_failures(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {
            "Cargo.toml": CARGO_TOML,
            "src/lib.rs": LIB_RS,
            "tests/later.rs": '#[test]\nfn also_bad() { panic!("no"); }\n',
        },
    )
    result = run("cargo test", repo, stack="Rust")
    assert (result.outcome, result.source) == (FAILED, "cargo")
    # Without --no-fail-fast cargo stops at the first failing binary and tests/later.rs never runs.
    assert result.failing_ids == {
        "calc src/lib.rs::tests::broken",
        "later tests/later.rs::also_bad",
    }
    assert "doc-tests calc::src/lib.rs - add" in result.passing_ids


@pytest.mark.e2e
@needs_cargo
def test_cargo_compile_error_is_not_run(tmp_path):
    broken = LIB_RS.replace("a + b", "a + undefined_name")
    repo = make_repo(tmp_path / "r", {"Cargo.toml": CARGO_TOML, "src/lib.rs": broken})
    result = run("cargo test", repo, stack="Rust")
    assert (result.outcome, result.cause) == (NOT_RUN, "build failed")


# --- jest ---

# The Jest the Makefile installs for the canary tests (test_runner_canary.py), else one on PATH.
JEST = os.environ.get("JEST") or str(ROOT / ".jest" / "node_modules" / ".bin" / "jest")
JEST = JEST if Path(JEST).exists() else shutil.which("jest")
needs_jest = pytest.mark.skipif(JEST is None, reason="jest is not installed")


@pytest.mark.e2e
@needs_jest
def test_jest_failing_test_is_named(tmp_path):
    suite = (
        "describe('add', () => {\n"
        "  test('works', () => { expect(1 + 1).toBe(2); });\n"
        "  test('breaks', () => { expect(1 + 1).toBe(3); });\n"
        "});\n"
    )
    repo = make_repo(tmp_path / "j", {"package.json": "{}\n", "add.test.js": suite})
    result = run(JEST, repo, stack="Node/TS")
    assert (result.outcome, result.source) == (FAILED, "jest-json")
    assert result.failing_ids == {"add.test.js > add > breaks"}
    assert result.passing_ids == {"add.test.js > add > works"}


# --- what a setup error says is wrong ---


def test_pytest_missing_from_the_environment_is_said_so_not_blamed_on_a_key(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    repo = python_project(tmp_path)
    baseline = run(f"{python} -m pytest -q", repo)
    assert (baseline.outcome, baseline.cause) == (NOT_RUN, "pytest is not installed")
    message = check_baseline(baseline, repo, origin="spec.yaml")
    first = message.splitlines()[0]
    assert first.startswith("spec.yaml: key 'test_command'")
    assert f"pytest is not installed for {python}" in first
    assert f"{python} -m pip install pytest" in first
    assert "allow_failing_baseline" not in message


needs_bwrap = pytest.mark.skipif(not jail.probe().works, reason="bubblewrap cannot run here")


@needs_bwrap
def test_a_program_the_jail_hides_is_named_with_what_to_do(tmp_path):
    # The runner is named by its absolute path and exists here, but its interpreter lies in
    # the host's /tmp, which the jail replaces with a private one.
    interpreter = tmp_path / "py" / "bin" / "python"
    interpreter.parent.mkdir(parents=True)
    interpreter.symlink_to(PY)
    runner = tmp_path / "tools" / "bin" / "pytest"
    runner.parent.mkdir(parents=True)
    runner.write_text(f"#!{interpreter}\nimport sys, pytest\nsys.exit(pytest.console_main())\n")
    runner.chmod(0o755)
    repo = python_project(tmp_path)
    box = jail.build_jail({"sandbox": "bwrap"}, repo)
    baseline = run(f"{runner} -q", repo, jail=box)
    assert baseline.outcome == NOT_RUN and baseline.exit_code == 127
    first = check_baseline(baseline, repo, jailed=True).splitlines()[0]
    assert f"{runner} exists on this machine, but the command jail hides it" in first
    assert f"its interpreter {interpreter}" in first and "commands.sandbox: none" in first
    assert "install the program it runs" not in first


def test_a_program_named_by_a_path_that_does_not_exist_says_so(tmp_path):
    repo = python_project(tmp_path)
    baseline = run(f"{tmp_path}/nowhere/bin/pytest -q", repo)
    first = check_baseline(baseline, repo).splitlines()[0]
    assert f"{tmp_path}/nowhere/bin/pytest does not exist: fix the path in test_command" in first


def test_done_names_a_failure_that_is_only_the_bases():
    base = {"failing_ids": ["t::a", "t::b"]}

    def decision(failing, broken=False):
        return {"tests_pass": False, "broken": broken, "tests": {"failing_ids": failing}}

    assert verdict.tests_word(decision(["t::a", "t::b"]), base) == (
        "FAIL (the same 2 tests as at the base)"
    )
    assert verdict.tests_word(decision(["t::a"]), base) == (
        "FAIL (1 of the 2 tests that failed at the base; no other)"
    )
    assert verdict.tests_word(decision(["t::a", "t::new"]), base) == "FAIL"
    assert verdict.tests_word(decision(["t::a"], broken=True), base) == "FAIL"
    assert verdict.tests_word({"tests_pass": True}, base) == "pass"


# What Jest printed for vercel/arg's test.js, whose `require('chai')` finds no node_modules in
# a session's worktree (only tracked files are there), beside the canary's deliberate failure.
JEST_NO_CHAI = """\
FAIL ./test.js
  ● Test suite failed to run

    Cannot find module 'chai' from 'test.js'

      at Resolver._throwModNotFoundError (jest-resolve/build/index.js:1031:11)

FAIL ./write_check_large.test.js
  ● large name › state format
    Expected: 48
    Received: 40
Test Suites: 2 failed, 2 total
"""


def test_a_package_jest_cannot_find_is_named_with_where_to_install_it(tmp_path):
    fix = likely_fix_of("jest", JEST_NO_CHAI, 1, tmp_path)
    assert "package 'chai' is not found" in fix
    assert "NODE_PATH" in fix and "commands.pass_env" in fix
    # A file of the project itself that is missing is no dependency to install.
    assert (
        likely_fix_of("jest", "Cannot find module './helpers' from 'test.js'", 1, tmp_path) is None
    )

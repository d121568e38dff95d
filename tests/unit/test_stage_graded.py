"""A graded run is judged with the companion found for that very run: the run of the tree as
the change left it and the edits the overlay saw. Another run, even one whose object now sits
at a freed graded run's address, is judged on its own."""

from __future__ import annotations

from test_stage_reads import env_of

from autoresearch.engine.stage import Graded
from autoresearch.gate.testrun import FAILED, PASSED, TestRun

START = frozenset({"tests/test_calc.py::test_add", "tests/test_calc.py::test_mean"})


def run_of(passing: frozenset[str], failing: frozenset[str] = frozenset()) -> TestRun:
    return TestRun(
        command="pytest",
        ran="pytest",
        outcome=FAILED if failing else PASSED,
        cause=f"{len(failing)} tests failed" if failing else "all tests passed",
        passed=len(passing),
        failed=len(failing),
        skipped=0,
        errors=0,
        failing_ids=failing,
        passing_ids=passing,
        exit_code=1 if failing else 0,
        duration_s=0.1,
        tail="",
        source="pytest-stream",
    )


def test_a_graded_run_is_judged_with_its_own_companion(tmp_path):
    env = env_of(tmp_path, 1)
    graded = run_of(START)
    as_left = run_of(START - {"tests/test_calc.py::test_mean"})  # the change removed a test
    env._hold_graded(Graded(graded, {}, as_left, ()))
    verdict = env.judge_tests(graded, reference=run_of(START))
    assert not verdict.ok
    assert "the change's tests, as it left them" in verdict.reason
    assert env.as_left(graded) is as_left


def test_a_run_at_a_graded_runs_address_is_judged_on_its_own(tmp_path):
    # What a freed graded run leaves behind when the id alone is the key: its entry, found
    # by a later run whose object took its address. That run failed a test the start had
    # (its own failure, not the earlier change's), and its verdict must say so.
    env = env_of(tmp_path, 1)
    earlier = run_of(START)
    later = run_of(START - {"tests/test_calc.py::test_add"}, {"tests/test_calc.py::test_add"})
    env.__dict__["_graded"] = {id(later): Graded(earlier, {"t": "edited"}, earlier, ())}
    verdict = env.judge_tests(later, reference=run_of(START))
    assert not verdict.ok
    assert verdict.reason.startswith("tests fail: "), verdict.reason
    assert env.as_left(later) is later


def test_a_new_failing_test_of_an_ungraded_run_is_never_taken_for_the_others(tmp_path):
    # Judged as graded, a run's failing test the start never had is the as-left run's to
    # judge; a run that was not graded must fail on it.
    env = env_of(tmp_path, 1)
    passing_elsewhere = run_of(START | {"tests/test_new.py::test_new"})
    later = run_of(START, {"tests/test_new.py::test_new"})
    env.__dict__["_graded"] = {id(later): Graded(passing_elsewhere, {}, passing_elsewhere, ())}
    assert not env.judge_tests(later, reference=run_of(START)).ok

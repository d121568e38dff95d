"""The run a cycle's changes are held to: where the previous cycle left the suite, never a
run that did not get to its tests."""

from __future__ import annotations

from autoresearch import modes
from autoresearch.engine.stage import StageEnv
from autoresearch.gate.testrun import NOT_RUN, PASSED
from autoresearch.session import spec
from autoresearch.session.files import write_json
from autoresearch.session.record import SetupRecord


def run_record(outcome: str, passing: list[str]) -> dict:
    return {"outcome": outcome, "passed": len(passing), "passing_ids": passing}


def env_at(tmp_path, cycle: int) -> StageEnv:
    layout = modes.get("sweep").layout(tmp_path / "sessions" / "s")
    layout.root.mkdir(parents=True)
    baseline = run_record(PASSED, ["t::a"])
    record = SetupRecord(
        "s", "sweep", "0", "t", None, "pytest", None, "b", "x", baseline, "", None, ""
    )
    return StageEnv(layout, spec.SessionSpec({"mode": "sweep"}), record, cycle)


def test_a_previous_run_that_never_got_to_its_tests_is_passed_over(tmp_path):
    """Held to a run that names no passing test, a cycle could drop every test."""
    env = env_at(tmp_path, 3)
    write_json(env.layout.decision(1), {"cycle": 1, "tests": run_record(PASSED, ["t::a", "t::b"])})
    write_json(env.layout.decision(2), {"cycle": 2, "tests": run_record(NOT_RUN, [])})
    assert env.reference_tests().passing_ids == {"t::a", "t::b"}


def test_with_no_usable_run_since_setup_the_baseline_holds(tmp_path):
    env = env_at(tmp_path, 2)
    write_json(env.layout.decision(1), {"cycle": 1, "tests": run_record(NOT_RUN, [])})
    assert env.reference_tests().passing_ids == {"t::a"}

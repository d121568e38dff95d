"""Stop condition 7: a clean full cycle satisfies a qualitative goal; the judge panel needs two
consecutive majority "met" rounds."""

from __future__ import annotations

import pytest

from autoresearch.checks.judge import (
    GOAL_SATISFIED,
    CycleRecord,
    goal_satisfied,
    panel_agrees,
    panel_problem,
    panel_round,
)

CLEAN = CycleRecord(full_scope=True, severities=("low", "test-gap"), tests_pass=True)


def outcome(check):
    return check.satisfied, check.reason


def test_a_clean_full_cycle_satisfies_the_goal():
    satisfied, reason = outcome(goal_satisfied(CLEAN))
    assert satisfied and reason.startswith(f"{GOAL_SATISFIED}: ")


@pytest.mark.parametrize(
    "cycle,reason",
    [
        (
            CycleRecord(True, ("low", "medium"), True),
            "1 finding(s) at or above medium",
        ),
        (CycleRecord(False, (), True), "the cycle did not cover the whole scope"),
        (CycleRecord(True, (), False), "the tests fail"),
        (CycleRecord(True, (), True, guard_pass=False), "the guard fails"),
    ],
)
def test_the_goal_is_not_satisfied_while_something_remains(cycle, reason):
    assert outcome(goal_satisfied(cycle)) == (False, reason)


def test_stop_below_sets_the_severity_that_still_counts():
    cycle = CycleRecord(True, ("medium",), True)
    assert goal_satisfied(cycle, stop_below="high").satisfied
    assert not goal_satisfied(cycle, stop_below="medium").satisfied


def test_stop_below_refuses_an_unknown_severity():
    with pytest.raises(ValueError, match="stop_below 'severe' not allowed"):
        goal_satisfied(CLEAN, stop_below="severe")


def test_the_panel_needs_two_consecutive_majority_met_rounds():
    met = panel_round(["met", "met", "not met"])
    not_met = panel_round(["met", "not met", None])
    assert not panel_agrees([met])
    assert not panel_agrees([met, not_met])
    assert panel_agrees([not_met, met, met])
    assert goal_satisfied(CLEAN, rounds=[met, met]).satisfied
    assert outcome(goal_satisfied(CLEAN, rounds=[met, not_met])) == (
        False,
        "the judge panel said met in 0 of 2 rounds in a row",
    )


def test_an_unreadable_vote_counts_as_not_met():
    assert not panel_round(["met", None, None]).majority_met


def test_a_round_must_hold_one_vote_per_judge():
    with pytest.raises(ValueError, match="needs 3 votes, got 2"):
        panel_round(["met", "met"])


@pytest.mark.parametrize(
    "judge,can_call_model,problem",
    [
        (None, False, None),
        ({"panel": 3}, True, None),
        ({}, True, None),
        ({"panel": 4}, True, "judge.panel must be an odd number of at least 3, got 4"),
        ({"panel": 1}, True, "judge.panel must be an odd number of at least 3, got 1"),
        ({"panel": True}, True, "judge.panel must be an odd number of at least 3, got True"),
        (
            {"panel": 3},
            False,
            "judge.panel needs a model backend with a key; remove `judge` or set agent.backend",
        ),
    ],
)
def test_panel_problem_checks_the_spec(judge, can_call_model, problem):
    assert panel_problem(judge, can_call_model) == problem

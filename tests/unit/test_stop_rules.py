"""The stop cascade every cycle goes through, without Snakemake."""

from __future__ import annotations

import json
from pathlib import Path

from autoresearch.modes.sweep import Sweep
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.session.spec import SessionSpec

# A sweep decision.json as the loop writes it.
WRITTEN = json.loads((Path(__file__).parent / "decisions" / "sweep.json").read_text())


def test_ten_cycle_cap_when_nothing_else_is_set(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    for n in (8, 9):
        write_json(layout.decision(n), WRITTEN | {"cycle": n, "refactor_changes": 1})

    class Env:
        spec = SessionSpec(
            {"teams": ["red", "green", "refactor"], "max_cycles": None, "stop_below": None}
        )
        cycle = 10
        track = ""

        def __init__(self) -> None:
            self.layout = layout

        def finished(self, path):
            return json.loads(path.read_text())

    decision = {"broken": False, "refactor_changes": 1, "fixed": [1]}
    Sweep().apply_policy(Env(), decision)
    assert decision["stop"] and "cap of 10 cycles" in decision["reason"]
    Env.cycle = 9
    decision = {"broken": False, "refactor_changes": 1, "fixed": [1]}
    Sweep().apply_policy(Env(), decision)
    assert not decision["stop"]


class SweepEnv:
    """Cycle 2 of a sweep with Refactor, cycle 1's decision.json written as the loop does."""

    spec = SessionSpec({"teams": ["red", "green", "refactor"], "stop_below": None})
    cycle = 2
    track = ""

    def __init__(self, layout: SessionLayout) -> None:
        self.layout = layout

    def finished(self, path):
        return json.loads(path.read_text())


class TwoTeamEnv(SweepEnv):
    """The same cycle 2 of a sweep whose teams leave Refactor out."""

    spec = SessionSpec({"teams": ["red", "green"], "stop_below": None})


def second_cycle(tmp_path, first: dict, second: dict, env=SweepEnv) -> str | None:
    """The stop reason of cycle 2 (None: the sweep goes on)."""
    layout = SessionLayout(tmp_path / "s")
    write_json(layout.decision(1), WRITTEN | {"cycle": 1, "refactor_changes": 0} | first)
    return Sweep().loop_stop(env(layout), {"findings": 1, "refactor_changes": 0} | second)


FIX = [{"id": "F-001"}]


def test_two_cycles_of_a_refactor_that_changed_nothing_stop_a_sweep_that_still_fixes(tmp_path):
    reason = second_cycle(tmp_path, {"fixed": FIX}, {"fixed": FIX})
    assert reason == "two consecutive cycles in which Refactor changed nothing"


def test_a_refactor_with_no_file_it_may_change_does_not_count_towards_the_stop(tmp_path):
    # The ruff backend on a target without the formatter: Refactor never looked.
    assert second_cycle(tmp_path, {"fixed": FIX, "refactor_idle": True}, {"fixed": FIX}) is None
    assert second_cycle(tmp_path, {"fixed": FIX}, {"fixed": FIX, "refactor_idle": True}) is None


def test_with_an_idle_refactor_two_cycles_that_kept_no_fix_still_stop(tmp_path):
    reason = second_cycle(
        tmp_path, {"fixed": [], "refactor_idle": True}, {"fixed": [], "refactor_idle": True}
    )
    assert reason == "nothing fixable was left: two consecutive cycles in which Green kept no fix"


def test_without_refactor_two_cycles_that_kept_no_fix_stop(tmp_path):
    # Red found something in both cycles; Green kept none of it (skipped or reverted).
    reason = second_cycle(tmp_path, {"fixed": []}, {"fixed": []}, TwoTeamEnv)
    assert reason == "nothing fixable was left: two consecutive cycles in which Green kept no fix"
    assert second_cycle(tmp_path, {"fixed": FIX}, {"fixed": []}, TwoTeamEnv) is None
    assert second_cycle(tmp_path, {"fixed": []}, {"fixed": FIX}, TwoTeamEnv) is None


def test_without_refactor_a_refactor_count_of_zero_stops_nothing_while_green_fixes(tmp_path):
    assert second_cycle(tmp_path, {"fixed": FIX}, {"fixed": FIX}, TwoTeamEnv) is None


def test_a_refactor_that_changed_nothing_because_nothing_was_fixed_says_so(tmp_path):
    # Refactor had nothing to change: the reason is the dry loop's, not Refactor's.
    reason = second_cycle(tmp_path, {"fixed": []}, {"fixed": []})
    assert reason == "nothing fixable was left: two consecutive cycles in which Green kept no fix"
    reason = second_cycle(tmp_path, {"fixed": [], "findings": 0}, {"fixed": [], "findings": 0})
    assert reason == "nothing fixable was left: two consecutive cycles in which Red found nothing"
    # One cycle that found something is not two cycles of nothing found.
    reason = second_cycle(tmp_path, {"fixed": [], "findings": 2}, {"fixed": [], "findings": 0})
    assert reason == "nothing fixable was left: two consecutive cycles in which Green kept no fix"

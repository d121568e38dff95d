"""The stop cascade every cycle goes through, without Snakemake."""

from __future__ import annotations

from autoresearch.modes.sweep import Sweep
from autoresearch.spec import SessionSpec


def test_ten_cycle_cap_when_nothing_else_is_set():
    class Env:
        spec = SessionSpec(
            {"teams": ["red", "green", "refactor"], "max_cycles": None, "stop_below": None}
        )
        cycle = 10

        def previous_decision(self):
            return {"refactor_changes": 1, "fixed": [1]}

    decision = {"broken": False, "refactor_changes": 1, "fixed": [1]}
    Sweep().apply_policy(Env(), decision)
    assert decision["stop"] and "cap of 10 cycles" in decision["reason"]
    Env.cycle = 9
    decision = {"broken": False, "refactor_changes": 1, "fixed": [1]}
    Sweep().apply_policy(Env(), decision)
    assert not decision["stop"]

"""Stop rules of the sweep loop (seed 000): when the session ends, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .stage import StageEnv

DEFAULT_CYCLE_CAP = 10


def cycle_cap(spec: dict[str, Any], default: int = DEFAULT_CYCLE_CAP) -> int:
    return spec.get("max_cycles") or default


def sweep_policy(env: StageEnv, decision: dict[str, Any]) -> None:
    prev = env.previous_decision()
    refactor_on = "refactor" in env.spec["teams"]
    reason = None
    if decision.get("session_stop"):
        reason = decision["session_stop"]
    elif decision["broken"]:
        reason = "tests broke in this cycle and reverting did not bring them back"
    elif (
        refactor_on
        and prev
        and decision["refactor_changes"] == 0
        and (prev.get("refactor_changes") == 0)
    ):
        reason = "two consecutive cycles in which Refactor changed nothing"
    elif not refactor_on and prev and not decision["fixed"] and not prev.get("fixed"):
        reason = "two consecutive cycles in which Green skipped every finding"
    elif env.cycle >= cycle_cap(env.spec):
        reason = (
            f"max_cycles reached ({env.spec['max_cycles']})"
            if env.spec.get("max_cycles")
            else f"cap of {DEFAULT_CYCLE_CAP} cycles reached (set max_cycles to run longer)"
        )
    decision["stop"] = reason is not None
    decision["reason"] = reason

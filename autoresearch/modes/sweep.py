"""Sweep: general quality, no number; cycles until the goal is satisfied (stop 7), the work
dries up, or the cap."""

from __future__ import annotations

from typing import Any

from autoresearch.engine.cycle_step import CycleStep
from autoresearch.engine.stage import StageEnv

from .base import Mode


class Sweep(Mode):
    name = "sweep"
    decision_extra = CycleStep
    qualitative = True  # no number: stop 7 ends the sweep once its goal is satisfied

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """Two cycles in a row in which Refactor changed nothing (without a Refactor team:
        in which Green fixed nothing) mean the sweep has run dry. A Refactor that had no
        file it may change (`refactor_idle`: the ruff backend on a target that does not use
        the formatter) did not look: such a cycle is judged by Green, as without Refactor."""
        previous = self.previous_step(env)
        if previous is None:
            return None
        prev: CycleStep = previous.extra  # type: ignore[assignment]
        dry = not decision["fixed"] and not prev.fixed
        idle = decision.get("refactor_idle") or prev.refactor_idle
        if env.spec.refactor_on and not idle:
            if decision["refactor_changes"] == 0 and prev.refactor_changes == 0:
                # With nothing fixed there was nothing for Refactor to change: say why.
                if dry:
                    return nothing_fixable(decision, prev)
                return "two consecutive cycles in which Refactor changed nothing"
        elif dry:
            return nothing_fixable(decision, prev)
        return None


def nothing_fixable(decision: dict[str, Any], prev: CycleStep) -> str:
    """The stop reason of two cycles in a row that kept no fix."""
    if not decision["findings"] and not prev.findings:
        return "nothing fixable was left: two consecutive cycles in which Red found nothing"
    return "nothing fixable was left: two consecutive cycles in which Green kept no fix"

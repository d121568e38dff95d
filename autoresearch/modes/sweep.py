"""Sweep: general quality, no number; cycles until the goal is satisfied (stop 7), the work
dries up, or the cap."""

from __future__ import annotations

from typing import Any

from ..stage import StageEnv
from .base import Mode


class Sweep(Mode):
    name = "sweep"
    qualitative = True  # no number: stop 7 ends the sweep once its goal is satisfied
    sections_read_decisions = False  # session.md has no sweep section of its own

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """Two cycles in a row in which Refactor changed nothing (without a Refactor team:
        in which Green fixed nothing) mean the sweep has run dry."""
        prev = env.previous_decision()
        if prev is None:
            return None
        if env.spec.refactor_on:
            if decision["refactor_changes"] == 0 and prev.get("refactor_changes") == 0:
                return "two consecutive cycles in which Refactor changed nothing"
        elif not decision["fixed"] and not prev.get("fixed"):
            return "two consecutive cycles in which Green skipped every finding"
        return None

"""What a narrow cycle adds to its decision: the cycle's record (cycle_step.CycleStep) and
the goal's measurement with the angle rules' state, under the key `narrow`."""

from __future__ import annotations

from dataclasses import dataclass

from autoresearch.engine.cycle_step import CycleStep
from autoresearch.engine.loop import Extra, record_field


@dataclass(frozen=True)
class GoalStep(Extra):
    """The goal measured after the cycle, and where the angles stand (angles.step)."""

    angle: str  # the angle this cycle worked on
    value: float | None  # None: the measurement failed (`error` says why)
    samples: list[float]
    error: str | None
    baseline: float
    previous: float | None  # as the previous cycle left the branch
    current: float | None  # as this cycle leaves the branch (after a revert: the previous)
    delta_baseline: float | None
    delta_previous: float | None
    met: bool
    regressed: bool  # worse than the baseline
    reverted: bool  # the regression was undone
    kept_fixes: int
    regressions: int  # on this angle
    idle: int  # cycles in a row on this angle that kept nothing
    exhausted_now: str | None  # why this angle ended in this cycle
    exhausted: list[str]
    next_angle: str | None  # None: every angle is exhausted


@dataclass(frozen=True, kw_only=True)
class NarrowStep(CycleStep):
    narrow: GoalStep = record_field(GoalStep)

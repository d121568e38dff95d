"""Narrow mode's angle rules, as pure functions of the previous cycle's record.

Three consecutive regressions, or two consecutive cycles in which Green keeps nothing,
exhaust an angle; the next angle by priority takes over. All state lives in each cycle's
decision.json (key "narrow"), so a rerun recomputes the same answer from disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .goal import Angle
from .step import GoalStep

MAX_REGRESSIONS = 3
MAX_IDLE = 2


@dataclass
class AngleState:
    """Where the angles stand when a cycle starts."""

    angle: str | None  # the angle this cycle works on; None when every angle is exhausted
    regressions: int = 0  # consecutive regressions on `angle` so far
    idle: int = 0  # consecutive cycles in which Green kept nothing on `angle`
    exhausted: list[str] = field(default_factory=list)


def state_before(angles: list[Angle], prev: GoalStep | None) -> AngleState:
    """The state entering a cycle, from the previous cycle's narrow record (None: cycle 1)."""
    if prev is None:
        return AngleState(angles[0].name)
    same = prev.next_angle == prev.angle
    return AngleState(
        angle=prev.next_angle,
        regressions=prev.regressions if same else 0,
        idle=prev.idle if same else 0,
        exhausted=list(prev.exhausted),
    )


@dataclass
class Step:
    """What one cycle did to the angle state."""

    regressions: int
    idle: int
    exhausted_now: str | None  # why the angle is exhausted, if it is
    exhausted: list[str]
    next_angle: str | None


def step(angles: list[Angle], state: AngleState, regressed: bool, kept: int) -> Step:
    """The angle rules above, applied to one cycle."""
    regressions = state.regressions + 1 if regressed else 0
    idle = state.idle + 1 if kept == 0 else 0
    why = None
    if regressions >= MAX_REGRESSIONS:
        why = f"{regressions} consecutive regressions"
    elif idle >= MAX_IDLE:
        why = f"{idle} consecutive cycles in which Green kept nothing"
    exhausted = list(state.exhausted)
    nxt = state.angle
    if why and state.angle is not None:
        exhausted.append(state.angle)
        nxt = next((a.name for a in angles if a.name not in exhausted), None)
    return Step(regressions, idle, why, exhausted, nxt)


def angle_statuses(angles: list[Angle], last: GoalStep | None) -> dict[str, str]:
    """not-started | in-progress | exhausted | goal-met, from the last cycle's record."""
    status = {a.name: "not-started" for a in angles}
    if last is None:
        status[angles[0].name] = "in-progress"
        return status
    for name in last.exhausted:
        status[name] = "exhausted"
    if last.met:
        status[last.angle] = "goal-met"
    elif last.next_angle:
        status[last.next_angle] = "in-progress"
    return status

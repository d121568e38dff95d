"""Stop condition 7, a qualitative goal satisfied: the predicate on a finished cycle and the
optional judge panel's maths.

Rule: a session whose goal has no number stops when one full cycle over the whole scope ends with
no Red finding at or above `stop_below` (default medium) and the tests and guard pass. With
`judge: {panel: N}` it also needs N independent "met / not met" votes per round (N odd, at least
3; an unreadable vote counts as not met), a majority "met" in each of the last two rounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoresearch.checks.severity import THRESHOLDS, at_or_above

DEFAULT_STOP_BELOW = "medium"
DEFAULT_PANEL = 3
REQUIRED_ROUNDS = 2  # consecutive rounds with a majority "met"
GOAL_SATISFIED = "goal satisfied"


def panel_problem(judge: Mapping[str, Any] | None, can_call_model: bool) -> str | None:
    """Why the spec's `judge:` cannot be used, one line naming the key; None when it can."""
    if judge is None:
        return None
    panel = judge.get("panel", DEFAULT_PANEL)
    if isinstance(panel, bool) or not isinstance(panel, int) or panel < 3 or panel % 2 == 0:
        return f"judge.panel must be an odd number of at least 3, got {panel!r}"
    if not can_call_model:
        return "judge.panel needs a model backend with a key; remove `judge` or set agent.backend"
    return None


@dataclass(frozen=True)
class PanelRound:
    votes: tuple[str | None, ...]  # one per judge; None = unreadable

    @property
    def met(self) -> int:
        return sum(1 for v in self.votes if v == "met")

    @property
    def majority_met(self) -> bool:
        return 2 * self.met > len(self.votes)


def panel_round(votes: Sequence[str | None], panel: int = DEFAULT_PANEL) -> PanelRound:
    if len(votes) != panel:
        raise ValueError(f"a round of a {panel}-judge panel needs {panel} votes, got {len(votes)}")
    return PanelRound(tuple(votes))


def panel_agrees(rounds: Sequence[PanelRound]) -> bool:
    """Whether the last REQUIRED_ROUNDS rounds each had a majority "met"."""
    last = rounds[-REQUIRED_ROUNDS:]
    return len(rounds) >= REQUIRED_ROUNDS and all(r.majority_met for r in last)


@dataclass(frozen=True)
class CycleRecord:
    full_scope: bool  # the cycle covered the whole scope
    severities: tuple[str, ...]  # of the findings Red reported in the cycle
    tests_pass: bool
    guard_pass: bool | None = None  # None: the session has no guard


@dataclass(frozen=True)
class GoalCheck:
    satisfied: bool
    reason: str  # GOAL_SATISFIED and why, or what is still missing


def goal_satisfied(
    cycle: CycleRecord,
    stop_below: str = DEFAULT_STOP_BELOW,
    rounds: Sequence[PanelRound] | None = None,
) -> GoalCheck:
    """Stop condition 7 on a finished cycle; `rounds` is the judge panel's history when the spec
    has `judge:` (None when it has not)."""
    if stop_below not in THRESHOLDS:
        raise ValueError(f"stop_below {stop_below!r} not allowed; expected one of {THRESHOLDS}")
    if not cycle.full_scope:
        return GoalCheck(False, "the cycle did not cover the whole scope")
    blocking = [s for s in cycle.severities if at_or_above(s, stop_below)]
    if blocking:
        return GoalCheck(False, f"{len(blocking)} finding(s) at or above {stop_below}")
    if not cycle.tests_pass:
        return GoalCheck(False, "the tests fail")
    if cycle.guard_pass is False:
        return GoalCheck(False, "the guard fails")
    if rounds is not None and not panel_agrees(rounds):
        streak = 0
        for r in reversed(rounds):
            if not r.majority_met:
                break
            streak += 1
        return GoalCheck(
            False, f"the judge panel said met in {streak} of {REQUIRED_ROUNDS} rounds in a row"
        )
    # Said whole: a sweep's spec may state no goal, and "goal satisfied" alone reads as
    # if it had (a clean target stops after one cycle).
    passed = "the tests and the guard pass" if cycle.guard_pass else "the tests pass"
    panel = "; the judge panel said met two rounds in a row" if rounds is not None else ""
    return GoalCheck(
        True,
        f"{GOAL_SATISFIED}: a cycle over the whole scope found nothing at or above "
        f"{stop_below} and {passed}{panel}",
    )

"""When a lens stops, and what it works on next: coverage counters, the saturation rule, the
security lens's next-vector picker and the scenario lens's next-dimension picker.

All are pure functions of the iteration log (the current run's rows, oldest first), so a rerun
that replays the log makes the same choices.

Stop rule, in order: the iteration cap; then, while some category has never been tried, go on;
then stop when the last `window` iterations in a row added nothing new ("saturated"), or when
every category is saturated on its own (its last `window` iterations added nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autoresearch.checks.finding_schema import OWASP_2021, SCENARIO_DIMENSIONS, STRIDE

DEFAULT_WINDOW = 3
MAX_SAME_IN_A_ROW = 3  # scenario: never the same dimension more than this many times in a row
SYSTEM_ASSET = "system"  # the STRIDE asset when the threat model names no critical asset


@dataclass(frozen=True)
class Iteration:
    category: str  # the vector or dimension this iteration worked on
    new: int  # findings it added that were new (accepted, not duplicates)


@dataclass(frozen=True)
class CategoryCount:
    iterations: int
    new: int


def coverage(log: Sequence[Iteration], categories: Sequence[str]) -> dict[str, CategoryCount]:
    """Iterations and new findings per category, in the categories' order (unlisted ones after)."""
    order = list(categories) + sorted({i.category for i in log} - set(categories))
    return {
        c: CategoryCount(
            sum(1 for i in log if i.category == c), sum(i.new for i in log if i.category == c)
        )
        for c in order
    }


def untested(log: Sequence[Iteration], categories: Sequence[str]) -> list[str]:
    tried = {i.category for i in log}
    return [c for c in categories if c not in tried]


def nothing_new_streak(log: Sequence[Iteration]) -> int:
    """How many of the latest iterations in a row added nothing new."""
    streak = 0
    for iteration in reversed(log):
        if iteration.new:
            break
        streak += 1
    return streak


def is_saturated(log: Sequence[Iteration], category: str, window: int = DEFAULT_WINDOW) -> bool:
    """The category's own last `window` iterations all added nothing new."""
    own = [i for i in log if i.category == category]
    return len(own) >= window and not any(i.new for i in own[-window:])


def stop_reason(
    log: Sequence[Iteration],
    categories: Sequence[str],
    cap: int,
    window: int = DEFAULT_WINDOW,
    stop_when_all_tested: bool = False,
) -> str | None:
    """Why the lens stops now, or None to go on (see the module docstring for the rule).

    `stop_when_all_tested`: for lenses whose categories are a finite to-do list (debug's leads),
    trying each once is enough.
    """
    if window < 1:
        raise ValueError(f"saturation window must be at least 1, got {window}")
    if len(log) >= cap:
        return f"iteration cap ({cap}) reached"
    if untested(log, categories):
        return None
    if stop_when_all_tested:
        return "every category tested"
    if nothing_new_streak(log) >= window:
        return f"saturated: {window} iterations in a row added nothing new"
    if categories and all(is_saturated(log, c, window) for c in categories):
        return "every category saturated"
    return None


# --- security: the next untested vector ---

LATER_VECTORS = ("dependencies", "config", "business-logic")


@dataclass(frozen=True)
class Vector:
    kind: str  # stride | owasp | dependencies | config | business-logic
    name: str = ""  # STRIDE letter or OWASP id
    asset: str = ""  # STRIDE vectors only

    @property
    def key(self) -> str:
        """How the vector is written in the iteration log's category column."""
        if self.kind == "stride":
            return f"stride:{self.asset}:{self.name}"
        if self.kind == "owasp":
            return f"owasp:{self.name}"
        return self.kind

    def describe(self) -> str:
        if self.kind == "stride":
            return f"STRIDE {self.name} ({STRIDE[self.name]}) on the asset {self.asset!r}"
        if self.kind == "owasp":
            return f"OWASP {self.name}:2021 {OWASP_2021[self.name]}"
        return self.kind.replace("-", " ")


def security_vectors(critical_assets: Sequence[str]) -> list[Vector]:
    """Every vector in priority order: STRIDE per critical asset, OWASP A01–A10, then the rest."""
    assets = list(critical_assets) or [SYSTEM_ASSET]
    vectors = [Vector("stride", letter, asset) for asset in assets for letter in STRIDE]
    vectors += [Vector("owasp", owasp_id) for owasp_id in OWASP_2021]
    vectors += [Vector(kind) for kind in LATER_VECTORS]
    return vectors


def next_security_vector(log: Sequence[Iteration], critical_assets: Sequence[str]) -> Vector:
    """The first untested vector in priority order; once all are tried, the least-tried one
    (ties: the one that found more, then priority order) — the cap and saturation end the run."""
    vectors = security_vectors(critical_assets)
    counts = coverage(log, [v.key for v in vectors])
    for vector in vectors:
        if counts[vector.key].iterations == 0:
            return vector
    ranked = sorted(
        enumerate(vectors),
        key=lambda iv: (counts[iv[1].key].iterations, -counts[iv[1].key].new, iv[0]),
    )
    return ranked[0][1]


@dataclass(frozen=True)
class SecurityCoverage:
    owasp: tuple[str, ...]  # OWASP ids tried, in A01…A10 order
    stride: tuple[str, ...]  # STRIDE letters tried on any asset, in S…E order

    def __str__(self) -> str:
        return f"OWASP {len(self.owasp)}/{len(OWASP_2021)}, STRIDE {len(self.stride)}/{len(STRIDE)}"


def security_coverage(
    log: Sequence[Iteration], reach: tuple[frozenset[str], frozenset[str]] | None = None
) -> SecurityCoverage:
    """Categories tried, read from the vectors in the log (what was worked on, found or not).
    `reach`: the OWASP ids and STRIDE letters the auditor has any check for (None: all, a
    model reads the code); a category it cannot check is not covered by trying it."""
    keys = {i.category for i in log}
    owasp_reach, stride_reach = reach or (frozenset(OWASP_2021), frozenset(STRIDE))
    owasp = tuple(o for o in OWASP_2021 if f"owasp:{o}" in keys and o in owasp_reach)
    letters = {k.rsplit(":", 1)[1] for k in keys if k.startswith("stride:")} & stride_reach
    return SecurityCoverage(owasp, tuple(s for s in STRIDE if s in letters))


# --- scenario: the least-covered dimension ---


def next_dimension(log: Sequence[Iteration], window: int = DEFAULT_WINDOW) -> str | None:
    """The least-covered dimension (fewest new situations, then fewest iterations, then table
    order) that is not saturated and was not the last MAX_SAME_IN_A_ROW iterations' dimension;
    None when every dimension is saturated (the run is done)."""
    counts = coverage(log, SCENARIO_DIMENSIONS)
    candidates = [d for d in SCENARIO_DIMENSIONS if not is_saturated(log, d, window)]
    if not candidates:
        return None
    recent = [i.category for i in log[-MAX_SAME_IN_A_ROW:]]
    if len(recent) == MAX_SAME_IN_A_ROW and len(set(recent)) == 1:
        repeated = recent[0]
        candidates = [d for d in candidates if d != repeated] or [
            d for d in SCENARIO_DIMENSIONS if d != repeated
        ]
        if not candidates:
            return None
    return min(
        candidates,
        key=lambda d: (counts[d].new, counts[d].iterations, SCENARIO_DIMENSIONS.index(d)),
    )

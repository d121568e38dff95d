"""The one severity scale the lenses share, most severe first, and comparisons on it."""

from __future__ import annotations

SEVERITIES = ("critical", "high", "medium", "low", "info")
# `fail_on` and `stop_below` thresholds; `none` means no finding ever crosses it.
THRESHOLDS = ("critical", "high", "medium", "low", "none")


def rank(severity: str) -> int:
    """0 for critical … 4 for info; anything unknown ranks below info (sweep's test-gap, typos)."""
    try:
        return SEVERITIES.index(severity.strip().lower())
    except ValueError:
        return len(SEVERITIES)


def at_or_above(severity: str, threshold: str) -> bool:
    """Whether `severity` is as severe as `threshold` or worse; nothing is at or above `none`."""
    threshold = threshold.strip().lower()
    if threshold == "none":
        return False
    if threshold not in SEVERITIES:
        raise ValueError(f"threshold {threshold!r} not allowed; expected one of {THRESHOLDS}")
    return rank(severity) <= SEVERITIES.index(threshold)


def weight(severity: str) -> float:
    """1.0 for critical down to 0.0 for info (and anything unknown), in equal steps."""
    return max(0.0, 1.0 - rank(severity) / (len(SEVERITIES) - 1))

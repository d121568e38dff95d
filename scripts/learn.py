"""rules/learn.smk: what the learn lens's checkpoint waits for (its job: scripts/step.py)."""

from __future__ import annotations

from . import cycle

LOOP = "learn"


def write_inputs(name: str, iteration: str) -> list[str]:
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return cycle.red_inputs(name, int(iteration), loop=LOOP)

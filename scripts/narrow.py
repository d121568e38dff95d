"""rules/narrow.smk: the goal-progress plot, drawn once the loop has stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.jobs import run_stage
from autoresearch.layout import session_layout


def final_decision(name: str, checkpoints: Any) -> str:
    """The decision that stopped the loop: the plot is drawn once, from every cycle."""
    return modes.get("narrow").final_decision(session_layout(name), checkpoints)


def goal_progress_plot(wildcards: Any, output: Any, log: Any) -> None:
    run_stage(wildcards, log, lambda env, mode: mode.plot(env, Path(output[0])))

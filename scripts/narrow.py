"""rules/narrow.smk: the goal-progress plot, drawn once the loop has stopped (it waits for
scripts/common.py's final_decision)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage


def goal_progress_plot(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    run_stage(wildcards, input, output, log, lambda env, mode: mode.plot(env, Path(output[0])))

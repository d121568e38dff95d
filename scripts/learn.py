"""rules/learn.smk: the learn lens's one checkpoint per planned doc."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.jobs import run_stage

from . import cycle

LOOP = "learn"


def write_inputs(name: str, iteration: str) -> list[str]:
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return cycle.red_inputs(name, int(iteration), loop=LOOP)


def write(wildcards: Any, output: Any, log: Any) -> None:
    """Write, check, keep or drop the doc; the stop rule; the logs; decision.json last."""
    from autoresearch import loop
    from autoresearch.modes.learn import stages

    def judge(env, mode) -> loop.Judged:
        decision = stages.write(env, mode, Path(output.record))
        return loop.Judged(decision, lambda d: stages.log_row(env, mode, d))

    run_stage(
        wildcards,
        log,
        lambda env, mode: loop.decide(env, mode, lambda: judge(env, mode), Path(output.decision)),
    )

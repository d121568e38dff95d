"""rules/fix.smk: the fix lens's attempt and the decide checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.jobs import run_stage

from . import cycle

LOOP = "fixes"


def attempt_inputs(name: str, iteration: str) -> list[str]:
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return cycle.red_inputs(name, int(iteration), loop=LOOP)


# --- jobs (stage modules imported on first use, as in scripts/cycle.py) ---------------


def attempt(wildcards: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.fix import stages

    run_stage(
        wildcards,
        log,
        lambda env, mode: stages.attempt(
            env, mode, Path(output.attempt), Path(output.record), Path(output.patch)
        ),
    )


def decide(wildcards: Any, output: Any, log: Any) -> None:
    """Check, count, keep or reset; the stop rules; the logs; decision.json last."""
    from autoresearch import loop
    from autoresearch.modes.fix import report, stages

    def judge(env, mode) -> loop.Judged:
        def results(rec) -> None:
            mode.log_iteration(env, rec, env.stage_record("attempt")["usage"])
            mode.writer(env.record).text(Path(output.results), report.evaluation_md(rec))

        return loop.Judged(stages.decide(env, mode), results)

    run_stage(
        wildcards,
        log,
        lambda env, mode: loop.decide(env, mode, lambda: judge(env, mode), Path(output.decision)),
    )

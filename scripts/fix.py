"""rules/fix.smk: the fix lens's attempt and the decide checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.jobs import run_stage
from autoresearch.loop import write_decision

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
    from autoresearch.modes.fix import report, stages

    def body(env, mode) -> None:
        rec = stages.decide(env, mode)
        mode.apply_policy(env, rec)
        mode.log_iteration(env, rec, env.stage_record("attempt")["usage"])
        writer = mode.writer(env.record)
        writer.text(Path(output.results), report.evaluation_md(rec))
        mode.write_summary(env, rec)
        write_decision(Path(output.decision), rec, writer)
        env.log(
            f"fix {env.cycle}: {rec['status']} ({rec['before']} → {rec['after']})"
            + (f"; stopping: {rec['reason']}" if rec["stop"] else "")
        )

    run_stage(wildcards, log, body)

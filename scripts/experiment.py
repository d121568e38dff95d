"""rules/experiment.smk: propose, the decide checkpoint, the report and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.jobs import run_stage
from autoresearch.layout import session_layout

from . import cycle

LOOP = "iterations"


def propose_inputs(name: str, iteration: str) -> list[str]:
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return cycle.red_inputs(name, int(iteration), loop=LOOP)


def final_decision(name: str, checkpoints: Any) -> str:
    """The decision that stopped the loop: report and plot are made once, from it."""
    return modes.get("experiment").final_decision(session_layout(name, LOOP), checkpoints)


# --- jobs (stage modules imported on first use, as in scripts/cycle.py) ---------------


def propose(wildcards: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.experiment import stages

    run_stage(
        wildcards,
        log,
        lambda env, mode: stages.propose(
            env, Path(output.proposal), Path(output.record), Path(output.patch)
        ),
    )


def decide(wildcards: Any, output: Any, log: Any) -> None:
    """Measure and keep or reset; the stop rules; the logs; decision.json last."""
    from autoresearch.modes.experiment import stages

    def body(env, mode) -> None:
        rec = stages.decide(env)
        mode.apply_policy(env, rec)
        stages.write_iteration(env, rec, Path(output.results))
        mode.write_summary(env, rec)
        stages.finish(env, rec, Path(output.decision))

    run_stage(wildcards, log, body)


def report(wildcards: Any, output: Any, log: Any) -> None:
    run_stage(wildcards, log, lambda env, mode: mode.write_report(env, Path(output[0])))


def plot(wildcards: Any, output: Any, log: Any) -> None:
    run_stage(wildcards, log, lambda env, mode: mode.write_plot(env, Path(output[0])))

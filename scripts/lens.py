"""rules/lens.smk: the loop lenses' red and check, every lens's report; chained sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage

from .common import made_by


def report_inputs(name: str, checkpoints: Any) -> list[str]:
    """What the lens's report waits for, as the lens says."""
    checkpoints.session.get(name=name)
    mode, layout = made_by(name, "findings.md")
    return mode.report_inputs(layout, checkpoints)


# --- jobs (stage modules imported on first use, as in scripts/cycle.py) ---------------


def red(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.lens import stages

    run_stage(
        wildcards, input, output, log, lambda env, mode: stages.red(env, mode, Path(output[0]))
    )


def report(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.lens import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.report(env, mode, Path(output.findings), Path(output.handoff)),
    )

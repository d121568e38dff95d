"""rules/fix.smk: the fix lens's attempt (its decide checkpoint's job: scripts/step.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage

# --- jobs (stage modules imported on first use, as in scripts/cycle.py) ---------------


def attempt(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.fix import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.attempt(
            env, mode, Path(output.attempt), Path(output.record), Path(output.patch)
        ),
    )

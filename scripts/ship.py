"""rules/ship.smk: the ship lens's prepare checkpoint and the approved shipping step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.engine.jobs import run_stage
from autoresearch.session import spec
from autoresearch.session.layout import session_layout


def execute_inputs(name: str) -> list[str]:
    """`done` and the approval file; refused outright without `approve: manual`."""
    layout = session_layout(name)
    frozen = spec.load_frozen(layout.spec)
    return modes.get(frozen.mode).execute_inputs(layout, frozen)


def execute(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.ship import stages

    run_stage(
        wildcards, input, output, log, lambda env, mode: stages.execute(env, mode, Path(output[0]))
    )

"""rules/predict.smk: the personas' analyses and debate rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.engine.jobs import run_stage
from autoresearch.session import spec
from autoresearch.session.layout import session_layout


def debate_inputs(name: str, number: int) -> list[str]:
    """Every persona's previous round."""
    layout = session_layout(name)
    frozen = spec.load_frozen(layout.spec)
    return modes.get(frozen.mode).debate_inputs(layout, frozen, number)


def analysis(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.predict import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.analysis(env, mode, wildcards.persona, Path(output[0])),
    )


def debate(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.predict import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.debate(
            env, mode, wildcards.persona, int(wildcards.round), Path(output[0])
        ),
    )

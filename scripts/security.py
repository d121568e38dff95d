"""rules/security.smk: the security lens's optional fix stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage


def fix(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.security import fix as fixing

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: fixing.run(env, mode, Path(output.md), Path(output.data)),
    )

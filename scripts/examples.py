"""rules/examples.smk: a bundled example turned into a throwaway git repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import Declared, run_job
from autoresearch.session.examples import make_example_repo


def example_repo(input: Any, output: Any, log: Any) -> None:
    run_job(
        log[0],
        lambda: make_example_repo(Path(input[0]), Path(output.ready)),
        Declared.of(input, output, log),
    )

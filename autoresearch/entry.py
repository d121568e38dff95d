"""The one place Snakemake scripts come in: open the stage's context, run, log failures."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .stage import StageEnv
from .workflow_support import SESSIONS


def stage_env(smk: Any) -> StageEnv:
    wildcards = dict(smk.wildcards.items())
    log = Path(smk.log[0])
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # a rerun starts a fresh log
    return StageEnv.open(
        Path(SESSIONS) / wildcards["name"],
        cycle=wildcards.get("cycle", 0),
        track=wildcards.get("hid", ""),
        log_file=log,
    )


def run_logged(log_path: str, body: Callable[[], None]) -> None:
    """Run `body`; on failure put the traceback in the rule's log before re-raising."""
    try:
        body()
    except Exception:
        with open(log_path, "a") as handle:
            handle.write(traceback.format_exc())
        raise


def stage_main(smk: Any, body: Callable[[StageEnv], None]) -> None:
    def run() -> None:
        body(stage_env(smk))

    run_logged(smk.log[0], run)

"""The one way a rule's job runs: a fresh log, the body, and one path for failures.

A `UserError` (a spec, a session, a broad stage, an API failure that names what to do)
reaches the terminal as its message alone; every failure's traceback goes to the rule's
log. Jobs run in Snakemake's own process (`run:` blocks with `force-use-threads`): a
`script:` job would start a new Python and import Snakemake and this package per stage.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import modes, spec, timings
from .errors import UserError
from .layout import SESSIONS
from .modes.base import Mode
from .record import load_record
from .stage import StageEnv


def run_job(log_path: str | Path, body: Callable[[], Any]) -> None:
    """Run `body` with a fresh log; on failure log the traceback, say why, re-raise."""
    log = Path(log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # a rerun starts a fresh log
    try:
        body()
    except Exception as err:
        with log.open("a") as handle:
            handle.write(traceback.format_exc())
            if isinstance(err, UserError):
                handle.write(f"{err}\n")
        if isinstance(err, UserError):
            print(f"\n{err}\n", file=sys.stderr, flush=True)
        raise


def open_stage(wildcards: Mapping[str, str], log_path: str | Path) -> tuple[StageEnv, Mode]:
    """The stage's context and its session's mode, from the rule's wildcards."""
    root = Path(SESSIONS).absolute() / wildcards["name"]
    frozen = spec.load_frozen(root / "session.yaml")
    mode = modes.get(frozen.mode)
    layout = mode.layout(root)
    env = StageEnv(
        layout=layout,
        spec=frozen,
        record=load_record(layout),
        cycle=int(wildcards.get("cycle", 0)),
        track=wildcards.get("hid", ""),
        log_file=Path(log_path),
    )
    return env, mode


def run_stage(wildcards: Any, log: Any, body: Callable[[StageEnv, Mode], Any]) -> None:
    """A stage job: `body(env, mode)` under `run_job`, with the rule's wildcards and log;
    its wall time and CPU go to timings.tsv."""
    values = dict(wildcards.items())

    def go() -> None:
        env, mode = open_stage(values, log[0])
        with timings.timed(env.layout, _stage_name(log[0]), env.track, env.cycle):
            body(env, mode)

    run_job(log[0], go)


def _stage_name(log_path: str) -> str:
    """The rule a job ran, from its log's place: sessions/<name>/logs/<rule>/... ."""
    parts = Path(log_path).parts
    return parts[parts.index("logs") + 1].removesuffix(".log") if "logs" in parts else "?"

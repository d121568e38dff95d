"""The one way a rule's job runs: a fresh log, the body, and one path for failures.

A `UserError` (a spec, a session, a broad stage, an API failure that names what to do)
reaches the terminal as its message alone; every failure's traceback goes to the rule's
log. Jobs run in Snakemake's own process (`run:` blocks with `force-use-threads`): a
`script:` job would start a new Python and import Snakemake and this package per stage.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.engine import timings
from autoresearch.engine.stage import StageEnv
from autoresearch.errors import UserError
from autoresearch.modes.base import Mode
from autoresearch.session import files, spec
from autoresearch.session.layout import SESSIONS
from autoresearch.session.record import load_record
from autoresearch.views import journal


class Stopped(Exception):
    """A job stopped by a UserError whose message is already on the console: Snakemake's own
    report of it says no more than that (scripts.common's log filter leaves it out)."""

    MARK = "the reason is given above"


@dataclass(frozen=True)
class Declared:
    """The files a rule declared for its job (`input`, `output`, `log`), relative to the
    workflow's folder as Snakemake names them: all a job may read of its session
    (tests/e2e/test_job_inputs.py traces that it reads no other)."""

    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    logs: tuple[str, ...] = ()

    @classmethod
    def of(cls, input: Iterable[Any], output: Iterable[Any], log: Iterable[Any]) -> Declared:
        """From a `run:` block's `input`, `output` and `log` (a named list of one value
        may hold a list: `input.lanes`)."""

        def flat(files: Iterable[Any]) -> tuple[str, ...]:
            out: list[str] = []
            for item in files:
                out.extend(flat(item) if isinstance(item, list | tuple) else [str(item)])
            return tuple(out)

        return cls(flat(input), flat(output), flat(log))


# The job this thread is running (jobs are threads of Snakemake's process), with what its
# rule declared; None outside a job (Snakemake's own work, an input function).
RUNNING: ContextVar[tuple[str, Declared] | None] = ContextVar("running_job", default=None)


def run_job(
    log_path: str | Path, body: Callable[[], Any], declared: Declared | None = None
) -> None:
    """Run `body` with a fresh log; on failure log the traceback, say why, re-raise.

    A UserError is said once, by us: Snakemake would print it again in its RuleException
    and once more with the log, where its traceback goes."""
    log = Path(log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # a rerun starts a fresh log
    running = RUNNING.set((str(log_path), declared or Declared(logs=(str(log_path),))))
    try:
        with files.reads_once():
            body()
    except Exception as err:
        with log.open("a") as handle:
            handle.write(traceback.format_exc())
            if isinstance(err, UserError):
                handle.write(f"{err}\n")
        # The profile keeps Snakemake's job blocks quiet, its "log:" line too: say where it is.
        if isinstance(err, UserError):
            text = str(err) if str(log_path) in str(err) else f"{err}\nlog: {log_path}"
            print(f"\n{text}\n", file=sys.stderr, flush=True)
            raise Stopped(f"{type(err).__name__}: {Stopped.MARK} (log: {log_path})") from None
        print(f"\na job failed ({type(err).__name__}); traceback: {log_path}", file=sys.stderr)
        raise
    finally:
        RUNNING.reset(running)


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
        tamper_profile=mode.tamper_profile,
    )
    return env, mode


def run_stage(
    wildcards: Any, input: Any, output: Any, log: Any, body: Callable[[StageEnv, Mode], Any]
) -> None:
    """A stage job: `body(env, mode)` under `run_job`, with the rule's wildcards, its
    declared files and log, between two progress lines (Snakemake's own counter restarts
    every cycle); its wall time and CPU go to timings.tsv."""
    values = dict(wildcards.items())

    def job() -> None:
        env, mode = open_stage(values, log[0])
        stage = stage_name(log[0], mode.setup.rule_prefix)
        where = progress_label(env, mode, stage)
        kept = kept_so_far(env, mode)
        began = session_began(env)
        progress_line(f"{where} started", kept, began)
        try:
            with timings.timed(env.layout, stage, env.track, env.cycle):
                before = _stamp(env)
                body(env, mode)
                if env.cycle and _stamp(env) not in (before, None):
                    journal.note_decision(env.layout, env.cycle, env.track)
                    kept = kept_so_far(env, mode)  # only a decision changes the count
        except BaseException:
            progress_line(f"{where} failed", kept, began)
            raise
        progress_line(f"{where} finished", kept, began)

    run_job(log[0], job, Declared.of(input, output, log))


def _stamp(env: StageEnv) -> tuple[int, int] | None:
    """Which version of the cycle's decision.json is there (None: it does not exist): its
    inode and modification time. The time alone can repeat: a rewrite in the clock tick of
    the last write keeps it to the nanosecond, and the decision would be left out of the
    index. Each write is a rename of a new file, made while the old one still exists, so
    its inode always differs."""
    try:
        found = env.layout.decision(env.cycle, env.track).stat()
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns


def stage_name(log_path: str | Path, rule_prefix: str = "") -> str:
    """The stage, from the rule's log path (`logs/<rule>/[<track>/]NNN.log`), without the
    mode's rule prefix (`experiment_propose` is the stage `propose`)."""
    parts = Path(log_path).parts
    after = parts[parts.index("logs") + 1 :] if "logs" in parts else parts[-1:]
    name = after[0] if len(after) > 1 else Path(after[0]).stem
    return name.removeprefix(rule_prefix) if rule_prefix else name


def progress_label(env: StageEnv, mode: Mode, stage: str) -> str:
    """`[foo] cycle 3/10 green` (`[foo h2] ...` for a track; no loop part outside one)."""
    who = f"[{env.layout.name}{' ' + env.track if env.track else ''}]"
    if not env.cycle:
        return f"{who} {stage}"
    cap = mode.cycle_cap(env.spec)
    return f"{who} {mode.views.step_word} {env.cycle}{f'/{cap}' if cap else ''} {stage}"


def kept_so_far(env: StageEnv, mode: Mode) -> str:
    try:
        return f", {mode.views.kept_count(env.layout)} kept so far"
    except (OSError, ValueError, KeyError):
        return ""  # a half-written session: the line still says where the run is


def session_began(env: StageEnv) -> float:
    """When the session was set up (epoch seconds): a resumed session's clock goes on from
    there, not from this run's start. Older records have no time: setup.json's is used."""
    if env.record.started:
        return dt.datetime.fromisoformat(env.record.started).timestamp()
    return env.layout.setup.stat().st_mtime


def progress_line(text: str, kept: str, began: float) -> None:
    elapsed = max(0, int(time.time() - began))
    clock = f"{elapsed // 3600:02d}:{elapsed % 3600 // 60:02d}:{elapsed % 60:02d}"
    print(f"{text} ({clock} elapsed{kept})", file=sys.stderr, flush=True)

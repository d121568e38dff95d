"""rules/common.smk: session names, a session's mode, the loop's final decision, the
per-session run lock taken at start, and the one-line report of a user error raised while
Snakemake builds the DAG."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.agents.backends import api_key
from autoresearch.engine import finished_jobs, rate_timers
from autoresearch.engine.jobs import Stopped
from autoresearch.errors import SessionError, UserError
from autoresearch.modes.base import Mode
from autoresearch.safety import commands
from autoresearch.safety.words import a_or_an
from autoresearch.session import slurm, spec
from autoresearch.session.layout import SESSIONS, SessionLayout, rel, session_layout
from autoresearch.session.spec import SESSION_NAME
from autoresearch.views import preload

NAME_PATTERN = SESSION_NAME.pattern.strip("^$")
SESSION_IN_PATH = re.compile(rf"^{SESSIONS}/({NAME_PATTERN})/")


def override_origins(workflow: Any) -> dict[str, str]:
    """Which command-line option set each key of Snakemake's `config`: `--configfile PATH`
    (the last file that sets it) or `--config`, so an error names the right one."""
    import yaml

    settings = workflow.config_settings
    origins: dict[str, str] = {}
    layers = []
    for path in settings.configfiles or ():
        try:
            layers.append((f"--configfile {path}", yaml.safe_load(open(path)) or {}))
        except (OSError, yaml.YAMLError):
            continue  # Snakemake itself reports an unreadable config file
    layers.append(("--config", dict(settings.config or {})))
    for origin, layer in layers:
        _leaves(layer, "", origin, origins)
    return origins


def _leaves(layer: Any, prefix: str, origin: str, out: dict[str, str]) -> None:
    if not isinstance(layer, dict):
        return
    for key, value in layer.items():
        dotted = f"{prefix}{key}"
        out[dotted] = origin
        if isinstance(value, dict) and value:
            _leaves(value, dotted + ".", origin, out)


def mode_rules(basedir: str) -> list[str]:
    """Each mode's own rules file, `rules/<mode>.smk`, in the registry's order, for every
    mode that has one (sweep runs rules/cycle.smk; the loop lenses rules/lens.smk)."""
    folder = Path(basedir) / "rules"
    return [str(folder / f"{m}.smk") for m in modes.MODES if (folder / f"{m}.smk").exists()]


def layout_of(name: str) -> SessionLayout:
    """Paths of session `name` that every mode shares (its loop folder aside)."""
    return session_layout(name)


def mode_and_layout(
    name: str, read_spec: spec.SpecReader = spec.load_frozen
) -> tuple[Mode, SessionLayout]:
    """The mode session `name` was frozen with (its session.yaml, as `read_spec` reads it:
    the run's FrozenSpecs when Snakemake asks), and its layout."""
    layout = layout_of(name)
    mode = modes.get(read_spec(layout.spec).mode)
    return mode, mode.layout(layout.root)


def state_of(name: str, loop: str | None, track: str = "") -> dict[str, Any]:
    """What a stage's job reads of session `name` besides its stage's own files: the
    frozen spec and the setup record (jobs.open_stage), the mode's own setup record when
    it wrote one (experiment-setup.json), the history of `loop` (of `track`): its
    index and the summaries kept beside it (tally.py), once a step has been decided, and
    the session's tested trees. With no `loop` (a rule made once at the end), every loop's
    history in the session.

    All `ancient`: they are written at setup, or appended to by each deciding job, and
    none is a reason to run a finished stage again (the workflow profile reruns on
    mtime). The history is declared only once it exists: no rule makes it
    (journal.note_decision appends to it), so Snakemake cannot be asked for it."""
    from snakemake.io import ancient

    from autoresearch.engine import tally

    layout = layout_of(name)
    files: dict[str, Any] = {"session_spec": layout.spec, "setup_record": layout.setup}
    if layout.experiment_setup.exists():
        files["mode_setup"] = layout.experiment_setup
    if loop is None:
        indexes = sorted(layout.root.glob("*/decisions.jsonl"))
        indexes += sorted(layout.root.glob("*/h*/decisions.jsonl"))
    else:
        indexes = [session_layout(name, loop).decisions_index(track)]
    history = [p for index in indexes for p in [index, *tally.saved_beside(index)] if p.exists()]
    if history:
        files["history"] = [ancient(rel(p)) for p in history]
    if loop is not None and layout.test_runs.exists():
        # The session's tested trees (gate/tested.py): a loop's stage looks up a tree there
        # before running the tests on it, and adds the runs it makes.
        files["tested"] = layout.test_runs
    return {key: ancient(rel(p)) if isinstance(p, Path) else p for key, p in files.items()}


def final_decision_of(
    name: str,
    checkpoints: Any,
    product: str,
    track: str = "",
    read_spec: spec.SpecReader = spec.load_frozen,
) -> str:
    """The decision that ended session `name`'s loop (broad: `track`'s), asked of the
    session's own mode: what is drawn once from every step (`product`: a report, a plot,
    a track's end, security's fixes) waits for it. The setup checkpoint first: the mode
    is frozen there."""
    checkpoints.session.get(name=name)
    mode, layout = made_by(name, product, track, read_spec)
    return mode.final_decision(layout, checkpoints, track)


def made_by(
    name: str, product: str, track: str = "", read_spec: spec.SpecReader = spec.load_frozen
) -> tuple[Mode, SessionLayout]:
    """Session `name`'s mode and layout, once that mode is known to make `product` (a
    path in the session folder): one mode's file asked of another mode's session is
    refused in one line before any job runs, not after its loop ran for nothing."""
    mode, layout = mode_and_layout(name, read_spec)
    made = {p.relative_to(layout.root).as_posix() for p in mode.views.end_files(layout, track)}
    if product not in made:
        offered = sorted(
            p.relative_to(layout.root).as_posix() + ("/" if p.is_dir() else "")
            for p in mode.views.end_files(layout, track)
            if p.relative_to(layout.root).parts[0] not in ("logs", "benchmarks")
        )
        raise SessionError(
            f"{SESSIONS}/{name}/{product}: {a_or_an(mode.name)} session makes no {product} "
            f"(it makes {', '.join(offered)})"
        )
    return mode, layout


def start_run(workflow: Any, held: list[Any]) -> None:
    """When a run starts: hold each session's run lock, and make one Ctrl-C end the
    commands the jobs are running (they run in sessions of their own, out of its reach)."""
    try:
        hold_session_locks(workflow, held)
    except UserError as err:  # reported in its one line, as an input function's is
        USER_ERRORS[f"{type(err).__name__}: {err}"] = str(err)
        raise
    commands.end_commands_on_interrupt()
    # A finished cycle's jobs leave Snakemake's DAG: the process stays flat however long
    # the session runs (engine/finished_jobs.py).
    finished_jobs.install(workflow)
    # The run exits when its last job ends, not at the next tick of Snakemake's rate timer.
    rate_timers.install(getattr(workflow, "scheduler", None))
    # This process draws the session's end: a waiting job may import its libraries ahead.
    preload.arm()
    # Jobs submitted to a cluster get our environment, the key included; each job takes it
    # out of its own when it makes its client. A local run's jobs are our own threads.
    api_key.keep_in_environment(bool(workflow.non_local_exec))


def hold_session_locks(workflow: Any, held: list[Any]) -> None:
    """Refuse to run a session that another live run is working on.

    An flock dies with its process, so a kill -9 never leaves a stale lock behind
    (Snakemake's own lock does; the workflow profile turns that one off). The open lock
    files go into `held`, which lives as long as the workflow.
    """
    names = set()
    for job in workflow.dag.needrun_jobs():
        for path in job.output:
            match = SESSION_IN_PATH.match(str(path))
            if match:
                names.add(match.group(1))
    for name in sorted(names):
        lock_path = layout_of(name).run_lock
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a+")  # noqa: SIM115 - held until the process exits
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            raise SessionError(
                f"session {name!r} is already being run by {owner}; this run stopped "
                "without touching it. Wait for that run to end (or stop it) and run again."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"snakemake pid {os.getpid()}\n")
        handle.flush()
        held.append(handle)
    # With the locks held no live run owns these sessions: any cluster job still working
    # on them was left by a killed run and would commit beside this one.
    executor = getattr(workflow.executor_plugin, "name", "local")
    slurm.cancel_leftover_jobs(sorted(names), Path.cwd(), executor)


# --- user errors raised in input functions ----------------------------------------------
# Snakemake wraps any exception an input function raises in an InputFunctionException and
# prints it with the rule, the wildcards and a traceback. For a UserError the user needs
# its one line only: the input functions remember the message, and a filter on
# Snakemake's logger prints that line instead (`--verbose` still logs the traceback).

USER_ERRORS: dict[str, str] = {}  # Snakemake's text of the wrapped error -> our line
RAISED_IN_FILE = re.compile(r"^\w+Error in file .*, line \d+:$", re.MULTILINE)
MISSING_DONE = re.compile(r"MissingRuleException:\s*No rule to produce ((?:\S*/)?done)\b")


def one_line_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate an input function so that a UserError it raises is reported alone."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as err:
            USER_ERRORS[f"{type(err).__name__}: {err}"] = str(err)
            raise

    return wrapper


class UserErrorFilter(logging.Filter):
    """Turns Snakemake's report of a wrapped UserError into the UserError's own line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        if Stopped.MARK in record.getMessage():
            return False  # run_job said the error itself: Snakemake's copy is left out
        missing = MISSING_DONE.search(record.getMessage())
        if missing:
            # Snakemake normalised `sessions/../done` or `sessions/a/../../x/done` before
            # looking for a rule: the name had a '..' in it.
            record.msg, record.args = (
                f"Error: {missing.group(1)!r} is not a session: "
                + (
                    "run sessions/NAME/done, NAME of letters, digits, '.', '_' and '-' "
                    "(no '/', no '..'), starting with a letter or digit"
                ),
                (),
            )
        if USER_ERRORS:
            text = record.getMessage()
            # An input function's error comes wrapped; one `onstart` raised comes as
            # "SessionError in file .../common.smk, line N:", the message, then its stack.
            if (
                "InputFunctionException" in text
                or "WorkflowError" in text
                or RAISED_IN_FILE.search(text)
            ):
                for wrapped, line in USER_ERRORS.items():
                    if wrapped in text or line in text:
                        record.msg, record.args = f"Error: {line}", ()
                        break
        return True


class SchedulerChatter(logging.Filter):
    """Leaves out the scheduler's "Select jobs to execute..." and "Execute N jobs..." lines:
    two per job, a third of the console, said before each of our own progress lines. No
    `--quiet` category covers them; `--verbose` (debug) keeps them."""

    LINE = re.compile(r"^(Select jobs to execute\.\.\.|Execute \d+ jobs\.\.\.)$")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or logging.getLogger().isEnabledFor(logging.DEBUG):
            return True
        return not self.LINE.match(str(record.msg))


def install_error_filter() -> None:
    """Once per process (the Snakefile may be parsed more than once)."""
    logger = logging.getLogger("snakemake.logging")
    if not any(isinstance(f, UserErrorFilter) for f in logger.filters):
        logger.addFilter(UserErrorFilter())
    if not any(isinstance(f, SchedulerChatter) for f in logger.filters):
        logger.addFilter(SchedulerChatter())

"""What the Snakefile's input functions and hooks call: cheap reads of session files.

Completed cycles are read from disk rather than asked of the checkpoint one by one:
asking `.get()` for every cycle makes a no-op rerun quadratic (DESIGN §7).
"""

from __future__ import annotations

import fcntl
import json
import re
from pathlib import Path
from typing import Any

import yaml

from . import session as session_setup
from . import slurm
from .layout import session_layout
from .spec import SESSION_NAME, SpecError, check_session_name, read_yaml, resolve_target

SESSIONS = "sessions"
NAME_PATTERN = SESSION_NAME.pattern.strip("^$")
EXAMPLES = Path(SESSIONS) / "_examples"
_held_locks: list[Any] = []  # open lock files, held for the life of this process


class SessionError(Exception):
    """A session cannot start; printed for the user without a traceback."""


def session_inputs(name: str, basedir: str, overrides: dict[str, Any]) -> dict[str, str]:
    layout = session_layout(SESSIONS, name)
    if layout.spec.exists():
        return {}
    raw = Path(basedir) / "config" / "sessions" / f"{name}.yaml"
    target = overrides.get("target")
    if target is None and raw.is_file():
        try:
            target = read_yaml(raw, "the session spec").get("target")
        except SpecError as err:
            raise SessionError(str(err)) from None
    if target:
        example = _example_of(resolve_target(str(target)))
        if example and not (EXAMPLES / f"{example}.ready").exists():
            # The example repository is made by a rule; the setup job checks it then.
            return {"example": str(EXAMPLES / f"{example}.ready")}
    try:
        session_setup.preflight(name, Path(basedir), overrides)
    except SpecError as err:
        raise SessionError(f"session {name!r} cannot start: {err}") from None
    return {}


def check_name(name: str) -> None:
    try:
        check_session_name(name)
    except SpecError as err:
        raise SessionError(str(err)) from None
    raise SessionError(f"no session rule matches {name!r}")


def _example_of(target: Path) -> str | None:
    try:
        rel = target.resolve().relative_to(EXAMPLES.resolve())
    except ValueError:
        return None
    return rel.parts[0] if rel.parts else None


def version_verdict(stamp: str, installed: str) -> str:
    """Seed 000's resume rule: 'same', 'upgrade' (minor/patch), 'major' or 'older'."""

    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    old, new = parts(stamp), parts(installed)
    if new == old:
        return "same"
    if new < old:
        return "older"
    return "major" if new[0] != old[0] else "upgrade"


def check_version(name: str, overrides: dict[str, Any]) -> None:
    """Refuse to resume a session stamped by a newer autoresearch, or across a MAJOR
    version without `--config allow_major_upgrade=true` (no one is there to ask)."""
    from . import __version__

    setup = session_layout(SESSIONS, name).setup
    if not setup.exists():
        return
    stamp = json.loads(setup.read_text())["version"]
    verdict = version_verdict(stamp, __version__)
    if verdict == "older":
        raise SessionError(
            f"session {name!r} was made by autoresearch {stamp}, newer than the installed "
            f"{__version__}; upgrade autoresearch before resuming it"
        )
    if verdict == "major" and not overrides.get("allow_major_upgrade"):
        raise SessionError(
            f"session {name!r} was made by autoresearch {stamp}; the installed {__version__} "
            "is a new MAJOR version whose protocol may differ. Read the changelog, then resume "
            "with --config allow_major_upgrade=true"
        )


def check_agent_ready(frozen: dict[str, Any]) -> None:
    """A resumed session still needs its key: say so before any stage runs."""
    try:
        session_setup.check_agent(frozen)
    except SpecError as err:
        raise SessionError(str(err)) from None


def red_inputs(name: str, cycle: int) -> list[str]:
    layout = session_layout(SESSIONS, name)
    inputs = [str(layout.spec)]
    if cycle > 1:
        previous = layout.decision(cycle - 1)
        if not previous.exists():
            inputs.append(str(previous))
    return inputs


def frozen_spec(name: str) -> dict[str, Any]:
    return yaml.safe_load(session_layout(SESSIONS, name).spec.read_text())


def evaluate_inputs(name: str, cycle: str) -> dict[str, str]:
    base = Path(SESSIONS) / name / "cycles" / cycle
    inputs = {"green": str(base / "green.json")}
    if "refactor" in frozen_spec(name)["teams"]:
        inputs["refactor"] = str(base / "refactor.json")
    return inputs


def next_open_cycle(name: str, track: str = "") -> int:
    """The first cycle with no decision yet, or the one whose decision stopped the loop."""
    layout = session_layout(SESSIONS, name)
    cycle = 1
    while True:
        path = layout.decision(cycle, track)
        if not path.exists() or json.loads(path.read_text()).get("stop"):
            return cycle
        cycle += 1


SESSION_IN_PATH = re.compile(rf"^{SESSIONS}/({NAME_PATTERN})/")


def hold_session_locks(workflow) -> None:
    """Refuse to run a session that another live run is working on.

    An flock dies with its process, so a kill -9 never leaves a stale lock behind
    (Snakemake's own lock does; the workflow profile turns that one off).
    """
    names = set()
    for job in workflow.dag.needrun_jobs():
        for path in job.output:
            match = SESSION_IN_PATH.match(str(path))
            if match:
                names.add(match.group(1))
    for name in sorted(names):
        lock_path = Path(SESSIONS) / name / ".run.lock"
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
        import os

        handle.seek(0)
        handle.truncate()
        handle.write(f"snakemake pid {os.getpid()}\n")
        handle.flush()
        _held_locks.append(handle)
    # With the locks held no live run owns these sessions: any cluster job still working
    # on them was left by a killed run and would commit beside this one.
    executor = getattr(workflow.executor_plugin, "name", "local")
    slurm.cancel_leftover_jobs(sorted(names), Path.cwd(), executor)

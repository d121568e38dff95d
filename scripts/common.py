"""rules/common.smk: session names, and the per-session run lock taken at start."""

from __future__ import annotations

import fcntl
import os
import re
from typing import Any

from autoresearch import commands
from autoresearch.errors import SessionError
from autoresearch.layout import SESSIONS, SessionLayout, session_layout
from autoresearch.spec import SESSION_NAME

NAME_PATTERN = SESSION_NAME.pattern.strip("^$")
SESSION_IN_PATH = re.compile(rf"^{SESSIONS}/({NAME_PATTERN})/")


def layout_of(name: str) -> SessionLayout:
    """Paths of session `name` that every mode shares (its loop folder aside)."""
    return session_layout(name)


def start_run(workflow: Any, held: list[Any]) -> None:
    """When a run starts: hold each session's run lock, and make one Ctrl-C end the
    commands the jobs are running (they run in sessions of their own, out of its reach)."""
    hold_session_locks(workflow, held)
    commands.end_commands_on_interrupt()


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

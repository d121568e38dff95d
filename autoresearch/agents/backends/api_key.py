"""The model API's key: read from the environment, and taken out of it where the client is made.

Every child process gets an allowlisted environment (`child_env`), so the key never
reaches one. Taking it out of `os.environ` as well means that code in this process that
starts a program some other way (a library, a future helper) cannot hand it on either.
The one exception is a process that submits jobs to a cluster: Snakemake passes its
environment to each job, and the job takes the key out of its own environment when it
makes its client (`keep_in_environment`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

SECRET_NAMES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


@dataclass(frozen=True)
class Credentials:
    api_key: str | None = None
    auth_token: str | None = None

    @property
    def present(self) -> bool:
        return bool(self.api_key or self.auth_token)


_lock = threading.Lock()
_taken = Credentials()
_keep = False


def read() -> Credentials:
    """The key as this process has it: from the environment, or as taken earlier."""
    global _taken
    with _lock:
        here = {name: os.environ.get(name) for name in SECRET_NAMES}
        if any(here.values()):
            _taken = Credentials(here["ANTHROPIC_API_KEY"], here["ANTHROPIC_AUTH_TOKEN"])
        return _taken


def take() -> Credentials:
    """The key, read once more and then removed from `os.environ` (where the client is
    made); left there only in a process that submits cluster jobs."""
    found = read()
    with _lock:
        if not _keep:
            for name in SECRET_NAMES:
                os.environ.pop(name, None)
    return found


def keep_in_environment(keep: bool) -> None:
    """Whether `take` leaves the key in `os.environ` (the workflow's onstart: True where
    jobs are submitted to a cluster, which hands them our environment)."""
    global _keep
    with _lock:
        _keep = keep


def forget() -> None:
    """Drop the key this process took (a test's next case starts without one)."""
    global _taken
    with _lock:
        _taken = Credentials()

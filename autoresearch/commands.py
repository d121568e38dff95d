"""Running the spec's shell commands (tests, linter, measure, guard): timeout, scrubbed env."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# Never handed to a command the agent can cause to run: the target's code is untrusted.
SECRET_PREFIXES = ("ANTHROPIC_",)
DEFAULT_TAIL_CHARS = 4000


@dataclass
class CommandResult:
    command: str
    exit_code: int | None  # None when it timed out
    output: str  # stdout and stderr, interleaved
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, chars: int = DEFAULT_TAIL_CHARS) -> str:
        if len(self.output) <= chars:
            return self.output
        return "[... output cut ...]\n" + self.output[-chars:]


def scrubbed_env(extra_secrets: list[str] | None = None) -> dict[str, str]:
    """The current environment less ANTHROPIC_* and any variable the spec names."""
    drop = set(extra_secrets or [])
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(SECRET_PREFIXES) and key not in drop
    }


def run(
    command: str,
    cwd: Path | str,
    timeout_s: float = 600,
    extra_secrets: list[str] | None = None,
    stdout_only: bool = False,
) -> CommandResult:
    """Run a shell command from the spec in `cwd`; kill its whole process group on timeout."""
    start = time.monotonic()
    proc = subprocess.Popen(
        command,
        shell=True,
        cwd=str(cwd),
        env=scrubbed_env(extra_secrets),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if stdout_only else subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
        return CommandResult(command, proc.returncode, output, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return CommandResult(command, None, output or "", time.monotonic() - start, timed_out=True)

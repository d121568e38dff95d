"""Slurm jobs that a killed run left working on a session: found and cancelled before a
new run of that session starts, so that they never commit beside the new run's jobs."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

# squeue's names for states in which a job can no longer start or run code. Anything
# else (pending, running, completing, suspended, requeued, held...) still can.
ENDED = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "TIMEOUT",
    }
)
# A cancelled job gets SIGTERM, then SIGKILL after the cluster's KillWait (30 s by
# default), then its epilog runs: generous, since the next run must not start before.
CANCEL_TIMEOUT_S = 300.0
COMMAND_TIMEOUT_S = 60.0


class SlurmError(RuntimeError):
    """Leftover jobs that did not end: the new run must not start beside them."""


@dataclass(frozen=True)
class LeftoverJob:
    job_id: str
    state: str
    sessions: tuple[str, ...]


def _slurm(*args: str) -> str | None:
    """A Slurm command's output, or None when it is missing, fails or hangs."""
    try:
        proc = subprocess.run(
            args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def sessions_of(batch_script: str) -> set[str]:
    """Sessions named by the `--target-jobs` of a Snakemake job script.

    Snakemake writes each job it submits as `--target-jobs 'rule:name=s,cycle=001' ...`;
    every rule that works on a session has the `name` wildcard.
    """
    names: set[str] = set()
    try:
        words = shlex.split(batch_script, comments=True)
    except ValueError:
        return names
    in_targets = False
    for word in words:
        if word == "--target-jobs":
            in_targets = True
        elif word.startswith("-"):
            in_targets = False
        elif in_targets:
            _, _, wildcards = word.partition(":")
            for pair in wildcards.split(","):
                key, _, value = pair.partition("=")
                if key == "name" and value:
                    names.add(value)
    return names


def _same_dir(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


def leftover_jobs(sessions: Iterable[str], workdir: Path) -> list[LeftoverJob]:
    """This user's Slurm jobs, not yet ended, that work on one of `sessions` in `workdir`.

    Call it only while holding the sessions' run locks: then no live run owns them.
    """
    wanted = set(sessions)
    if not wanted or shutil.which("squeue") is None:
        return []
    listing = _slurm("squeue", "--me", "--noheader", "--format=%i|%T|%Z")
    if listing is None:
        return []
    found = []
    for line in listing.splitlines():
        job_id, _, rest = line.strip().partition("|")
        state, _, job_dir = rest.partition("|")
        if not job_id or state in ENDED or not _same_dir(job_dir, workdir):
            continue
        script = _slurm("scontrol", "write", "batch_script", job_id, "-")
        names = sessions_of(script or "") & wanted
        if names:
            found.append(LeftoverJob(job_id, state, tuple(sorted(names))))
    return found


def _still_active(job_ids: set[str]) -> set[str]:
    listing = _slurm("squeue", "--me", "--noheader", "--states=all", "--format=%i|%T")
    if listing is None:
        return set(job_ids)  # cannot tell: keep waiting
    active = set()
    for line in listing.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id in job_ids and state not in ENDED:
            active.add(job_id)
    return active


def cancel(
    jobs: list[LeftoverJob], timeout_s: float = CANCEL_TIMEOUT_S, poll_s: float = 0.5
) -> None:
    """scancel the jobs and wait until none of them can run code any more."""
    ids = {job.job_id for job in jobs}
    if not ids:
        return
    _slurm("scancel", *sorted(ids))
    deadline = time.monotonic() + timeout_s
    while True:
        active = _still_active(ids)
        if not active:
            return
        if time.monotonic() >= deadline:
            listed = " ".join(sorted(active))
            raise SlurmError(
                f"Slurm jobs {listed} left by an earlier run are still active "
                f"{timeout_s:.0f} s after scancel; end them (scancel {listed}) and run again."
            )
        time.sleep(poll_s)


def worth_asking(workdir: Path, executor: str) -> bool:
    """Whether Slurm may hold jobs of this working directory: this run submits to it, or
    an earlier one did (the executor plugin keeps its logs under .snakemake/slurm_logs).

    Not asked otherwise: a squeue that cannot reach its controller takes seconds.
    """
    return executor == "slurm" or (workdir / ".snakemake" / "slurm_logs").is_dir()


def cancel_leftover_jobs(
    sessions: Iterable[str],
    workdir: Path,
    executor: str,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> list[LeftoverJob]:
    """Cancel what a killed run left queued or running for `sessions`; return those jobs.

    `executor` is the name of this run's Snakemake executor ("slurm", "local", ...).

    Cancelled, not waited for: by the time a run holds its locks it has already planned
    to redo every stage whose outputs were missing, from that stage's start commit, so a
    leftover job that went on would only commit beside it (and could run for hours). A
    job that ended before the rerun started is kept: it recorded its own outputs.
    """
    if not worth_asking(workdir, executor):
        return []
    jobs = leftover_jobs(sessions, workdir)
    for job in jobs:
        log(
            f"session {', '.join(job.sessions)}: cancelling Slurm job {job.job_id} "
            f"({job.state}) left by a run that was killed; this run redoes its stage"
        )
    cancel(jobs)
    return jobs

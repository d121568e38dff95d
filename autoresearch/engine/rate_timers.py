"""Snakemake's job-rate re-checks as daemon timers: a finished run exits when its last job
ends, not up to a second later.

Snakemake limits job submissions (`--max-jobs-per-timespan`, 100 a second by default): each
pass of its scheduler that leaves jobs running arms a `threading.Timer` that wakes the
scheduler again one timespan later. Those timers are not daemon threads, so when the
workflow is done the interpreter waits for the last one to fire before it exits: up to a
second at the end of every run, after `done` is written (profiled on the experiment
bench: the main thread sat in `threading._shutdown` for the whole second). A session's
run is a chain of short runs in tests and a serial tail after the last step in a session.

`install` replaces the scheduler's `_schedule_reevalutation` (Snakemake's spelling) on the
one scheduler that runs, never on Snakemake's class, with the same timer marked daemon: the
limit still holds while the run lasts (the timer still wakes the scheduler), and nothing
is left to wait for at exit. If the pinned Snakemake lacks the names relied on (`RELIED_ON`),
`install` changes nothing: the run only ends up to a second later.
"""

from __future__ import annotations

import threading
from typing import Any

RELIED_ON = ("_schedule_reevalutation", "_open_jobs")


def install(scheduler: Any) -> bool:
    """Make `scheduler`'s rate re-check timers daemon threads; False when it has no such
    timers to replace (another Snakemake), and then nothing is changed."""
    if scheduler is None or not all(hasattr(scheduler, name) for name in RELIED_ON):
        return False

    def schedule_reevaluation(delay: float) -> None:
        # What Snakemake's own method does (release the scheduler's semaphore after
        # `delay`), in a thread that does not hold the interpreter open at exit.
        timer = threading.Timer(delay, scheduler._open_jobs.release)
        timer.daemon = True
        timer.start()

    scheduler._schedule_reevalutation = schedule_reevaluation
    return True

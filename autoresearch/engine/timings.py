"""What each stage cost in time: wall seconds, this job's own CPU, and its commands' CPU.

Snakemake's `benchmark:` samples the whole process, which for in-process (`run:`) jobs
means every thread at once; these figures are the job's own. They go to timings.tsv, one
appended row per stage run. Commands' CPU is read from the process's reaped children, so
with several jobs at once (parallel broad tracks) it mixes theirs.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager

from autoresearch.session.files import append_line, locked
from autoresearch.session.layout import SessionLayout

COLUMNS = ["stage", "track", "cycle", "wall_s", "cpu_s", "commands_cpu_s", "finished"]


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def timed(layout: SessionLayout, stage: str, track: str, cycle: int) -> Iterator[None]:
    wall, own, children = (
        time.monotonic(),
        _cpu(resource.RUSAGE_THREAD),
        _cpu(resource.RUSAGE_CHILDREN),
    )
    finished = "no"
    try:
        yield
        finished = "yes"
    finally:
        row = [
            stage,
            track,
            f"{cycle:03d}",
            f"{time.monotonic() - wall:.4f}",
            f"{_cpu(resource.RUSAGE_THREAD) - own:.4f}",
            f"{_cpu(resource.RUSAGE_CHILDREN) - children:.4f}",
            finished,
        ]
        with locked(layout.journal_lock):
            if not layout.timings.exists():
                append_line(layout.timings, "\t".join(COLUMNS))
            append_line(layout.timings, "\t".join(row))

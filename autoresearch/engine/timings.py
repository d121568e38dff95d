"""What each stage cost in time: wall seconds, this job's own CPU, and its commands' CPU.

Snakemake's `benchmark:` samples the whole process, which for in-process (`run:`) jobs
means every thread at once; these figures are the job's own. They go to timings.tsv, one
appended row per stage run. Commands' CPU is read from the process's reaped children and,
for commands run in a bwrap jail (whose processes ours never reap, so rusage never sees
them), from what the jail's shell reported (commands.jailed_cpu); `jailed_cpu_s` is that
part of `commands_cpu_s`, counted per job. With several jobs at once (parallel broad tracks)
the reaped children's CPU still mixes theirs: rusage knows no thread's children.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager

from autoresearch.safety import commands
from autoresearch.session.files import append_line, locked
from autoresearch.session.layout import SessionLayout

COLUMNS = [
    "stage",
    "track",
    "cycle",
    "wall_s",
    "cpu_s",
    "commands_cpu_s",
    "finished",
    "jailed_cpu_s",
]
# The header of a timings.tsv written before the jailed CPU was counted: a resumed session
# goes on in it, with rows of its width.
_BEFORE_JAILED = COLUMNS[:-1]


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
    # The jailed commands of this job alone: jobs are threads of one process.
    with commands.jailed_cpu.counting() as jailed:
        try:
            yield
            finished = "yes"
        finally:
            in_jail = jailed()
            row = [
                stage,
                track,
                f"{cycle:03d}",
                f"{time.monotonic() - wall:.4f}",
                f"{_cpu(resource.RUSAGE_THREAD) - own:.4f}",
                f"{_cpu(resource.RUSAGE_CHILDREN) - children + in_jail:.4f}",
                finished,
                f"{in_jail:.4f}",
            ]
            with locked(layout.journal_lock):
                if not layout.timings.exists():
                    append_line(layout.timings, "\t".join(COLUMNS))
                elif _header(layout.timings) == _BEFORE_JAILED:
                    row = row[: len(_BEFORE_JAILED)]
                append_line(layout.timings, "\t".join(row))


def _header(path) -> list[str]:
    with open(path) as handle:
        return handle.readline().rstrip("\n").split("\t")

"""The incumbent's pool: which of its runs from earlier comparisons the next one may use.

A run counts when it was taken of the same commit (since it became the incumbent) on the
same machine class, and after the last comparison whose drift test dropped the pool: there
the machine was seen to have moved, and the runs before it describe a machine that is gone.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def machine_class() -> str:
    """What makes runs comparable: the architecture, the CPU model and how many cores (a
    cluster's nodes of one kind share it; a laptop and a server do not)."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            model = next(
                (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                "",
            )
    except OSError:
        pass
    cpu = model or platform.processor()
    return f"{platform.system()} {platform.machine()} {cpu} x{os.cpu_count()}"


def earlier_runs(iterations: list[dict[str, Any]], commit: str, machine: str) -> list[list[float]]:
    """The incumbent `commit`'s runs from the sequential comparisons in `iterations` (the
    decided iteration records, oldest first; a batch's candidates each count), one block per
    comparison: the blocks' spread is what tells the random-effects pool how far to trust
    them (incumbent.py)."""
    pool: list[list[float]] = []
    for rec in iterations:
        if rec.get("start_commit") != commit:
            continue
        for entry in rec.get("candidates") or [rec]:
            step = entry.get("sequential")
            if not step or entry.get("machine") != machine:
                continue
            fresh = [float(v) for v in entry.get("incumbent_samples") or []]
            if fresh:
                pool = [fresh] if step.get("pool_dropped") else [*pool, fresh]
    return pool

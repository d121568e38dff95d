"""A loop's running counts (cycles, fixes kept, where it stopped), kept up as it grows.

Every stage's progress lines ("5 kept so far") and the DAG's search for the next open
cycle ask for these counts several times a cycle. Counting them from every decision made
each cycle slower than the last, so they are saved beside the decisions index with the
index's length and end at the time: a count whose index has since only grown reads just
the new lines, and one whose index was rewritten (a redo, a rebuild) is counted again
from all of them. The file is derived, written best-effort, and never trusted further
than the index and the decision files it is checked against.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from . import journal
from .files import write_text
from .layout import SessionLayout

# The index's bytes just before the counted length are saved with it: an index rewritten
# to at least that length (a redo, then new cycles) is told from one that only grew.
_TAIL = 64


@dataclass(frozen=True)
class Tally:
    cycles: int = 0  # decisions made: cycles 1..cycles
    fixed: int = 0  # fixes kept: every decision's `fixed`, added up
    kept: int = 0  # decisions whose status is "kept" (iterations, fixes, shipping steps)
    stopped_at: int | None = None  # the cycle whose decision stopped the loop

    def add(self, decision: dict[str, Any]) -> Tally:
        """The counts with the next cycle's decision added."""
        return Tally(
            cycles=self.cycles + 1,
            fixed=self.fixed + len(decision.get("fixed") or []),
            kept=self.kept + (decision.get("status") == "kept"),
            stopped_at=self.stopped_at
            if self.stopped_at is not None or not decision.get("stop")
            else int(decision["cycle"]),
        )


def read(layout: SessionLayout, track: str = "") -> Tally:
    """The loop's counts (of `track`), as `journal.load_decisions` would give them."""
    index = layout.decisions_index(track)
    saved = _read_saved(layout, track)
    try:
        with open(index, "rb") as handle:
            stat = os.fstat(handle.fileno())
            if saved and saved["inode"] == stat.st_ino and saved["length"] <= stat.st_size:
                grown = _grown(handle, saved)
                if grown is not None and _ends_match(layout, track, grown[0].cycles):
                    if grown[1] != saved["length"]:
                        _save(layout, track, grown[0], stat.st_ino, grown[1], handle)
                    return grown[0]
    except FileNotFoundError:
        pass
    return _count_all(layout, track)


def next_open_cycle(layout: SessionLayout, track: str = "") -> int:
    """The first cycle with no decision yet, or the one whose decision stopped the loop."""
    counts = read(layout, track)
    return counts.stopped_at if counts.stopped_at is not None else counts.cycles + 1


def _grown(handle: Any, saved: dict[str, Any]) -> tuple[Tally, int] | None:
    """The saved counts plus the index's whole lines past them, and the length they cover;
    None when the index does not continue the counted one cycle after cycle."""
    length = saved["length"]
    start = max(0, length - _TAIL)
    handle.seek(start)
    if handle.read(length - start).hex() != saved["tail"]:
        return None  # rewritten since
    new = handle.read()
    end = new.rfind(b"\n") + 1  # a last line with no newline yet is still being written
    counts = Tally(**saved["counts"])
    for line in new[:end].splitlines():
        try:
            decision = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if int(decision.get("cycle", 0)) != counts.cycles + 1:
            return None  # a cycle made again (the last line stands): count them all
        counts = counts.add(decision)
    return counts, length + end


def _count_all(layout: SessionLayout, track: str) -> Tally:
    index = layout.decisions_index(track)
    try:
        before = os.stat(index)
    except FileNotFoundError:
        before = None
    counts = Tally()
    for decision in journal.load_decisions(layout, track):
        counts = counts.add(decision)
    try:
        with open(index, "rb") as handle:
            stat = os.fstat(handle.fileno())
            # Saved only when the index did not change while it was read (a stage appended
            # a line, load_decisions rebuilt it): the counts must be of these bytes. Up to
            # its last whole line: a line cut short by a crash is not counted.
            if before is not None and (stat.st_ino, stat.st_size) == (
                before.st_ino,
                before.st_size,
            ):
                length = handle.read().rfind(b"\n") + 1
                _save(layout, track, counts, stat.st_ino, length, handle)
    except FileNotFoundError:
        pass
    return counts


def _ends_match(layout: SessionLayout, track: str, cycles: int) -> bool:
    """The decision files agree: the last counted one exists and the next one does not."""
    if cycles == 0:
        return not layout.decision(1, track).exists()
    return (
        layout.decision(cycles, track).exists() and not layout.decision(cycles + 1, track).exists()
    )


def _path(layout: SessionLayout, track: str):
    return layout.decisions_index(track).with_name("decisions.tally.json")


def _read_saved(layout: SessionLayout, track: str) -> dict[str, Any] | None:
    try:
        saved = json.loads(_path(layout, track).read_text())
        Tally(**saved["counts"])
        return saved if {"inode", "length", "tail"} <= saved.keys() else None
    except (OSError, ValueError, TypeError, KeyError):
        return None  # none yet, or unreadable: counted again


def _save(
    layout: SessionLayout, track: str, counts: Tally, inode: int, length: int, handle: Any
) -> None:
    start = max(0, length - _TAIL)
    handle.seek(start)
    tail = handle.read(length - start).hex()
    record = {"inode": inode, "length": length, "tail": tail, "counts": asdict(counts)}
    try:
        write_text(_path(layout, track), json.dumps(record) + "\n")
    except OSError:
        pass  # a reader that may not write (status on a session it does not own)

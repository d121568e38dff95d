"""A loop's running summaries, kept up as it grows: its counts and its history.

Every stage's progress lines ("5 kept so far") and the DAG's search for the next open
cycle ask for the counts several times a cycle; Red (what not to report again) and
session.md (every cycle, everything tried) ask for the history once. Building them from
every decision made each cycle slower than the last, so each is saved beside the
decisions index with the index's length and end at the time: a summary whose index has
since only grown reads just the new lines, and one whose index was rewritten (a redo, a
rebuild) is built again from all of them. The files are derived, written best-effort, and
never trusted further than the index and the decision files they are checked against.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from autoresearch.engine.loop import Status
from autoresearch.session.files import read_text_once, write_bytes
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal
from autoresearch.views.journal import History

# The index's bytes just before the summarised length are saved with it: an index
# rewritten to at least that length (a redo, then new cycles) is told from one that grew.
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
            kept=self.kept + (decision.get("status") == Status.KEPT),
            stopped_at=self.stopped_at
            if self.stopped_at is not None or not decision.get("stop")
            else int(decision["cycle"]),
        )


def read(layout: SessionLayout, track: str = "") -> Tally:
    """The loop's counts (of `track`), as `journal.load_decisions` would give them."""
    return _summary(layout, track, _COUNTS)


def history(layout: SessionLayout, track: str = "", before: int | None = None) -> History:
    """The loop's history (of `track`); with `before`, of the cycles before that one."""
    summary = _summary(layout, track, _HISTORY)
    if before is None or len(summary.cycle_lines) == before - 1:
        return summary
    # Cycle `before` is being made again (a rerun): its earlier decision is left out.
    return History.of([d for d in journal.load_decisions(layout, track) if d["cycle"] < before])


def next_open_cycle(layout: SessionLayout, track: str = "") -> int:
    """The first cycle with no decision yet, or the one whose decision stopped the loop."""
    counts = read(layout, track)
    return counts.stopped_at if counts.stopped_at is not None else counts.cycles + 1


# --- the machinery: a summary folded over the index, saved with where it stopped -------


@dataclass(frozen=True)
class _Fold:
    name: str  # saved as decisions.<name>.json beside the index
    kind: type  # the summary: a dataclass whose `add(decision)` gives it with one more


_COUNTS = _Fold("tally", Tally)
_HISTORY = _Fold("history", History)


def _summary(layout: SessionLayout, track: str, fold: _Fold) -> Any:
    """The fold's summary of the index."""
    index = layout.decisions_index(track)
    saved = _read_saved(_path(layout, track, fold))
    try:
        with open(index, "rb") as handle:
            stat = os.fstat(handle.fileno())
            if saved and saved["inode"] == stat.st_ino and saved["length"] <= stat.st_size:
                grown = _grown(handle, saved, fold)
                if grown is not None and _ends_match(layout, track, grown[0]):
                    cycles, state, length = grown
                    if length != saved["length"]:
                        _save(layout, track, fold, (cycles, state), stat.st_ino, length, handle)
                    return state
    except FileNotFoundError:
        pass
    return _from_all(layout, track, fold)


def _grown(handle: Any, saved: dict[str, Any], fold: _Fold) -> tuple[int, Any, int] | None:
    """The saved summary plus the index's whole lines past it (cycles, summary, the
    length it covers); None when the index does not continue the summarised one cycle
    after cycle."""
    length = saved["length"]
    start = max(0, length - _TAIL)
    handle.seek(start)
    if handle.read(length - start).hex() != saved["tail"]:
        return None  # rewritten since
    new = handle.read()
    end = new.rfind(b"\n") + 1  # a last line with no newline yet is still being written
    cycles = saved["cycles"]
    try:
        state = fold.kind(**saved["summary"])
    except TypeError:
        return None  # saved by another version
    for line in new[:end].splitlines():
        try:
            decision = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if int(decision.get("cycle", 0)) != cycles + 1:
            return None  # a cycle made again (the last line stands): summarise them all
        state = state.add(decision)
        cycles += 1
    return cycles, state, length + end


def _from_all(layout: SessionLayout, track: str, fold: _Fold) -> Any:
    index = layout.decisions_index(track)
    try:
        before = os.stat(index)
    except FileNotFoundError:
        before = None
    state, cycles = fold.kind(), 0
    for decision in journal.load_decisions(layout, track):
        state, cycles = state.add(decision), cycles + 1
    try:
        with open(index, "rb") as handle:
            stat = os.fstat(handle.fileno())
            # Saved only when the index did not change while it was read (a stage appended
            # a line, load_decisions rebuilt it): the summary must be of these bytes. Up to
            # its last whole line: a line cut short by a crash is not in it.
            if before is not None and (stat.st_ino, stat.st_size) == (
                before.st_ino,
                before.st_size,
            ):
                length = handle.read().rfind(b"\n") + 1
                _save(layout, track, fold, (cycles, state), stat.st_ino, length, handle)
    except FileNotFoundError:
        pass
    return state


def _ends_match(layout: SessionLayout, track: str, cycles: int) -> bool:
    """The decision files agree: the last summarised one exists and the next one does not."""
    if cycles == 0:
        return not layout.decision(1, track).exists()
    return (
        layout.decision(cycles, track).exists() and not layout.decision(cycles + 1, track).exists()
    )


def saved_beside(index: Path) -> list[Path]:
    """Where the summaries of a loop's decisions index are kept: beside it."""
    return [_beside(index, fold) for fold in (_COUNTS, _HISTORY)]


def _path(layout: SessionLayout, track: str, fold: _Fold) -> Path:
    return _beside(layout.decisions_index(track), fold)


def _beside(index: Path, fold: _Fold) -> Path:
    return index.with_name(f"decisions.{fold.name}.json")


def _read_saved(path: Path) -> dict[str, Any] | None:
    try:
        saved = orjson.loads(read_text_once(path))
        if (
            isinstance(saved, dict)
            and {"inode", "length", "tail", "cycles", "summary"} <= saved.keys()
        ):
            return saved
    except (OSError, orjson.JSONDecodeError):
        pass
    return None  # none yet, or unreadable: summarised again


def _save(
    layout: SessionLayout,
    track: str,
    fold: _Fold,
    made: tuple[int, Any],
    inode: int,
    length: int,
    handle: Any,
) -> None:
    start = max(0, length - _TAIL)
    handle.seek(start)
    tail = handle.read(length - start).hex()
    cycles, state = made
    record = {"inode": inode, "length": length, "tail": tail, "cycles": cycles}
    try:
        # orjson writes the dataclass as it stands (asdict would copy every list item).
        write_bytes(_path(layout, track, fold), orjson.dumps(record | {"summary": state}))
    except OSError:
        pass  # a reader that may not write (status on a session it does not own)

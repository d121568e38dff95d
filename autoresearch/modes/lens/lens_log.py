"""A lens's iteration log, `<lens>-results.tsv`: its rows, the `run_id` of each run, and the merge
that makes a rerun add rows without duplicating any.

Rule: a row is identified by (run_id, iteration). Writing a run's rows replaces that run's rows
with the same iteration and keeps every other run's rows, so rerunning an interrupted iteration
rewrites its row, and a session rerun after `done` was removed (a new run_id) adds rows under the
old ones. Free text is masked and flattened to one line before it is written. The log is also
where a lens reads what it saw before: the hashes of accepted findings (duplicates across runs)
and the current run's iterations (saturation).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .masking import mask
from .saturation import Iteration

COLUMNS = [
    "run_id",
    "iteration",
    "category",
    "new",
    "dropped",
    "drop_reasons",
    "hashes",
    "status",
    "description",
    "timestamp",
]


@dataclass
class LogRow:
    run_id: str
    iteration: int
    category: str  # the vector, dimension, hypothesis or error worked on
    new: int  # findings accepted as new
    dropped: int = 0
    drop_reasons: dict[str, int] = field(default_factory=dict)  # kind -> count
    hashes: tuple[str, ...] = ()  # of the accepted findings
    status: str = ""
    description: str = ""
    timestamp: str = ""


def new_run_id(session: str, started: datetime, existing: Iterable[str] = ()) -> str:
    """`<session>-<UTC start, to the second>`, with -2, -3… if that id is already in the log."""
    base = f"{session}-{started.astimezone(UTC):%Y%m%dT%H%M%SZ}"
    taken = set(existing)
    run_id, n = base, 1
    while run_id in taken:
        n += 1
        run_id = f"{base}-{n}"
    return run_id


def merge(previous: Sequence[LogRow], run_rows: Sequence[LogRow]) -> list[LogRow]:
    """The log after writing `run_rows`: same (run_id, iteration) replaced, all else kept; earlier
    runs first in their order, then each run's rows by iteration."""
    replaced = {(r.run_id, r.iteration) for r in run_rows}
    kept = [r for r in previous if (r.run_id, r.iteration) not in replaced]
    merged: dict[tuple[str, int], LogRow] = {(r.run_id, r.iteration): r for r in kept}
    for r in run_rows:
        merged[(r.run_id, r.iteration)] = r
    run_order = list(dict.fromkeys(r.run_id for r in [*kept, *run_rows]))
    return sorted(merged.values(), key=lambda r: (run_order.index(r.run_id), r.iteration))


def render(rows: Sequence[LogRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        reasons = ",".join(f"{k}={v}" for k, v in sorted(r.drop_reasons.items()))
        description, _ = mask(" ".join(r.description.split()))
        writer.writerow(
            [
                r.run_id,
                r.iteration,
                r.category,
                r.new,
                r.dropped,
                reasons,
                ",".join(r.hashes),
                r.status,
                description[:300],
                r.timestamp,
            ]
        )
    return out.getvalue()


def parse(text: str) -> list[LogRow]:
    """Rows back from the TSV text (an empty or missing log is no rows)."""
    if not text.strip():
        return []
    rows = []
    for record in csv.DictReader(io.StringIO(text), delimiter="\t"):
        reasons = {}
        for part in filter(None, (record.get("drop_reasons") or "").split(",")):
            kind, _, count = part.partition("=")
            reasons[kind] = int(count or 0)
        rows.append(
            LogRow(
                run_id=record["run_id"],
                iteration=int(record["iteration"]),
                category=record.get("category") or "",
                new=int(record.get("new") or 0),
                dropped=int(record.get("dropped") or 0),
                drop_reasons=reasons,
                hashes=tuple(filter(None, (record.get("hashes") or "").split(","))),
                status=record.get("status") or "",
                description=record.get("description") or "",
                timestamp=record.get("timestamp") or "",
            )
        )
    return rows


def seen_hashes(rows: Iterable[LogRow], redoing: tuple[str, int] | None = None) -> set[str]:
    """Every finding hash accepted in any run: what `finding_schema.check` treats as duplicates.

    `redoing`: the (run_id, iteration) being rerun; its own earlier row does not count, or a
    rerun iteration would find its own findings to be duplicates.
    """
    return {h for r in rows if (r.run_id, r.iteration) != redoing for h in r.hashes}


def iterations(rows: Iterable[LogRow], run_id: str) -> list[Iteration]:
    """The run's iterations, oldest first, for the saturation rule and the pickers."""
    own = sorted((r for r in rows if r.run_id == run_id), key=lambda r: r.iteration)
    return [Iteration(r.category, r.new) for r in own]

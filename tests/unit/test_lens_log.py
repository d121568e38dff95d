"""A lens's results TSV: run ids, rows that a rerun replaces rather than duplicates, masking,
and what the log tells the next iteration."""

from __future__ import annotations

from datetime import UTC, datetime

from autoresearch.modes.lens.lens_log import (
    COLUMNS,
    LogRow,
    iterations,
    merge,
    new_run_id,
    parse,
    render,
    seen_hashes,
)
from autoresearch.modes.lens.masking import REDACTED
from autoresearch.modes.lens.saturation import Iteration

STARTED = datetime(2025, 3, 1, 12, 30, 5, tzinfo=UTC)


def row(run_id="r1", iteration=1, **kw):
    return LogRow(run_id, iteration, kw.pop("category", "owasp:A03"), kw.pop("new", 1), **kw)


def test_new_run_id_is_the_session_and_start_time_and_never_repeats():
    assert new_run_id("audit", STARTED) == "audit-20250301T123005Z"
    assert new_run_id("audit", STARTED, ["audit-20250301T123005Z"]) == "audit-20250301T123005Z-2"


def test_rewriting_an_iteration_replaces_its_row():
    log = merge([], [row(iteration=1), row(iteration=2, new=0)])
    again = merge(log, [row(iteration=2, new=3)])
    assert [(r.iteration, r.new) for r in again] == [(1, 1), (2, 3)]


def test_a_new_run_adds_rows_under_the_old_ones():
    first = merge([], [row("r1", 1), row("r1", 2)])
    both = merge(first, [row("r2", 1)])
    assert [(r.run_id, r.iteration) for r in both] == [("r1", 1), ("r1", 2), ("r2", 1)]


def test_render_and_parse_round_trip():
    rows = [
        row(dropped=3, drop_reasons={"location": 2, "duplicate": 1}, hashes=("aa", "bb")),
        row(iteration=2, new=0, status="saturated", timestamp="2025-03-01T12:31:00Z"),
    ]
    text = render(rows)
    assert text.splitlines()[0].split("\t") == COLUMNS
    assert parse(text) == rows


def test_render_masks_and_flattens_the_description():
    text = render([row(description='found password = "hunter2-horse"\n\tin settings')])
    (back,) = parse(text)
    assert back.description == f'found password = "{REDACTED}" in settings'
    assert "hunter2" not in text


def test_parse_of_an_empty_log_is_no_rows():
    assert parse("") == []


def test_seen_hashes_cover_every_run_except_the_iteration_being_redone():
    rows = [
        row("r1", 1, hashes=("aa",)),
        row("r2", 1, hashes=("bb",)),
        row("r2", 2, hashes=("cc",)),
    ]
    assert seen_hashes(rows) == {"aa", "bb", "cc"}
    assert seen_hashes(rows, redoing=("r2", 2)) == {"aa", "bb"}


def test_iterations_are_the_current_runs_in_order():
    rows = [
        row("r2", 2, category="b", new=0),
        row("r1", 1, category="x"),
        row("r2", 1, category="a"),
    ]
    assert iterations(rows, "r2") == [Iteration("a", 1), Iteration("b", 0)]

"""Reading every decision of a loop costs one file, and never gives an out-of-date answer."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

from autoresearch.engine import jobs, tally
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal


def decide(layout: SessionLayout, cycle: int, track: str = "", **extra) -> None:
    """What a deciding stage does: write decision.json, then note it (jobs.run_stage)."""
    write_json(layout.decision(cycle, track), {"cycle": cycle, "track": track, **extra})
    journal.note_decision(layout, cycle, track)


def test_decisions_come_from_the_index_not_the_cycle_folders(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    for n in (1, 2, 3):
        decide(layout, n, fixed=[{"id": f"F-{n}"}])
    # The index alone answers: a decision file changed behind its back is not read.
    write_json(layout.decision(2), {"cycle": 2, "track": "", "fixed": "not read"})
    assert [d["fixed"][0]["id"] for d in journal.load_decisions(layout)] == ["F-1", "F-2", "F-3"]


def test_a_rerun_cycle_counts_once_with_its_last_decision(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, reason="first")
    decide(layout, 1, reason="rerun")
    assert [(d["cycle"], d["reason"]) for d in journal.load_decisions(layout)] == [(1, "rerun")]


def test_cycles_moved_aside_by_a_redo_are_gone_from_the_answer(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    for n in (1, 2, 3):
        decide(layout, n)
    shutil.move(layout.cycle(2), tmp_path / "superseded-002")
    shutil.move(layout.cycle(3), tmp_path / "superseded-003")
    assert [d["cycle"] for d in journal.load_decisions(layout)] == [1]
    assert tally.next_open_cycle(layout) == 2
    # The index was rebuilt: the answer now comes from it again.
    assert [json.loads(line)["cycle"] for line in layout.decisions_index().open()] == [1]


def test_a_decision_the_index_never_saw_is_found(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1)
    write_json(layout.decision(2), {"cycle": 2, "track": "", "stop": True})  # no note
    assert [d["cycle"] for d in journal.load_decisions(layout)] == [1, 2]
    assert tally.next_open_cycle(layout) == 2  # the one that stopped the loop


def test_a_line_cut_short_by_a_crash_is_skipped_and_the_decision_read_from_its_file(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1)
    write_json(layout.decision(2), {"cycle": 2, "track": ""})
    with layout.decisions_index().open("a") as handle:
        handle.write('{"cycle": 2, "tra')
    assert [d["cycle"] for d in journal.load_decisions(layout)] == [1, 2]


def test_tracks_keep_indexes_of_their_own(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, "h1")
    decide(layout, 1, "h2")
    decide(layout, 2, "h2")
    assert [d["cycle"] for d in journal.load_decisions(layout, "h1")] == [1]
    assert [d["cycle"] for d in journal.load_decisions(layout, "h2")] == [1, 2]
    assert journal.load_decisions(layout) == []


def test_the_index_keeps_a_test_runs_counts_and_the_decision_file_the_whole_run(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    tests = {"outcome": "passed", "passed": 2, "passing_ids": ["t::a", "t::b"], "tail": "..."}
    decide(layout, 1, tests=tests)
    (logged,) = journal.load_decisions(layout)
    assert logged["tests"] == {"outcome": "passed", "passed": 2}
    assert json.loads(layout.decision(1).read_text())["tests"]["passing_ids"] == ["t::a", "t::b"]


def with_results(tmp_path) -> SessionLayout:
    """A session whose results.tsv holds its header alone."""
    layout = SessionLayout(tmp_path / "s")
    layout.root.mkdir()
    layout.results.write_text("\t".join(journal.RESULTS_COLUMNS) + "\n")
    return layout


def test_a_new_cycles_results_rows_are_appended_and_a_rerun_replaces_them(tmp_path):
    layout = with_results(tmp_path)
    journal.upsert_results(layout, "", "001", [{"team": "green", "description": "one"}])
    inode = layout.results.stat().st_ino
    journal.upsert_results(layout, "", "002", [{"team": "green", "description": "two"}])
    assert layout.results.stat().st_ino == inode  # appended, not rewritten
    journal.upsert_results(layout, "", "001", [{"team": "green", "description": "again"}])
    rows = journal.read_results(layout)
    assert [(r["cycle"], r["description"]) for r in rows] == [("002", "two"), ("001", "again")]


def test_a_loop_goes_on_past_cycle_999(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    for n in (998, 999, 1000, 1001):
        write_json(layout.decision(n), {"cycle": n, "track": ""})
    assert layout.completed_cycles() == [998, 999, 1000, 1001]  # by number, not by name
    # The rules' cycle wildcard names cycle 1000's files as the layout does.
    rules = (Path(__file__).resolve().parents[2] / "rules/common.smk").read_text()
    constraint = re.search(r'cycle=r"([^"]+)"', rules).group(1)
    assert re.fullmatch(constraint, layout.cycle(1000).name)
    assert re.fullmatch(constraint, layout.cycle(7).name)
    assert not re.fullmatch(constraint, "7")


def test_a_cycle_of_another_track_is_not_taken_for_a_rerun(tmp_path):
    layout = with_results(tmp_path)
    journal.upsert_results(layout, "h1", "001", [{"team": "green", "description": "h1"}])
    inode = layout.results.stat().st_ino
    journal.upsert_results(layout, "h2", "001", [{"team": "green", "description": "h2"}])
    assert layout.results.stat().st_ino == inode  # appended: h2 had no rows of cycle 1
    journal.upsert_results(layout, "h1", "001", [{"team": "green", "description": "again"}])
    rows = journal.read_results(layout)
    assert [(r["track"], r["description"]) for r in rows] == [("h2", "h2"), ("h1", "again")]


def test_a_decision_rewritten_within_one_clock_tick_is_still_seen_as_written(tmp_path):
    # jobs.run_stage notes a decision in the index when its file changed during the stage.
    # A rewrite (a rerun's) in the tick of the last write, at the same size, keeps the
    # modification time to the nanosecond: the file is new all the same (written by rename).
    layout = SessionLayout(tmp_path / "s")
    env = SimpleNamespace(layout=layout, cycle=1, track="")
    write_json(layout.decision(1), {"cycle": 1, "track": "", "kept": 0})
    before = jobs._stamp(env)
    old = layout.decision(1).stat()
    write_json(layout.decision(1), {"cycle": 1, "track": "", "kept": 1})
    os.utime(layout.decision(1), ns=(old.st_atime_ns, old.st_mtime_ns))
    assert layout.decision(1).stat().st_size == old.st_size
    assert jobs._stamp(env) not in (before, None)

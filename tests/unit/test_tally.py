"""A loop's counts and history are read from the new lines of its index, and always agree
with every decision."""

from __future__ import annotations

import random
import shutil

from autoresearch.engine import tally
from autoresearch.engine.tally import Tally
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal


def decide(layout: SessionLayout, cycle: int, **extra) -> None:
    """What a deciding stage does: write decision.json, then note it (jobs.run_stage)."""
    write_json(layout.decision(cycle), {"cycle": cycle, "track": "", **extra})
    journal.note_decision(layout, cycle)


def counted(layout: SessionLayout) -> Tally:
    """The counts made from every decision, the slow way."""
    counts = Tally()
    for decision in journal.load_decisions(layout):
        counts = counts.add(decision)
    return counts


def test_counts_fixes_kept_decisions_and_the_cycle_that_stopped(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, fixed=[{"id": "F-1"}, {"id": "F-2"}], status="kept")
    decide(layout, 2, fixed=[], status="discarded")
    decide(layout, 3, fixed=[{"id": "F-3"}], status="kept", stop=True)
    assert tally.read(layout) == Tally(cycles=3, fixed=3, kept=2, stopped_at=3)
    assert tally.next_open_cycle(layout) == 3


def test_a_new_decision_is_counted_from_its_line_alone(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, fixed=[{"id": "F-1"}], note="a line longer than the end checked " * 3)
    assert tally.read(layout).fixed == 1
    # Cycle 1's line is changed in place, at the same length: a read that went through
    # every line again would count its three fixes.
    index = layout.decisions_index()
    text = index.read_text()
    changed = text.replace('{"id":"F-1"}', '"a","b","c" ')
    assert len(changed) == len(text)
    index.write_text(changed)
    decide(layout, 2, fixed=[{"id": "F-2"}])
    assert tally.read(layout) == Tally(cycles=2, fixed=2)


def test_a_session_with_no_decision_counts_nothing_and_opens_cycle_one(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    assert tally.read(layout) == Tally()
    assert tally.next_open_cycle(layout) == 1


def test_a_cycle_made_again_counts_its_last_decision_only(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, fixed=[{"id": "F-1"}])
    decide(layout, 2, fixed=[{"id": "F-2"}, {"id": "F-3"}])
    assert tally.read(layout).fixed == 3
    decide(layout, 2, fixed=[])
    assert tally.read(layout) == Tally(cycles=2, fixed=1)


def test_an_index_rewritten_longer_after_a_redo_is_counted_again(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, fixed=[{"id": "F-1"}])
    decide(layout, 2, fixed=[{"id": "F-2"}])
    assert tally.read(layout).fixed == 2
    shutil.move(layout.cycle(2), tmp_path / "superseded-002")
    assert tally.read(layout) == Tally(cycles=1, fixed=1)
    decide(layout, 2, fixed=[], note="a much longer decision than the one it replaced")
    decide(layout, 3, fixed=[])
    assert tally.read(layout) == Tally(cycles=3, fixed=1)


def test_the_history_before_a_cycle_made_again_leaves_that_cycles_decision_out(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, fixed=[{"id": "F-1", "key": "a (x.py:1)"}], end_commit="1" * 40)
    decide(layout, 2, fixed=[{"id": "F-2", "key": "b (x.py:2)"}], end_commit="2" * 40)
    assert [t[1] for t in tally.history(layout, before=3).tried] == ["F-1, fixed", "F-2, fixed"]
    assert [t[1] for t in tally.history(layout, before=2).tried] == ["F-1, fixed"]


def test_unreadable_saved_counts_are_counted_again(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    decide(layout, 1, fixed=[{"id": "F-1"}])
    tally.read(layout)
    saved = layout.decisions_index().with_name("decisions.tally.json")
    saved.write_text('{"inode": 1, "counts": ')
    assert tally.read(layout) == Tally(cycles=1, fixed=1)


def test_the_summaries_agree_with_every_decision_whatever_happens_to_the_loop(tmp_path):
    """New decisions, cycles made again, redos, decisions never noted and lines cut short
    by a crash, in a random order: after each, the counts, session.md's cycle sections and
    what Red may not report again are those made from every decision."""
    rng = random.Random(16)
    layout = SessionLayout(tmp_path / "s")
    aside = 0
    for step in range(300):
        last = len(layout.completed_cycles())
        extra = {
            "fixed": [
                {"id": f"F-{step}-{i}", "key": f"t{i} (a.py:{step})"}
                for i in range(rng.randrange(3))
            ],
            "skipped": [{"id": f"F-{step}", "key": f"s (b.py:{step})", "reason": "no"}]
            if rng.random() < 0.3
            else [],
            "status": rng.choice(["kept", "discarded"]),
            "stop": rng.random() < 0.05,
            "reason": f"reason {step}",
            "end_commit": f"{step:040x}",
            "open_issues": [f"open {step}"] if rng.random() < 0.5 else [],
        }
        action = rng.choice(["new"] * 5 + ["again", "redo", "unnoted", "cut"])
        if action == "new" or last == 0:
            decide(layout, last + 1, **extra)
        elif action == "again":
            decide(layout, last, **extra)
        elif action == "redo":
            for n in range(max(1, last - rng.randrange(3)), last + 1):
                aside += 1
                shutil.move(layout.cycle(n), tmp_path / f"superseded-{aside}")
        elif action == "unnoted":
            write_json(layout.decision(last + 1), {"cycle": last + 1, "track": "", **extra})
        else:
            write_json(layout.decision(last + 1), {"cycle": last + 1, "track": "", **extra})
            with layout.decisions_index().open("a") as handle:
                handle.write('{"cycle": ')
        assert tally.read(layout) == counted(layout), action
        decisions = journal.load_decisions(layout)
        history = tally.history(layout)
        assert history.sections() == journal.History.of(decisions).sections(), action

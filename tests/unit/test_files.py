"""Session files written from many jobs at once stay whole (jobs are threads of one process)."""

from __future__ import annotations

import csv
import threading

from autoresearch.engine import findings
from autoresearch.session import files
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec
from autoresearch.views import journal

WRITERS = 8
ROUNDS = 40


def hammer(work) -> None:
    """Run `work(i, n)` from WRITERS threads at once, ROUNDS times each."""
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        start.wait()
        try:
            for n in range(ROUNDS):
                work(i, n)
        except BaseException as err:  # reported below, with the thread's failure
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_atomic_writes_from_threads_never_leave_a_torn_or_stray_file(tmp_path):
    path = tmp_path / "session.md"
    texts = [f"writer {i}\n" * 2000 for i in range(WRITERS)]
    seen: list[str] = []

    def work(i: int, n: int) -> None:
        files.write_text(path, texts[i])
        seen.append(path.read_text())

    hammer(work)
    assert all(text in texts for text in seen)
    assert [p.name for p in tmp_path.iterdir()] == ["session.md"]


def record(name: str) -> SetupRecord:
    return SetupRecord(
        name=name,
        mode="broad",
        version="0.1.0",
        target="/t",
        stack="Python",
        test_command="pytest",
        linter_command=None,
        branch="b",
        base_commit="0" * 40,
        baseline={"ok": True, "summary": "1 passed"},
        date="2026-01-01",
        config_file=None,
        conventions="",
    )


def test_parallel_tracks_rewriting_the_journal_lose_no_row_and_tear_no_file(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    spec = SessionSpec({"agent": {"backend": "ruff"}, "scope": {}})
    journal.init_files(layout, record("s"), spec)

    def work(i: int, n: int) -> None:
        track = f"h{i}"
        row = {"team": "green", "status": "ok", "tests_pass": True, "description": f"{n}"}
        journal.upsert_results(layout, track, f"{n:03d}", [row])
        journal.record_ideas(layout, f"{track} cycle {n:03d}", [f"idea {i}.{n}"])
        decision = {
            "cycle": n,
            "track": track,
            "end_commit": "a" * 40,
            "fixed": [],
            "skipped": [],
        }
        journal.write_summary(layout, record("s"), spec, [decision], f"## Track {track}\n")
        text = layout.summary.read_text()
        assert text.startswith("# Autoresearch session: s\n") and text.endswith("\n")

    hammer(work)
    with layout.results.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == WRITERS * ROUNDS
    ideas = layout.ideas.read_text()
    assert all(f"idea {i}.{n}" in ideas for i in range(WRITERS) for n in range(ROUNDS))
    assert not [p.name for p in layout.root.iterdir() if p.name.endswith(".tmp")]


def test_reds_tried_list_stops_growing_and_counts_the_older_ones_per_file():
    decisions = [
        {
            "cycle": n,
            "fixed": [{"id": f"F-{n:03d}", "key": f"issue {n} (src/a.py:{n})"}],
            "skipped": [{"id": f"G-{n:03d}", "key": f"other {n} (b.py:1)", "reason": "x"}],
        }
        for n in range(1, 101)
    ]
    places = [
        findings.file_of(f["key"]) for d in decisions for g in ("fixed", "skipped") for f in d[g]
    ]
    tried = journal.History.of(decisions).tried_lines
    told = journal.tried_for_red(tried, places, shown=40)
    assert len(told) == 41
    assert told[0] == "160 earlier findings, fixed or given up on (80 in b.py, 80 in src/a.py)"
    assert told[-1] == tried[-1]


def test_a_cached_measurement_is_taken_once_and_read_back_by_a_rerun(tmp_path):
    cache, taken = tmp_path / "measurements.json", []

    def measure() -> dict:
        taken.append(1)
        return {"value": len(taken)}

    assert files.cached_json(cache, "candidate:abc", measure) == {"value": 1}
    assert files.cached_json(cache, "candidate:abc", measure) == {"value": 1}  # the rerun
    assert files.cached_json(cache, "incumbent:def", measure) == {"value": 2}
    assert len(taken) == 2 and set(files.read_json(cache)) == {"candidate:abc", "incumbent:def"}

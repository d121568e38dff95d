"""timings.tsv counts what the user pays for in CPU, jailed commands included.

A command in a bwrap jail runs in processes ours never reap, so rusage never sees its CPU;
the jail's own shell reports it (commands.CPU_REPORTER), and timings.tsv adds it to the
commands' CPU of the stage that ran it.
"""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import pytest

from autoresearch.engine import timings
from autoresearch.safety import commands, jail
from autoresearch.session.layout import SessionLayout

PROBE = jail.probe()
needs_bwrap = pytest.mark.skipif(
    not PROBE.works, reason=f"the bwrap jail cannot run here: {PROBE.reason}"
)
# Half a second of CPU, however loaded the machine: CPU time, not wall time, is counted.
BURN = (
    "python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass'"
)


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    (tmp_path / "wt").mkdir()
    return tmp_path / "wt"


def rows(layout: SessionLayout) -> list[dict[str, str]]:
    with layout.timings.open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


@needs_bwrap
def test_a_jailed_commands_cpu_is_in_the_stages_row(tmp_path, worktree):
    layout = SessionLayout(tmp_path / "session")
    layout.root.mkdir()
    with timings.timed(layout, "green", "", 1):
        result = commands.run(BURN, worktree, jail=jail.Jail("bwrap", worktree))
    assert result.ok and result.jailed_cpu_s >= 0.45
    (row,) = rows(layout)
    assert float(row["jailed_cpu_s"]) >= 0.45
    assert float(row["commands_cpu_s"]) >= float(row["jailed_cpu_s"])


def test_outside_a_jail_rusage_counts_it_and_nothing_is_counted_twice(tmp_path, worktree):
    layout = SessionLayout(tmp_path / "session")
    layout.root.mkdir()
    with timings.timed(layout, "green", "", 1):
        result = commands.run(BURN, worktree, jail=jail.Jail("none", worktree))
    assert result.jailed_cpu_s is None
    (row,) = rows(layout)
    assert float(row["jailed_cpu_s"]) == 0
    assert 0.45 <= float(row["commands_cpu_s"]) < 0.95


@needs_bwrap
def test_the_jailed_command_sees_its_usual_stdin_exit_code_and_output(worktree):
    # The report goes to the reporter's stdin: the command must get /dev/null there, not
    # the report's file, and its output and exit code must be its own.
    result = commands.run("cat; echo out; exit 7", worktree, jail=jail.Jail("bwrap", worktree))
    assert result.exit_code == 7 and result.output == "out\n"
    assert result.jailed_cpu_s is not None


@needs_bwrap
def test_a_killed_jail_reports_nothing_and_adds_nothing(worktree):
    before = commands.jailed_cpu.total
    result = commands.run("sleep 30", worktree, timeout_s=1, jail=jail.Jail("bwrap", worktree))
    assert result.timed_out and result.jailed_cpu_s is None
    assert commands.jailed_cpu.total == before


def test_a_timings_file_of_the_old_width_keeps_its_width(tmp_path):
    layout = SessionLayout(tmp_path / "session")
    layout.root.mkdir()
    old = "\t".join(timings.COLUMNS[:-1])
    layout.timings.write_text(old + "\nred\t\t001\t1.0\t0.5\t0.1\tyes\n")
    with timings.timed(layout, "green", "", 1):
        pass
    lines = layout.timings.read_text().splitlines()
    assert lines[0] == old and len(lines[-1].split("\t")) == len(timings.COLUMNS) - 1


def in_two_threads(first, second) -> None:
    """Run `first` and `second` at once in two threads (two jobs of one Snakemake), the
    second's block open from before the first's starts to after it ends."""
    second_open, first_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def job(body) -> None:
        try:
            body(second_open, first_done)
        except BaseException as err:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(err)
            second_open.set()
            first_done.set()

    threads = [threading.Thread(target=job, args=(b,)) for b in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors


def test_a_stage_counts_only_its_own_jobs_jailed_cpu():
    counted: dict[str, float] = {}

    def first(second_open, first_done):
        second_open.wait(60)
        with commands.jailed_cpu.counting() as jailed:
            commands.jailed_cpu.add(2.0)
            counted["first"] = jailed()
        first_done.set()

    def second(second_open, first_done):
        with commands.jailed_cpu.counting() as jailed:
            second_open.set()
            first_done.wait(60)
            commands.jailed_cpu.add(0.25)
            counted["second"] = jailed()

    in_two_threads(first, second)
    assert counted == {"first": 2.0, "second": 0.25}


@needs_bwrap
def test_two_stages_run_at_once_each_get_their_own_jobs_jailed_cpu(tmp_path, worktree):
    layout = SessionLayout(tmp_path / "session")
    layout.root.mkdir()

    def burner(second_open, first_done):
        second_open.wait(60)
        with timings.timed(layout, "green", "h1", 1):
            assert commands.run(BURN, worktree, jail=jail.Jail("bwrap", worktree)).ok
        first_done.set()

    def idle(second_open, first_done):
        with timings.timed(layout, "green", "h2", 1):
            second_open.set()
            first_done.wait(60)
            assert commands.run("true", worktree, jail=jail.Jail("bwrap", worktree)).ok

    in_two_threads(burner, idle)
    by_track = {row["track"]: float(row["jailed_cpu_s"]) for row in rows(layout)}
    assert by_track["h1"] >= 0.45
    assert by_track["h2"] < 0.2  # its own `true`, none of the sibling's half second

"""timings.tsv counts what the user pays for in CPU, jailed commands included.

A command in a bwrap jail runs in processes ours never reap, so rusage never sees its CPU;
the jail's own shell reports it (commands.CPU_REPORTER), and timings.tsv adds it to the
commands' CPU of the stage that ran it.
"""

from __future__ import annotations

import csv
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

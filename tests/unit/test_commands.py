"""Commands are bounded: in time (a timeout ends everything the command started), in memory
(output goes to a file, a bounded tail stays in memory) and by the user (one Ctrl-C ends
every running command and the run, and the rerun resumes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, kill_all, live_processes, wait_for

from autoresearch.safety import commands, jail

PROBE = jail.probe()
MODES = [
    "none",
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(not PROBE.works, reason=f"bwrap cannot run here: {PROBE.reason}"),
    ),
]


def box(dirs, mode: str) -> jail.Jail:
    return jail.build_jail({"sandbox": mode}, dirs.worktree, hide=[dirs.sessions])


# --- time -------------------------------------------------------------------------------------


def marker_for(n: int) -> str:
    """A sleep's argument to find its process by: 25 s and change, the change this run's own
    (another suite on the machine runs the same tests at the same time)."""
    return f"25.{n}{os.getpid() % 10000:04d}"


@pytest.mark.parametrize("mode", MODES)
def test_timeout_returns_on_time_when_a_child_leaves_the_process_group(session_dirs, mode):
    marker = marker_for(1)  # the lingering child's argument, to find it afterwards
    try:
        result = commands.run(
            f"setsid sleep {marker} & sleep {marker}",
            session_dirs.worktree,
            timeout_s=3,
            jail=box(session_dirs, mode),
        )
        assert result.timed_out and result.exit_code is None
        assert result.duration_s < 15  # not the 25 s of the child that left the group
    finally:
        kill_all(marker)


@pytest.mark.parametrize("mode", MODES)
def test_command_that_exits_does_not_wait_for_what_it_left_running(session_dirs, mode):
    marker = marker_for(2)
    try:
        result = commands.run(
            f"sleep {marker} & echo started", session_dirs.worktree, jail=box(session_dirs, mode)
        )
        assert result.ok and result.output == "started\n"
        assert result.duration_s < 15
        # It stayed in the group: it ends with the command (the kill lands in its own time,
        # long before its 25 s are up).
        wait_for(lambda: live_processes(marker) == [], timeout=10)
    finally:
        kill_all(marker)


@pytest.mark.skipif(not PROBE.works, reason=f"bwrap cannot run here: {PROBE.reason}")
def test_timeout_ends_every_process_in_the_jail(session_dirs):
    marker = marker_for(3)
    try:
        commands.run(
            f"setsid sleep {marker} & (setsid sh -c 'sleep {marker}' &) ; sleep {marker}",
            session_dirs.worktree,
            timeout_s=2,
            jail=box(session_dirs, "bwrap"),
        )
        assert live_processes(marker) == []
    finally:
        kill_all(marker)


def _held_here(name: str) -> int:
    """How many descriptors of this process hold the namespace /proc names `name`."""
    held = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            held += os.readlink(fd) == name
        except OSError:
            continue
    return held


@pytest.mark.skipif(not PROBE.works, reason=f"bwrap cannot run here: {PROBE.reason}")
def test_the_jails_namespace_is_held_while_the_run_waits_for_it_to_empty(session_dirs, monkeypatch):
    # The kernel gives a freed namespace's number to the next one made: waited on by its
    # name alone, a jail gone by then could stand for another jail's namespace (a parallel
    # job's), and the run waited for that jail's processes to end, up to KILL_WAIT_S.
    waited: list[tuple[str, int]] = []
    wait = commands._wait_until_empty

    def watched(namespace: str, deadline: float) -> None:
        waited.append((namespace, _held_here(namespace)))
        wait(namespace, deadline)

    monkeypatch.setattr(commands, "_wait_until_empty", watched)
    result = commands.run("echo ran", session_dirs.worktree, jail=box(session_dirs, "bwrap"))
    assert result.ok and result.output == "ran\n"
    [(namespace, held)] = waited
    assert namespace.startswith("pid:[") and held == 1
    assert _held_here(namespace) == 0  # let go once the run is over


# --- memory -------------------------------------------------------------------------------------

PRINT_A_GIGABYTE = textwrap.dedent(
    r"""
    import re, sys
    from autoresearch.safety import commands
    result = commands.run("yes 'a line of test output' | head -c 1000000000; echo; echo 7 passed",
                          sys.argv[1])
    # VmHWM is this process's own peak; ru_maxrss would carry over the forking parent's.
    status = open("/proc/self/status").read()
    peak_mb = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) // 1024
    print(peak_mb, result.output_bytes, len(result.output), result.output.splitlines()[-1])
    """
)


def test_a_gigabyte_of_output_stays_within_bounded_memory(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PRINT_A_GIGABYTE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    peak_mb, size, kept, last = done.stdout.split(maxsplit=3)
    assert int(size) > 1_000_000_000
    assert int(kept) <= commands.OUTPUT_TAIL_BYTES
    assert last.strip() == "7 passed"  # counts are read from the end: the tail keeps them
    assert int(peak_mb) < 200  # the command's output, before: three times its size


def test_output_keeps_the_end(tmp_path):
    result = commands.run("seq 1 300000", tmp_path)  # about 2 MB: more than the kept tail
    assert result.cut
    assert result.output.endswith("299999\n300000\n")
    assert len(result.output) <= commands.OUTPUT_TAIL_BYTES
    assert result.tail(20).startswith("[... output cut ...]")


def test_stdout_only_keeps_stderr_apart(tmp_path):
    result = commands.run("echo value; echo chatter >&2", tmp_path, stdout_only=True)
    assert (result.output, result.stderr) == ("value\n", "chatter\n")


# --- Ctrl-C -------------------------------------------------------------------------------------

INTERRUPT_A_THREAD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from pathlib import Path
    from autoresearch.safety import commands, jail
    worktree, sessions, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as started from a terminal
    box = jail.build_jail({"sandbox": mode}, worktree, hide=[sessions])
    commands.end_commands_on_interrupt()
    outcome = []

    def job():  # as Snakemake runs our stages: in a thread of its own process
        try:
            commands.run("touch started; sleep 301.5", worktree, jail=box)
            outcome.append("finished")
        except commands.Interrupted:
            outcome.append("interrupted")

    thread = threading.Thread(target=job)
    thread.start()
    while not (worktree / "started").exists():
        time.sleep(0.05)
    start = time.monotonic()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(120)
    except KeyboardInterrupt:
        outcome.append("main thread interrupted")
    thread.join(120)
    try:
        commands.run("echo started anyway", worktree, jail=box)
    except commands.Interrupted:
        outcome.append("refused")
    print(*outcome, sep=",")
    print(time.monotonic() - start)
    """
)


IGNORING_SIGINT = textwrap.dedent(
    """
    import signal
    from autoresearch.safety import commands
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup, or `cmd &` in a script
    print(commands.end_commands_on_interrupt(), signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
    """
)


def test_a_process_started_ignoring_ctrl_c_keeps_ignoring_it():
    done = subprocess.run(
        [sys.executable, "-c", IGNORING_SIGINT], capture_output=True, text=True, cwd=ROOT
    )
    assert done.stdout.split() == ["False", "True"], done.stderr


@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_ends_running_commands_and_refuses_new_ones(session_dirs, mode):
    try:
        args = [sys.executable, "-c", INTERRUPT_A_THREAD, str(session_dirs.worktree)]
        args += [str(session_dirs.sessions), mode]
        done = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        outcome, seconds = done.stdout.splitlines()
        expected = ["main thread interrupted", "interrupted", "refused"]
        assert outcome.split(",") == expected
        assert float(seconds) < 60  # not the command's 301 s
        assert live_processes("301.5") == []
    finally:
        kill_all("301.5")


def test_a_make_that_started_us_does_not_reach_the_targets_make(tmp_path, monkeypatch):
    """Run under `make` (as `make demo` does), a target's `make bench` must not join our make:
    it would print "make[1]: Leaving directory" last, which a metric reads as the value 1."""
    (tmp_path / "Makefile").write_text("bench:\n\t@echo 42\n")
    monkeypatch.setenv("MAKEFLAGS", "w")
    monkeypatch.setenv("MAKELEVEL", "1")
    result = commands.run("make -s -C . bench", tmp_path)
    assert result.output.strip().splitlines()[-1] == "42", result.output

"""The private HOME and TMPDIR folder of the harness's own tools (child_env) does not outlive
its process: removed at a normal exit, and after a `kill -9` by the next process to start.
Nothing else is removed: a live owner's folder, another host's, a link, a folder not ours."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autoresearch.safety import child_env

# A process that makes its private folder, says where it is, and waits: until killed, or
# ("exit") until its stdin closes, then exits normally.
OWNER = (
    "import sys, time\n"
    "from autoresearch.safety import child_env\n"
    "print(child_env.for_tool()['HOME'], flush=True)\n"
    "if sys.argv[1] == 'wait': time.sleep(120)\n"
    "else: sys.stdin.read()\n"
)


def start(tmp: Path, then: str) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, then],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    home = Path(proc.stdout.readline().strip())
    assert home.parent.parent == tmp and home.is_dir()
    return proc, home.parent


def private_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(child_env.PREFIX + "*"))


def stale(tmp: Path, name: str, owner_line: str) -> Path:
    folder = tmp / (child_env.PREFIX + name)
    (folder / "home").mkdir(parents=True)
    (folder / child_env.OWNER).write_text(owner_line)
    return folder


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_folder_a_killed_process_left_is_removed_when_the_next_one_starts(tmp_path):
    killed, left = start(tmp_path, "wait")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert left.is_dir()  # SIGKILL: no atexit ran
    living, own = start(tmp_path, "wait")
    try:
        assert not left.exists()
        assert own.is_dir()  # a live owner's folder stays
        exited, third = start(tmp_path, "exit")
        exited.stdin.close()  # now it exits
        assert exited.wait(timeout=60) == 0
        assert own.is_dir() and not third.exists()  # removed at its normal exit
    finally:
        living.kill()
        living.wait()


def test_a_folder_whose_pid_now_names_another_process_is_removed(tmp_path):
    # Our own pid, but a start time that is not ours: the kernel reused the pid.
    folder = stale(tmp_path, "reused", f"{os.getpid()} 1 {child_env._host()}\n")
    assert child_env.sweep_stale(tmp_path) == [folder]
    assert private_folders(tmp_path) == []


def test_a_live_owners_folder_stays(tmp_path):
    stale(tmp_path, "live", child_env._owner_line(os.getpid()))
    assert child_env.sweep_stale(tmp_path) == []
    assert len(private_folders(tmp_path)) == 1


@pytest.mark.parametrize(
    "owner_line",
    [
        "{pid} 1 another-host/pid[1]\n",  # a pid of another machine or pid namespace
        "",  # no owner line yet: being made right now, or by an older harness
        "not an owner line\n",
    ],
)
def test_a_folder_whose_owner_cannot_be_judged_here_stays(tmp_path, owner_line):
    stale(tmp_path, "other", owner_line.format(pid=dead_pid()))
    assert child_env.sweep_stale(tmp_path) == []
    assert len(private_folders(tmp_path)) == 1


def test_a_link_or_a_file_with_the_prefix_is_never_followed_or_removed(tmp_path):
    elsewhere = stale(tmp_path / "elsewhere", "x", f"{dead_pid()} 1 {child_env._host()}\n")
    (tmp_path / (child_env.PREFIX + "link")).symlink_to(elsewhere)
    (tmp_path / (child_env.PREFIX + "file")).write_text(f"{dead_pid()} 1 {child_env._host()}\n")
    assert child_env.sweep_stale(tmp_path) == []
    assert elsewhere.is_dir() and len(private_folders(tmp_path)) == 2


def test_a_dead_owners_folder_is_removed(tmp_path):
    stale(tmp_path, "dead", f"{dead_pid()} 1 {child_env._host()}\n")
    assert len(child_env.sweep_stale(tmp_path)) == 1
    assert private_folders(tmp_path) == []

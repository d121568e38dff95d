"""The Landlock box of the harness's git (safety/gitbox.py): a program a repository's config
names (a clean filter, run by the harness's `git add`) reads no file outside the worktree,
its git directories and the system's programs, root-only ones included; writes nowhere
else; opens no socket; and the box leaves no mount behind. Each attack is run through the
harness's own call, as a session runs it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch.safety import git as ar_git
from autoresearch.safety import gitbox
from autoresearch.safety import jail as jails

# The filter's interpreter: the system's (the box shows /usr, not a Python under a home).
PYTHON = shutil.which("python3", path="/usr/bin:/bin")
pytestmark = [
    pytest.mark.skipif(
        gitbox.usable() is None, reason="no Landlock ABI 6, or no C compiler to build gitbox"
    ),
    pytest.mark.skipif(PYTHON is None, reason="no python3 in /usr/bin for the filter"),
]
# Under the checkout: a folder the bwrap jail shows, so a refusal here is the box's.
VISIBLE = Path(__file__).resolve().parents[2]


@pytest.fixture
def worktree(tmp_path) -> Path:
    target = make_repo(tmp_path / "target", {"calc.py": "X = 1\n"})
    place = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, place, "autoresearch/s", ar_git.head(target))
    return place


def with_filter(worktree: Path, program: str) -> None:
    """A clean filter in the repository's own config that runs the Python `program`
    (then passes the file through), selected for calc.py."""
    common = ar_git.common_dir(worktree)
    script = common / "attack.py"
    script.write_text(program)
    git(common.parent, "config", "filter.x.clean", f"{PYTHON} {script}; cat")
    (worktree / ".gitattributes").write_text("calc.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")


def staged(worktree: Path) -> str:
    ar_git.worktree_git(worktree, "add", "calc.py")
    return git(worktree, "diff", "--cached", "--name-only")


def attempt(action: str, report: Path) -> str:
    """Python that tries `action` and writes what happened to `report`."""
    return (
        "import socket, sys\n"
        "try:\n" + "".join(f"    {line}\n" for line in action.splitlines()) + "    said = 'done'\n"
        "except OSError as e:\n"
        "    said = f'refused {e.errno}'\n"
        f"open({str(report)!r}, 'a').write(said + '\\n')\n"
    )


def test_the_harness_git_runs_in_the_box_by_default(worktree):
    said = ar_git.confined(["git", "add", "x"], ("add", "x"), ar_git._bound(worktree))
    assert said[0] == str(gitbox.EXE) and "bwrap" not in " ".join(said)
    assert ar_git.confinement().startswith("landlock")


@pytest.mark.skipif(os.geteuid() != 0, reason="root-only files are root's to test")
def test_a_filter_cannot_read_etc_shadow(worktree):
    seen = worktree / "seen.txt"
    with_filter(
        worktree, attempt(f"open({str(seen)!r}, 'a').write(open('/etc/shadow').read())", seen)
    )
    assert staged(worktree) == "calc.py"  # git did its work
    assert seen.read_text().strip() == "refused 13"
    assert "root:" not in seen.read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="root-only files are root's to test")
def test_a_filter_cannot_read_a_root_only_file_the_bwrap_jail_would_show(worktree):
    vault = Path(tempfile.mkdtemp(prefix=".vault-", dir=VISIBLE))
    try:
        (vault / "secret").write_text("ROOTONLYdeadbeef\n")
        (vault / "secret").chmod(0o600)
        seen = worktree / "seen.txt"
        with_filter(worktree, attempt(f"print(open('{vault}/secret').read())", seen))
        assert staged(worktree) == "calc.py"
        assert seen.read_text().strip() == "refused 13"
    finally:
        shutil.rmtree(vault)


def test_a_filter_writes_nowhere_but_the_worktree_and_git_directories(worktree, tmp_path):
    seen = worktree / "seen.txt"
    record = ar_git.record_of(worktree)
    common = ar_git.common_dir(worktree)
    outside = [record, tmp_path / "planted", Path(tempfile.gettempdir()) / "gitbox-planted"]
    outside.append(common / "planted")  # the common directory's top: read only
    outside.append(common / "objects" / "planted")  # every session's and the user's objects
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    inside = admin / "inside"  # the worktree's own git directory
    lines = [f"open({str(p)!r}, 'a').write('x')" for p in outside]
    program = "".join(attempt(line, seen) for line in lines)
    program += attempt(f"open({str(inside)!r}, 'w').write('x')", seen)
    before = record.read_text()
    with_filter(worktree, program)
    assert staged(worktree) == "calc.py"
    assert seen.read_text().split("\n")[:-1] == ["refused 13"] * 5 + ["done"]
    assert record.read_text() == before
    assert not (tmp_path / "planted").exists() and not (common / "planted").exists()
    assert not (Path(tempfile.gettempdir()) / "gitbox-planted").exists()


# What the user's own git runs or reads later, unconfined, from the common git directory
# (the user's `.git`): a hook, the config (a filter, an fsmonitor, core.hooksPath) and the
# attributes that select a filter.
PLANTS = {
    "hooks/post-checkout": "#!/bin/sh\ntouch /tmp/owned\n",
    "config": "[core]\n\thooksPath = /tmp\n",
    "info/attributes": "* filter=x\n",
}


def plant(common: Path, seen: Path) -> str:
    """Python that tries to leave each of PLANTS in `common`, then a folder of its own."""
    tries = [f"open({str(common / rel)!r}, 'a').write({text!r})" for rel, text in PLANTS.items()]
    tries.append(f"import os; os.mkdir({str(common / 'hooks2')!r})")
    return "".join(attempt(line, seen) for line in tries)


def test_a_filter_cannot_plant_a_hook_config_or_attributes_in_the_common_git_dir(worktree):
    common = ar_git.common_dir(worktree)
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text("")
    seen = worktree / "seen.txt"
    with_filter(worktree, plant(common, seen))
    before = {rel: (common / rel).read_bytes() for rel in ("config", "info/attributes")}
    assert staged(worktree) == "calc.py"  # git did its work: its own writes went through
    assert seen.read_text().split("\n")[:-1] == ["refused 13"] * 4
    assert not (common / "hooks" / "post-checkout").exists()
    assert not (common / "hooks2").exists()
    assert {rel: (common / rel).read_bytes() for rel in before} == before


def test_a_commondir_a_filter_points_elsewhere_stops_the_next_call(worktree):
    # The worktree's own git directory is writable in the box; its `commondir` names the
    # git directory every later call (and box) uses.
    admin = ar_git.worktree_admin(worktree)
    fake = worktree / "fake-git"
    program = f"import os; os.makedirs({str(fake / 'objects')!r}, exist_ok=True)\n"
    program += f"open({str(admin / 'commondir')!r}, 'w').write({str(fake)!r})\n"
    with_filter(worktree, program)
    ar_git.worktree_git(worktree, "add", "calc.py")
    with pytest.raises(ar_git.ForgedGitLink, match="commondir"):
        ar_git.worktree_git(worktree, "status")


def test_in_the_bwrap_fallback_a_filter_cannot_plant_a_hook_or_config(worktree, monkeypatch):
    if not jails.probe().works:
        pytest.skip("bubblewrap cannot run here")
    monkeypatch.setattr(gitbox, "usable", lambda: None)
    common = ar_git.common_dir(worktree)
    seen = worktree / "seen.txt"
    with_filter(worktree, plant(common, seen))
    before = (common / "config").read_bytes()
    assert staged(worktree) == "calc.py"
    # A read-only mount: EROFS (30); info/ does not exist, so its file cannot be made (2 or 30).
    said = seen.read_text().split("\n")[:-1]
    assert len(said) == 4 and all(s.startswith("refused") for s in said), said
    assert not (common / "hooks" / "post-checkout").exists()
    assert not (common / "hooks2").exists()
    assert (common / "config").read_bytes() == before


def test_a_filter_cannot_connect_to_a_tcp_listener_on_localhost(worktree):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    seen = worktree / "seen.txt"
    action = f"socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'stolen')"
    with_filter(worktree, attempt(action, seen))
    try:
        assert staged(worktree) == "calc.py"
        assert seen.read_text().strip() == "refused 1"
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing queued: the box never connected
    finally:
        listener.close()


def test_a_filter_cannot_send_a_udp_datagram(worktree):
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(0.5)
    port = receiver.getsockname()[1]
    seen = worktree / "seen.txt"
    action = (
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"s.sendto(b'stolen', ('127.0.0.1', {port}))"
    )
    with_filter(worktree, attempt(action, seen))
    try:
        assert staged(worktree) == "calc.py"
        assert seen.read_text().strip() == "refused 1"
        with pytest.raises(TimeoutError):
            receiver.recvfrom(64)
    finally:
        receiver.close()


def test_a_filter_cannot_reach_a_unix_socket_of_the_host(worktree, tmp_path):
    # A daemon's socket file (docker.sock): Landlock does not cover connecting to one.
    path = tmp_path / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(0.5)
    seen = worktree / "seen.txt"
    action = f"socket.socket(socket.AF_UNIX).connect({str(path)!r})"
    with_filter(worktree, attempt(action, seen))
    try:
        assert staged(worktree) == "calc.py"
        assert seen.read_text().strip() == "refused 1"
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


def test_a_filter_cannot_signal_a_process_outside_the_box(worktree):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        seen = worktree / "seen.txt"
        with_filter(worktree, attempt(f"import os; os.kill({sleeper.pid}, 9)", seen))
        assert staged(worktree) == "calc.py"
        assert seen.read_text().strip() == "refused 1"
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_box_makes_no_mount_and_boxes_side_by_side_all_work(worktree, tmp_path):
    mounts = Path("/proc/self/mountinfo").read_text()
    others = []
    for n in range(3):
        target = make_repo(tmp_path / f"t{n}", {"calc.py": "X = 1\n"})
        place = tmp_path / f"s{n}" / "worktree"
        ar_git.open_worktree(target, place, "autoresearch/s", ar_git.head(target))
        others.append(place)
    results: list[str] = []

    def change(place: Path) -> None:
        for k in range(3):
            (place / "calc.py").write_text(f"X = {k + 2}\n")
            ar_git.worktree_git(place, "add", "calc.py")
            results.append(ar_git.worktree_git(place, "status", "--porcelain"))

    threads = [threading.Thread(target=change, args=(p,)) for p in [worktree, *others]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["M  calc.py"] * 12
    assert Path("/proc/self/mountinfo").read_text() == mounts


def test_the_box_never_runs_the_program_when_it_cannot_be_built():
    marker = Path(tempfile.mkdtemp()) / "ran"
    try:
        line = gitbox.argv([], [], ["sh", "-c", f"touch {marker}"])
        done = subprocess.run([line[0], "--bogus", *line[1:]], capture_output=True, text=True)
        assert done.returncode == 125 and "gitbox: unknown argument --bogus" in done.stderr
        assert not marker.exists()
    finally:
        shutil.rmtree(marker.parent)


def test_without_landlock_the_harness_git_falls_back_to_the_bwrap_jail(worktree, monkeypatch):
    if not jails.probe().works:
        pytest.skip("bubblewrap cannot run here")
    monkeypatch.setattr(gitbox, "usable", lambda: None)
    said = ar_git.confined(["git", "add", "x"], ("add", "x"), ar_git._bound(worktree))
    assert "bwrap" in said[0]
    assert ar_git.confinement().startswith("bwrap")
    (worktree / "calc.py").write_text("X = 5\n")
    assert staged(worktree) == "calc.py"


def test_a_batch_in_the_box_stops_at_the_first_failure_and_keeps_every_stderr(worktree):
    (worktree / "calc.py").write_text("X = 9\n")
    proc = ar_git.worktree_batch(
        worktree, ("add", "nothing-here"), ("add", "calc.py"), may_fail=frozenset({0})
    )
    assert proc.returncode == 0 and "nothing-here" in proc.stderr
    assert git(worktree, "diff", "--cached", "--name-only") == "calc.py"
    proc = ar_git.worktree_batch(worktree, ("add", "nothing-here"), ("reset", "-q", "--hard"))
    assert proc.returncode != 0
    assert git(worktree, "diff", "--cached", "--name-only") == "calc.py"  # no reset ran


def test_a_batch_runs_in_one_box_and_only_its_last_call_speaks(worktree, monkeypatch):
    (worktree / "calc.py").write_text("X = 7\n")
    started = []
    real_run = subprocess.run

    def run(cmd, *args, **kw):
        started.append(cmd)
        return real_run(cmd, *args, **kw)

    monkeypatch.setattr(ar_git.subprocess, "run", run)
    proc = ar_git.worktree_batch(
        worktree, ("status", "--porcelain"), ("add", "calc.py"), ("diff", "--cached", "--stat")
    )
    assert proc.returncode == 0
    assert [c[0] for c in started] == [str(gitbox.EXE)]  # one process: the box
    assert "calc.py" in proc.stdout and "M calc.py" not in proc.stdout  # status's went away


def test_a_batch_longer_than_one_box_takes_runs_each_call_in_a_box_of_its_own(worktree):
    (worktree / "calc.py").write_text("X = 8\n")
    calls = [("status", "--porcelain")] * gitbox.MAX_BATCH + [("add", "calc.py")]
    proc = ar_git.worktree_batch(worktree, *calls, ("diff", "--cached", "--name-only"))
    assert proc.returncode == 0 and proc.stdout.strip() == "calc.py"


def test_a_process_the_first_call_of_a_batch_leaves_ends_before_the_next(worktree):
    # The filter runs once a call: the first leaves a process behind, the second looks
    # for it (a signal 0 reaches a process of the same box, alive or not yet reaped).
    seen = worktree / "seen.txt"
    left = worktree / "left.pid"
    action = (
        f"import os, subprocess\nif os.path.exists({str(left)!r}):\n"
        f"    pid = int(open({str(left)!r}).read())\n"
        "    try:\n        os.kill(pid, 0)\n        said = 'alive'\n"
        "    except ProcessLookupError:\n        said = 'gone'\n"
        f"    open({str(seen)!r}, 'w').write(said)\n"
        "else:\n"
        "    p = subprocess.Popen(['sleep', '600'], start_new_session=True,\n"
        "        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"    open({str(left)!r}, 'w').write(str(p.pid))\n"
    )
    with_filter(worktree, action)
    (worktree / ".gitattributes").write_text("*.py filter=x\n")
    (worktree / "other.py").write_text("Y = 1\n")
    ar_git.worktree_batch_git(worktree, ("add", "calc.py"), ("add", "other.py"))
    assert seen.read_text() == "gone"


def test_the_box_refuses_a_batch_whose_lengths_do_not_add_up(tmp_path):
    marker = tmp_path / "ran"
    line = gitbox.argv([str(tmp_path)], [], [])
    done = subprocess.run(
        [*line[:-1], "-x", "2", "--", "touch", str(marker), "extra"], capture_output=True, text=True
    )
    assert done.returncode == 125 and "add up to 2 words, 3 follow" in done.stderr
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: commands leave nobody's files")
def test_root_git_in_the_box_resets_and_cleans_what_a_command_left_as_nobody(worktree):
    (worktree / "calc.py").write_text("X = 3\n")
    os.chown(worktree / "calc.py", jails.JAIL_UID, jails.JAIL_GID)
    (worktree / "left").mkdir()
    (worktree / "left" / "junk.txt").write_text("junk\n")
    os.chown(worktree / "left", jails.JAIL_UID, jails.JAIL_GID)
    (worktree / "left").chmod(0o700)
    ar_git.worktree_batch_git(worktree, ("reset", "-q", "--hard"), ("clean", "-ffdxq"))
    assert (worktree / "calc.py").read_text() == "X = 1\n"
    assert not (worktree / "left").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="root owns the host's files")
def test_a_filter_cannot_change_the_mode_or_owner_of_a_file_outside(worktree, tmp_path):
    # Landlock leaves a file's metadata alone, and root owns the host's files: chmod on
    # /etc/shadow would need no capability at all.
    secret = tmp_path / "secret"
    secret.write_text("ROOTONLY\n")
    secret.chmod(0o600)
    seen = worktree / "seen.txt"
    program = attempt(f"import os; os.chmod({str(secret)!r}, 0o644)", seen)
    program += attempt(f"import os; os.chown({str(secret)!r}, 65534, 65534)", seen)
    program += attempt(f"import os; os.setxattr({str(secret)!r}, 'user.x', b'1')", seen)
    with_filter(worktree, program)
    assert staged(worktree) == "calc.py"
    assert seen.read_text().split("\n")[:-1] == ["refused 1"] * 3
    assert secret.stat().st_mode & 0o777 == 0o600 and secret.stat().st_uid == 0


def test_a_filter_cannot_lower_the_limits_of_a_process_outside(worktree):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        seen = worktree / "seen.txt"
        action = f"import resource; resource.prlimit({sleeper.pid}, resource.RLIMIT_NOFILE, (3, 3))"
        with_filter(worktree, attempt(action, seen))
        assert staged(worktree) == "calc.py"
        assert seen.read_text().strip() == "refused 1"
        limits = Path(f"/proc/{sleeper.pid}/limits").read_text()
        assert not any(
            line.startswith("Max open files") and " 3 " in line for line in limits.splitlines()
        )
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_filter_leaves_nothing_in_the_home_the_harness_tools_share(worktree):
    # ruff and bandit, run by the harness, read their configuration from the same private
    # HOME: a boxed git has a HOME of its own.
    home = Path(ar_git._bound(worktree)["HOME"])
    seen = worktree / "seen.txt"
    program = attempt(f"open({str(home / 'planted')!r}, 'w').write('x')", seen)
    program += attempt("import os; open(os.environ['HOME'] + '/own', 'w').write('x')", seen)
    with_filter(worktree, program)
    assert staged(worktree) == "calc.py"
    assert seen.read_text().split("\n")[:-1] == ["refused 13", "done"]
    assert not (home / "planted").exists()


def gone(pid: int) -> bool:
    """Whether `pid` has ended (gone, or a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_process_a_filter_leaves_behind_ends_with_the_call(worktree):
    # The bwrap jail's pid namespace ended it; a process left running in the box could
    # change the worktree after the harness read it.
    seen = worktree / "seen.txt"
    left = worktree / "left.pid"
    action = (
        "import subprocess\n"
        "p = subprocess.Popen(['sleep', '600'], start_new_session=True,\n"
        "    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(left)!r}, 'w').write(str(p.pid))"
    )
    with_filter(worktree, attempt(action, seen))
    assert staged(worktree) == "calc.py"
    assert seen.read_text().strip() == "done"
    pid = int(left.read_text())
    try:
        deadline = time.monotonic() + 10  # killed before the call returned: a short wait
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(pid)
    finally:
        if not gone(pid):
            os.kill(pid, 9)


def test_the_box_reads_no_path_folder_around_the_worktree_nor_the_root(tmp_path):
    # A PATH naming `/`, or the folder that holds the worktree and the record of its git
    # directories, would open them to the box.
    worktree = tmp_path / "store" / "worktree"
    path = os.pathsep.join(["/", str(tmp_path / "store"), str(tmp_path), "/usr/bin", "rel/bin"])
    assert gitbox.path_folders(path, [str(worktree)]) == ["/usr/bin"]


def test_a_patch_the_call_names_outside_the_worktree_is_read_in_the_box(worktree, tmp_path):
    (worktree / "calc.py").write_text("X = 7\n")
    patch = tmp_path / "change.patch"
    patch.write_text(git(worktree, "diff") + "\n")
    ar_git.worktree_batch_git(worktree, ("reset", "-q", "--hard"))
    proc = ar_git.worktree_proc(worktree, "apply", "--index", str(patch))
    assert proc.returncode == 0, proc.stderr
    assert (worktree / "calc.py").read_text() == "X = 7\n"
    assert not any(
        w == str(tmp_path)
        for w in ar_git._boxed(["git"], ("apply", str(patch)), ar_git._bound(worktree))
    )  # the file alone, not its folder


LINGER = (
    "import subprocess, time\n"
    "p = subprocess.Popen(['sleep', '600'], start_new_session=True,\n"
    "    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "open({pids!r}, 'w').write(f'{{p.pid}} {{__import__(\"os\").getpid()}}')\n"
    "time.sleep(600)\n"
)


def wait_gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 10  # the box was told to end: a short wait
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return all(gone(p) for p in pids)


def test_a_call_past_its_time_limit_ends_the_whole_box(worktree):
    pids = worktree / "pids.txt"
    with_filter(worktree, LINGER.format(pids=str(pids)))
    with pytest.raises(subprocess.TimeoutExpired):
        ar_git.raw(worktree, "add", "calc.py", timeout=5)  # the filter never ends
    left = [int(p) for p in pids.read_text().split()]
    try:
        assert wait_gone(left)  # the filter and the daemon it started
    finally:
        for pid in left:
            if not gone(pid):
                os.kill(pid, 9)


def test_the_box_ends_when_the_harness_dies(worktree):
    pids = worktree / "pids.txt"
    with_filter(worktree, LINGER.format(pids=str(pids)))
    code = (
        "from pathlib import Path\n"
        "from autoresearch.safety import git\n"
        f"git.worktree_git(Path({str(worktree)!r}), 'add', 'calc.py')\n"
    )
    harness = subprocess.Popen([sys.executable, "-c", code])
    left: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not (pids.is_file() and len(pids.read_text().split()) == 2):
            assert time.monotonic() < deadline and harness.poll() is None
            time.sleep(0.05)
        left = [int(p) for p in pids.read_text().split()]
        harness.kill()  # as kill -9 would
        harness.wait()
        assert wait_gone(left)
    finally:
        for pid in left:
            if not gone(pid):
                os.kill(pid, 9)


def test_checkout_index_runs_a_smudge_filter_in_the_box(worktree):
    # checkout-index writes the worktree's files (the gate's overlay taken back, a
    # measurement's pristine tree): a smudge filter the repository's config names runs.
    common = ar_git.common_dir(worktree)
    seen = worktree / "seen.txt"
    script = common / "smudge.py"
    script.write_text(attempt(f"open({str(common / 'config')!r}, 'a').write('')", seen))
    git(common.parent, "config", "filter.x.smudge", f"{PYTHON} {script}; cat")
    (worktree / ".gitattributes").write_text("calc.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")
    ar_git.worktree_git(worktree, "checkout-index", "-f", "-q", "--", "calc.py")
    assert (worktree / "calc.py").read_text() == "X = 1\n"  # git did its work
    assert seen.read_text() == "refused 13\n"

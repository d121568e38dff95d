"""Attempts to make the agent tools reach outside the worktree, hang, crash or lie.

One table: each row is an attempt and the refusal it must get back as an `is_error`
result. Every attempt runs under a watchdog (a hang is a failure, not a stuck suite),
and afterwards nothing outside the worktree, no protected file and nothing the attempt
named may have changed.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from autoresearch.agents.tools import MAX_EDIT_BYTES, MAX_PATTERN_CHARS, Toolbox

SECRET = "TOP SECRET, outside the worktree"
APP = "def add(a, b):\n    return a + b\n"
WATCHDOG_S = 120


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """A repo, a linked worktree of it (as sessions use), and traps in and around it."""
    base = tmp_path_factory.mktemp("attacks")
    repo = base / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "app.py").write_text(APP)
    (repo / "tests" / "test_app.py").write_text("from src.app import add\n")
    (repo / "measure.sh").write_text("echo 42\n")
    (repo / ".gitignore").write_text("secret.env\nbuild/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    wt = base / "wt"
    git(repo, "worktree", "add", "-q", "-b", "session", str(wt))
    (base / "outside.txt").write_text(SECRET)
    (base / "outside_dir").mkdir()
    (base / "outside_dir" / "secret.txt").write_text(SECRET)
    (wt / "secret.env").write_text("TOKEN=1\n")
    (wt / "build").mkdir()
    (wt / "build" / "out.txt").write_text("built\n")
    (wt / "slow.txt").write_text("a" * 60 + "b\n")
    os.symlink(base / "outside.txt", wt / "link_out")
    os.symlink(base / "outside_dir", wt / "linkdir")
    os.symlink("measure.sh", wt / "alias_to_measure")
    os.symlink("loop_b", wt / "loop_a")
    os.symlink("loop_a", wt / "loop_b")
    os.symlink("self", wt / "self")
    os.link(base / "outside.txt", wt / "hardlink_out")
    os.link(wt / "measure.sh", wt / "src" / "measure_alias.sh")
    os.mkfifo(wt / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(wt / "sock"))
    try:
        os.mknod(wt / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # like /dev/zero
    except OSError:
        pass  # not allowed here (no CAP_MKNOD): the device rows are skipped
    mounted = mount(["--bind", str(base / "outside_dir")], wt / "bind") and mount(
        ["-t", "tmpfs", "none"], wt / "mnt"
    )
    try:
        yield {"base": base, "repo": repo, "wt": wt, "mounted": mounted}
    finally:
        listener.close()
        for point in ("bind", "mnt"):
            subprocess.run(["umount", str(wt / point)], capture_output=True)


def mount(args: list[str], point: Path) -> bool:
    """Mount for the mount rows when this machine allows it (root with CAP_SYS_ADMIN)."""
    point.mkdir()
    try:
        return subprocess.run(["mount", *args, str(point)], capture_output=True).returncode == 0
    except OSError:
        return False


def toolbox(world, team: str = "green") -> Toolbox:
    return Toolbox(
        team,
        world["wt"],
        test_command="true",
        protected=["measure.sh", "tests/**"],
        exclude=["vendor/**"],
        search_time_s=1.0,
        hooks={"report_finding": lambda **kw: "recorded"},
    )


OUTSIDE_ABS = "__OUTSIDE_ABS__"
EVIL_ABS = "__EVIL_ABS__"
ABSOLUTE = "absolute paths are not allowed"
DOTDOT = "'..' is not allowed"
TILDE = "starting with '~'"
GIT_DIR = "the .git directory is managed by the harness"
LINK_OUT = "leads outside the repository"
CONTROL = "control character"
PROTECTED = "what setup adds: the files the measurement reads, the tests) and cannot be changed"
NOT_REGULAR = "is not a regular file"
HARD_LINK_OUT = "is a hard link to a file outside the repository"
LOOP = "cannot be resolved"
IGNORED = "is ignored by git"
DEEP = "nested too deeply"
MOUNTED = "mounted inside the repository"
NESTED_GROUPS = "(" * 450 + "a" + ")" * 450

# (attempt, tool, arguments, the refusal it gets)
ATTEMPTS = [
    # climbing out by name
    ("dotdot", "read_file", {"path": "../outside.txt"}, DOTDOT),
    ("etc-passwd", "read_file", {"path": "/etc/passwd"}, ABSOLUTE),
    ("absolute-outside", "read_file", {"path": OUTSIDE_ABS}, ABSOLUTE),
    ("dotdot-in-middle", "read_file", {"path": "src/../../outside.txt"}, DOTDOT),
    ("home", "read_file", {"path": "~/.bashrc"}, TILDE),
    ("tilde", "read_file", {"path": "~"}, TILDE),
    ("url-dotdot", "read_file", {"path": "%2e%2e/outside.txt"}, DOTDOT),
    ("url-slash", "read_file", {"path": "..%2foutside.txt"}, DOTDOT),
    ("url-upper", "read_file", {"path": "%2E%2E%2Foutside.txt"}, DOTDOT),
    ("backslash-dotdot", "read_file", {"path": "..\\outside.txt"}, DOTDOT),
    ("windows-drive", "read_file", {"path": "C:\\Windows\\win.ini"}, ABSOLUTE),
    ("nul-byte", "read_file", {"path": "src/app.py\x00.txt"}, CONTROL),
    ("newline", "read_file", {"path": "src/app.py\n"}, CONTROL),
    ("very-long-path", "read_file", {"path": "a/" * 3000}, "longer than 4096"),
    ("list-parent", "list_files", {"path": ".."}, DOTDOT),
    ("list-root", "list_files", {"path": "/"}, ABSOLUTE),
    ("search-parent", "search", {"pattern": "SECRET", "path": "../"}, DOTDOT),
    ("write-parent", "write_file", {"path": "../evil.txt", "content": "x"}, DOTDOT),
    ("write-absolute", "write_file", {"path": EVIL_ABS, "content": "x"}, ABSOLUTE),
    # climbing out through links
    ("symlink-out", "read_file", {"path": "link_out"}, LINK_OUT),
    ("symlink-dir-out", "read_file", {"path": "linkdir/secret.txt"}, LINK_OUT),
    ("search-symlink-out", "search", {"pattern": "SECRET", "path": "link_out"}, LINK_OUT),
    ("search-symlink-dir", "search", {"pattern": "SECRET", "path": "linkdir"}, LINK_OUT),
    ("write-symlink-out", "write_file", {"path": "link_out", "content": "x"}, LINK_OUT),
    ("write-into-link-dir", "write_file", {"path": "linkdir/new.txt", "content": "x"}, LINK_OUT),
    (
        "edit-symlink-out",
        "edit_file",
        {"path": "link_out", "old_str": "TOP", "new_str": "x"},
        LINK_OUT,
    ),
    ("hard-link-read", "read_file", {"path": "hardlink_out"}, HARD_LINK_OUT),
    ("hard-link-search", "search", {"pattern": "SECRET", "path": "hardlink_out"}, HARD_LINK_OUT),
    (
        "hard-link-edit-oracle",
        "edit_file",
        {"path": "hardlink_out", "old_str": "TOP", "new_str": "x"},
        HARD_LINK_OUT,
    ),
    ("hard-link-write", "write_file", {"path": "hardlink_out", "content": "x"}, HARD_LINK_OUT),
    (
        "hard-link-to-protected",
        "write_file",
        {"path": "src/measure_alias.sh", "content": "echo 0"},
        "has other names",
    ),
    ("symlink-loop-read", "read_file", {"path": "loop_a"}, LOOP),
    ("symlink-loop-write", "write_file", {"path": "loop_b", "content": "x"}, LOOP),
    ("symlink-self-list", "list_files", {"path": "self"}, LOOP),
    ("symlink-loop-search", "search", {"pattern": "x", "path": "loop_a"}, LOOP),
    # the repository's own machinery
    ("git-file", "read_file", {"path": ".git"}, GIT_DIR),
    ("git-config", "read_file", {"path": ".git/config"}, GIT_DIR),
    ("git-upper-case", "read_file", {"path": ".GIT/config"}, GIT_DIR),
    ("git-via-dotdot", "read_file", {"path": "src/../.git"}, DOTDOT),
    ("git-url-encoded", "read_file", {"path": "%2egit/config"}, GIT_DIR),
    ("list-git", "list_files", {"path": ".git"}, GIT_DIR),
    ("git-hook", "write_file", {"path": ".git/hooks/pre-commit", "content": "rm -rf /"}, GIT_DIR),
    ("git-file-redirect", "write_file", {"path": ".git", "content": "gitdir: /tmp/x"}, GIT_DIR),
    # protected, out of scope, ignored
    ("protected", "write_file", {"path": "measure.sh", "content": "echo 0"}, PROTECTED),
    ("protected-dot-slash", "write_file", {"path": "./measure.sh", "content": "echo 0"}, PROTECTED),
    (
        "protected-symlink",
        "write_file",
        {"path": "alias_to_measure", "content": "echo 0"},
        PROTECTED,
    ),
    ("protected-tests", "write_file", {"path": "tests/test_app.py", "content": ""}, PROTECTED),
    (
        "protected-edit",
        "edit_file",
        {"path": "tests/test_app.py", "old_str": "add", "new_str": "sub"},
        PROTECTED,
    ),
    ("protected-new-test", "write_file", {"path": "tests/new_test.py", "content": ""}, PROTECTED),
    ("protected-roundabout", "write_file", {"path": "src//../measure.sh", "content": "0"}, DOTDOT),
    ("out-of-scope", "write_file", {"path": "vendor/lib.py", "content": "x"}, "outside the scope"),
    ("ignored-file", "write_file", {"path": "secret.env", "content": "TOKEN=2"}, IGNORED),
    ("ignored-dir", "write_file", {"path": "build/new.txt", "content": "x"}, IGNORED),
    (
        "ignored-edit",
        "edit_file",
        {"path": "build/out.txt", "old_str": "built", "new_str": "x"},
        IGNORED,
    ),
    ("root", "write_file", {"path": "", "content": "x"}, "cannot write the repository root"),
    ("directory", "write_file", {"path": "src", "content": "x"}, "is a directory"),
    # files that are not files
    ("fifo-read", "read_file", {"path": "pipe"}, NOT_REGULAR),
    ("fifo-write", "write_file", {"path": "pipe", "content": "x"}, NOT_REGULAR),
    ("fifo-edit", "edit_file", {"path": "pipe", "old_str": "x", "new_str": "y"}, NOT_REGULAR),
    ("fifo-search", "search", {"pattern": "x", "path": "pipe"}, NOT_REGULAR),
    ("socket-read", "read_file", {"path": "sock"}, NOT_REGULAR),
    ("socket-write", "write_file", {"path": "sock", "content": "x"}, NOT_REGULAR),
    ("device-read", "read_file", {"path": "zero"}, NOT_REGULAR),
    ("device-search", "search", {"pattern": "x", "path": "zero"}, NOT_REGULAR),
    ("device-write", "write_file", {"path": "zero", "content": "x"}, NOT_REGULAR),
    # mounts inside the worktree: a bind mount leads outside with no link to follow
    ("bind-mount-read", "read_file", {"path": "bind/secret.txt"}, MOUNTED),
    ("bind-mount-write", "write_file", {"path": "bind/new.txt", "content": "x"}, MOUNTED),
    ("bind-mount-list", "list_files", {"path": "bind"}, MOUNTED),
    ("bind-mount-search", "search", {"pattern": "SECRET", "path": "bind"}, MOUNTED),
    ("tmpfs-mount-write", "write_file", {"path": "mnt/x.txt", "content": "x"}, MOUNTED),
    # inputs that used to crash the stage or hang it
    ("glob-reversed-range", "list_files", {"glob": "[z-a]"}, "invalid glob"),
    ("search-glob-reversed", "search", {"pattern": "x", "glob": "src/[9-0].py"}, "invalid glob"),
    ("catastrophic-regex", "search", {"pattern": "(a|aa)+$"}, "stopped after 1s"),
    ("nested-groups", "search", {"pattern": NESTED_GROUPS}, DEEP),
    ("5000-nested-groups", "search", {"pattern": "(" * 5000 + ")" * 5000}, "longer than"),
    ("long-pattern", "search", {"pattern": "a" * (MAX_PATTERN_CHARS + 1)}, "longer than"),
    ("bad-regex", "search", {"pattern": "(unclosed"}, "invalid regular expression"),
    ("deep-arguments", "read_file", {"path": "__DEEP__"}, DEEP),
    (
        "lone-surrogate-write",
        "write_file",
        {"path": "src/app.py", "content": "x = '\ud800'\n"},
        "cannot be written as UTF-8",
    ),
    (
        "lone-surrogate-edit",
        "edit_file",
        {"path": "src/app.py", "old_str": "a + b", "new_str": "'\udfff'"},
        "cannot be written as UTF-8",
    ),
    (
        "huge-edit",
        "edit_file",
        {"path": "src/app.py", "old_str": "a + b", "new_str": "x" * (MAX_EDIT_BYTES + 1)},
        f"at most {MAX_EDIT_BYTES}",
    ),
    # malformed calls
    (
        "extra-argument",
        "write_file",
        {"path": "src/app.py", "content": "x", "mode": "0777"},
        "Additional properties",
    ),
    (
        "empty-old-str",
        "edit_file",
        {"path": "src/app.py", "old_str": "", "new_str": "x"},
        "should be non-empty",
    ),
    ("path-not-string", "read_file", {"path": 7}, "is not of type 'string'"),
    ("no-arguments", "read_file", {}, "'path' is a required property"),
    ("missing-file", "read_file", {"path": "does/not/exist.py"}, "does not exist"),
    ("tool-of-another-team", "run_linter", {}, "not available to the green team"),
    (
        "red-tool",
        "report_finding",
        {"severity": "high", "title": "t", "location": "l", "issue": "i", "impact": "m"},
        "not available to the green team",
    ),
    ("no-shell", "exec", {"command": "cat /etc/passwd"}, "unknown tool"),
    ("no-bash", "bash", {"command": "rm -rf /"}, "unknown tool"),
]


def _fill(args: dict, world) -> dict:
    filled = dict(args)
    if filled.get("path") == OUTSIDE_ABS:
        filled["path"] = str(world["base"] / "outside.txt")
    if filled.get("path") == EVIL_ABS:
        filled["path"] = str(world["base"] / "evil_abs.txt")
    if filled.get("path") == "__DEEP__":
        deep: object = "x"
        for _ in range(5000):
            deep = [deep]
        filled["path"] = deep
    return filled


def call_with_watchdog(box: Toolbox, tool: str, args: dict):
    """The tool's result; a call still running after WATCHDOG_S fails the test (a hang)."""
    outcome: list = []
    worker = threading.Thread(target=lambda: outcome.append(box.call(tool, args)), daemon=True)
    worker.start()
    worker.join(timeout=WATCHDOG_S)
    assert not worker.is_alive(), f"{tool} did not return within {WATCHDOG_S}s"
    assert outcome, f"{tool} raised instead of returning a result"
    return outcome[0]


def state_of(world) -> dict[Path, bytes]:
    wt = world["wt"]
    watched = [
        world["base"] / "outside.txt",
        world["base"] / "outside_dir" / "secret.txt",
        wt / "measure.sh",
        wt / "tests" / "test_app.py",
        wt / "src" / "app.py",
        wt / "secret.env",
        wt / "build" / "out.txt",
    ]
    return {path: path.read_bytes() for path in watched}


def test_the_table_covers_every_kind_of_attempt():
    assert len(ATTEMPTS) >= 90
    assert len({name for name, *_ in ATTEMPTS}) == len(ATTEMPTS)


@pytest.mark.parametrize(
    ("tool", "args", "refusal"),
    [row[1:] for row in ATTEMPTS],
    ids=[row[0] for row in ATTEMPTS],
)
def test_attempt_is_refused_with_its_reason(world, tool, args, refusal):
    if args.get("path") == "zero" and not (world["wt"] / "zero").exists():
        pytest.skip("cannot make a device node here")
    if str(args.get("path")).startswith(("bind", "mnt")) and not world["mounted"]:
        pytest.skip("cannot mount here")
    before = state_of(world)
    result = call_with_watchdog(toolbox(world), tool, _fill(args, world))
    assert result.is_error, result.content
    assert refusal in result.content
    assert SECRET not in result.content
    assert state_of(world) == before
    for made in ("evil.txt", "evil_abs.txt", "outside_dir/new.txt", "outside_dir/x.txt"):
        assert not (world["base"] / made).exists()
    for made in ("vendor", "build/new.txt", "tests/new_test.py"):
        assert not (world["wt"] / made).exists()
    assert stat.S_ISFIFO(os.lstat(world["wt"] / "pipe").st_mode)
    assert os.lstat(world["wt"] / "src" / "measure_alias.sh").st_nlink == 2


def test_no_temporary_file_is_left_behind_by_a_failed_write(world):
    leftovers = [p for p in world["wt"].rglob("*.autoresearch-tmp")]
    assert leftovers == []


# -- what the same traps still allow ---------------------------------------------------------


def test_ignored_files_can_be_read_but_not_written(world):
    box = toolbox(world)
    assert box.call("read_file", {"path": "secret.env"}).content == "1\tTOKEN=1"


def test_writes_into_ignored_paths_pass_when_the_spec_allows_them(world):
    box = Toolbox("green", world["wt"], allow_ignored_writes=True)
    assert not box.call("write_file", {"path": "build/allowed.txt", "content": "ok\n"}).is_error
    assert (world["wt"] / "build" / "allowed.txt").read_text() == "ok\n"
    (world["wt"] / "build" / "allowed.txt").unlink()


def test_a_hard_link_whose_names_are_all_inside_can_be_read(world):
    box = toolbox(world)
    assert box.call("read_file", {"path": "src/measure_alias.sh"}).content == "1\techo 42"


def test_list_and_search_show_no_trap(world):
    box = toolbox(world)
    listing = box.call("list_files", {}).content.splitlines()
    for hidden in ("secret.env", "build/out.txt", "link_out", "pipe", "sock", "loop_a", "self"):
        assert hidden not in listing
    hits = call_with_watchdog(box, "search", {"pattern": "SECRET|TOKEN", "glob": "*"})
    assert SECRET not in hits.content and "TOKEN" not in hits.content
    assert "hardlink_out" not in hits.content.split(":")[0]

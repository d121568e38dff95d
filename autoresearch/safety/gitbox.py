"""The box the harness's own git runs in where the kernel has Landlock (ABI 6 or later):
`gitbox.c`, a small launcher that restricts itself with Landlock and seccomp and then
starts git. No namespace and no mount: nothing of it is visible to another process, so
boxes built side by side (sessions, cluster jobs) cannot disturb each other, and a call
costs a fork and two execs, no more.

What a boxed git, and every program it starts (a filter a repository brought), may do:
open the worktree, its own git directory (never the common one: no ref, no object, see
safety/git.py's COMMON_WRITABLE), a throwaway index's folder and a HOME and TMPDIR of its
own for reading and writing; read the common git directory; read and execute the system's
programs and libraries (`SYSTEM_READ`), a few files of /etc (`ETC_READ`), the PATH's
folders and the files a call names; nothing else, whatever a file's mode and whatever capabilities
root keeps. No socket of any family, no TCP, no signal to a process outside the box
(docs/safety.md, "The harness's git")."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

SOURCE = Path(__file__).with_name("gitbox.c")
# Built by `make sandbox`, or here on first use where a C compiler is installed.
EXE = Path(__file__).with_name("gitbox")
NEEDED_ABI = 6  # TCP rules (4) and scoping of signals and abstract unix sockets (6)
# What git and the shell a filter runs in need from the host: programs and libraries.
SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Files of /etc the dynamic linker and libc read; never the folder (/etc/shadow is in it).
ETC_READ = (
    "/etc/ld.so.cache",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
)
DEVICES_READ = ("/dev/urandom", "/dev/zero")
DEVICES_WRITE = ("/dev/null",)
CFLAGS = ("-O2", "-Wall")
# The most calls one box runs in a row (gitbox.c's MAX_PROGRAMS); a longer batch: a box each.
MAX_BATCH = 16


def build(exe: Path = EXE) -> bool:
    """Compile the launcher into `exe` (static where the C library allows it: one exec
    less to load); False where no compiler is installed or it fails. The file appears
    whole or not at all: builds side by side each write their own, then rename it."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gitbox-", dir=exe.parent)
    except OSError:
        return False
    os.close(fd)
    try:
        for static in (["-static"], []):
            done = subprocess.run(
                [cc, *CFLAGS, *static, "-o", tmp, str(SOURCE)], capture_output=True, text=True
            )
            if done.returncode == 0:
                os.chmod(tmp, 0o755)
                os.replace(tmp, exe)
                return True
        return False
    finally:
        Path(tmp).unlink(missing_ok=True)


@functools.cache
def usable() -> Path | None:
    """The launcher, where it can box a program here (checked once per process): built and
    up to date, the kernel's Landlock ABI high enough, and a trial run inside the box
    starts. None: the harness's git falls back to the bwrap jail (say which in setup)."""
    if not SOURCE.is_file():
        return None
    fresh = EXE.is_file() and EXE.stat().st_mtime >= SOURCE.stat().st_mtime
    if not fresh and not build():
        return None
    try:
        abi = subprocess.run([str(EXE), "--abi"], capture_output=True, text=True, timeout=30)
        if int(abi.stdout.strip() or 0) < NEEDED_ABI:
            return None
        trial = subprocess.run(
            argv([], [], ["true"]), capture_output=True, stdin=subprocess.DEVNULL, timeout=30
        )
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    return EXE if trial.returncode == 0 else None


def argv(
    writable: Iterable[str],
    readable: Iterable[str],
    cmd: list[str],
    *,
    keep_caps: bool = False,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The command line that runs `cmd` in the box: `writable` may be changed, `readable`
    read, and the host's programs, libraries and a few files of /etc read; `env` set in
    its environment. `keep_caps` (root only): git keeps CAP_DAC_OVERRIDE and CAP_FOWNER,
    to change the files a command left in the worktree as nobody; the box, not the file
    modes, bounds what it reaches."""
    line = [str(EXE), *(["-k"] if keep_caps else [])]
    for path in (*SYSTEM_READ, *ETC_READ, *DEVICES_READ, *readable):
        line += ["-r", path]
    for path in (*DEVICES_WRITE, *writable):
        line += ["-w", path]
    for name, value in (env or {}).items():
        line += ["-e", f"{name}={value}"]
    return [*line, "--", *cmd]


def private_folders(tool_home: str) -> dict[str, str]:
    """The HOME and TMPDIR of boxed git calls: folders of their own beside the harness's
    private HOME (`tool_home`, child_env's, removed with it), never that HOME itself,
    where a boxed program could leave a configuration for the next tool (ruff reads one
    from ~/.config)."""
    root = Path(tool_home).parent / "gitbox"
    folders = {"HOME": root / "home", "TMPDIR": root / "tmp"}
    for folder in folders.values():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {name: str(folder) for name, folder in folders.items()}


def path_folders(path: str, too_wide: Iterable[str]) -> list[str]:
    """The PATH's folders a boxed git may read and run programs from (git-lfs, a filter's
    interpreter): absolute ones, never `/` nor a folder around one of `too_wide` (the
    worktree's parents hold the session's files and the record of its git directories)."""
    wide = [Path(p) for p in too_wide if p]
    folders = []
    for entry in path.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        folder = Path(os.path.normpath(entry))
        if folder == Path("/") or any(folder == w or folder in w.parents for w in wide):
            continue
        folders.append(str(folder))
    return folders

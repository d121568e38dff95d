"""What a command really ran, watched with strace: the programs it executed and the files
it opened, each with the working directory of the process that did it.

`strace -f -ff` writes one file per process; every process's working directory and standard
input are followed from its parent's (at the fork) through its own `chdir` and `dup2`, so
a relative path is read where the process stood, not where the command started.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autoresearch.measure.imports import ImportLog

# What is watched. `clone`, `fork` and `vfork` only to know which process made which;
# `dup2`/`dup3` for the file a redirection puts on standard input (`sh < bench.sh`).
SYSCALLS = "execve,execveat,open,openat,openat2,chdir,fchdir,fork,vfork,clone,clone3,dup2,dup3"
# Only their failures count: a shell's $PATH search and a tool's look for its config file
# (pytest.ini, pyproject.toml, conftest.py) are stat calls that find nothing.
PROBES = ("stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2")
AT_CALLS = {"openat", "openat2", "newfstatat", "statx", "faccessat", "faccessat2"}
PREFIX = "t"  # strace -ff writes <folder>/t.<pid>
# Strings as long as a path may be: a cut argument would name the wrong file.
STRING_LIMIT = 4096
MISSING = "strace is not installed (Debian/Ubuntu: apt-get install strace)"

_LINE = re.compile(r"^(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|\?)(?P<rest>.*)$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"(\.\.\.)?')
_FD = re.compile(r"^\s*(?P<fd>\d+|AT_FDCWD)(?:<(?P<path>[^>]*)>)?")
_RET_PATH = re.compile(r"^<(?P<path>[^>]*)>")


@functools.cache
def strace() -> str | None:
    """The strace program, or None when this machine has none."""
    return shutil.which("strace")


def wrapper(folder: Path) -> list[str]:
    """The argv that runs a command under strace, its trace going to `folder`."""
    exe = strace()
    if exe is None:
        raise FileNotFoundError(MISSING)
    # --seccomp-bpf: only the watched calls stop the process, so a traced run is not much
    # slower than an untraced one. -qq and signal=none keep exits and signals out.
    flags = ["-f", "-ff", "-qq", "-y", "--seccomp-bpf", "-e", "signal=none"]
    flags += ["-e", f"trace={SYSCALLS},{','.join(PROBES)}", "-s", str(STRING_LIMIT)]
    return [exe, *flags, "-o", str(Path(folder) / PREFIX), "--"]


@dataclass(frozen=True)
class Exec:
    """One successful execve: the file run (absolute, as the process named it), its argv,
    the working directory and the file on its standard input (None: not a file)."""

    path: str
    argv: tuple[str, ...]
    cwd: str
    stdin: str | None = None


@dataclass(frozen=True)
class Read:
    """A file a process opened for reading and read itself (not put on its standard
    input or output by a redirection), with the program the process was running."""

    path: str
    program: str


@dataclass(frozen=True)
class Trace:
    """What one traced run did. `opened`: files opened for reading, each both as named
    (against the process's cwd, links not followed) and as the kernel resolved it;
    `read_by`: those of them a process read itself, and which program it was."""

    execs: tuple[Exec, ...] = ()
    opened: tuple[str, ...] = ()
    read_by: tuple[Read, ...] = ()
    # Paths a process tried to execute or open for reading that did not exist: a file
    # created there later (earlier on $PATH, a cache it trusts) changes what runs.
    missing: tuple[str, ...] = ()
    # What Python processes imported and looked for in vain, logged from inside them.
    imports: ImportLog | None = None


def written(folder: Path) -> bool:
    """Whether strace wrote a trace there (it did not when it could not start)."""
    return any(Path(folder).glob(f"{PREFIX}.*"))


def read(folder: Path, cwd: Path) -> Trace:
    """The trace strace wrote to `folder` for a command started in `cwd`."""
    files = {}
    for path in Path(folder).glob(f"{PREFIX}.*"):
        pid = path.name.rpartition(".")[2]
        if pid.isdigit():
            files[int(pid)] = path
    born: set[int] = set()
    parsed: dict[int, list[tuple[str, str, str, str]]] = {}
    for pid, path in files.items():
        lines = path.read_text(errors="replace").splitlines()
        parsed[pid] = [m for line in lines if (m := _split(line))]
        for call, _, ret, _ in parsed[pid]:
            if call in ("fork", "vfork", "clone", "clone3") and ret.isdigit():
                born.add(int(ret))
    roots = sorted(pid for pid in files if pid not in born)
    seen = _Seen()
    todo = [(pid, _Process(seen, str(Path(cwd).absolute()), None, "")) for pid in roots]
    while todo:
        pid, process = todo.pop(0)
        for call, args, ret, rest in parsed.get(pid, []):
            child = process.follow(call, args, ret, rest)
            if child is not None and child in files:
                todo.append((child, process.fork()))
        process.end()
    return Trace(
        tuple(seen.execs),
        tuple(dict.fromkeys(seen.opened)),
        tuple(seen.reads),
        tuple(dict.fromkeys(seen.missing)),
    )


@dataclass
class _Seen:
    execs: list[Exec] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass
class _Process:
    """One process as its calls go by: where it stands, what is on its standard input,
    the program it runs, and the files it opened (fd -> paths) not yet redirected."""

    seen: _Seen
    cwd: str
    stdin: str | None
    program: str
    fds: dict[str, tuple[str, ...]] = field(default_factory=dict)
    redirected: set[str] = field(default_factory=set)

    def fork(self) -> _Process:
        return _Process(self.seen, self.cwd, self.stdin, self.program)

    def end(self) -> None:
        """Files opened under the current program and never redirected: read by it."""
        for fd in list(self.fds):
            self._close(fd)

    def _close(self, fd: str) -> None:
        for path in self.fds.pop(fd, ()):
            if path not in self.redirected:
                self.seen.reads.append(Read(path, self.program))

    def follow(self, call: str, args: str, ret: str, rest: str) -> int | None:
        """Apply one finished call; the pid of a new child, if it made one."""
        failed = ret == "?" or ret.startswith("-")
        if call in ("fork", "vfork", "clone", "clone3"):
            return None if failed else int(ret)
        if failed:
            if "ENOENT" in rest and call in ("execve", "open", "openat", "openat2", *PROBES):
                self._missing(call, args)
            return None
        if call in PROBES:
            return None
        if call in ("execve", "execveat"):
            base, args = _dirfd(args, self.cwd) if call == "execveat" else (self.cwd, args)
            strings = _strings(args)
            if strings:
                path = _join(base, strings[0]) if strings[0] else base
                self.seen.execs.append(Exec(path, tuple(strings[1:]), self.cwd, self.stdin))
                self.end()
                self.program = path
        elif call in ("open", "openat", "openat2"):
            self._opened(call, args, ret, rest)
        elif call == "chdir":
            strings = _strings(args)
            if strings:
                self.cwd = _join(self.cwd, strings[0])
        elif call == "fchdir":
            fd = _FD.match(args)
            if fd and fd["path"]:
                self.cwd = fd["path"]
        elif call in ("dup2", "dup3"):
            source = _FD.match(args)
            target = args.split(",")[1].strip().split("<")[0] if "," in args else ""
            if source and target in ("0", "1", "2"):
                self.redirected.update(self.fds.get(source["fd"], ()))
            if target == "0":
                self.stdin = source["path"] if source and source["path"] else None
        return None

    def _missing(self, call: str, args: str) -> None:
        base, args = _dirfd(args, self.cwd) if call in AT_CALLS else (self.cwd, args)
        strings = _strings(args)
        if strings and strings[0] and (call == "execve" or "O_WRONLY" not in args):
            self.seen.missing.append(_join(base, strings[0]))

    def _opened(self, call: str, args: str, ret: str, rest: str) -> None:
        base, args = _dirfd(args, self.cwd) if call in AT_CALLS else (self.cwd, args)
        strings = _strings(args)
        if not strings or "O_WRONLY" in args or "O_DIRECTORY" in args:
            return
        named = _join(base, strings[0])
        real = _RET_PATH.match(rest)
        paths = (named, real["path"]) if real and real["path"] != named else (named,)
        self.seen.opened.extend(paths)
        # The fd number is free again, so what had it was closed: its reading is over.
        self._close(ret)
        self.fds[ret] = paths
        if ret == "0":
            self.stdin = paths[-1]


def _split(line: str) -> tuple[str, str, str, str] | None:
    match = _LINE.match(line)
    if match is None:
        return None
    return match["call"], match["args"], match["ret"], match["rest"].strip()


def _dirfd(args: str, cwd: str) -> tuple[str, str]:
    """(the folder a *at call's first argument names, the remaining arguments)."""
    match = _FD.match(args)
    if match is None:
        return cwd, args
    base = match["path"] or cwd
    return base, args[match.end() :].lstrip(", ")


def _strings(args: str) -> list[str]:
    """The quoted strings of a call's arguments, unescaped (argv arrays included)."""
    out = []
    for match in _STRING.finditer(args):
        raw = match.group(1)
        try:
            text = codecs.escape_decode(raw.encode("latin-1", "backslashreplace"))[0]
            out.append(text.decode("utf-8", errors="surrogateescape"))
        except (ValueError, UnicodeError):
            out.append(raw)
    return out


def _join(base: str, path: str) -> str:
    return os.path.normpath(os.path.join(base, path))

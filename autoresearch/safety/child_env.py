"""The environment of every process the harness starts: an allowlist, never a blocklist.

git, ruff, bandit, the target's commands in or out of the jail, `finalize`'s test runs and
`plan`'s dry runs all get the same few names from our environment (what a program needs to
run and to find its toolchain) plus the names the spec lists in `commands.pass_env`. The
API key, the spec's `secrets` and every credential nobody listed (GITHUB_TOKEN, AWS_*, a
cloud's token) are in none of them: a blocklist misses whatever it did not foresee.
HOME and TMPDIR point at private folders (docs/safety.md, "Environments").
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

# What a program needs to run: where programs are, how to speak, what time it is.
BASE = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")
BASE_PREFIXES = ("LC_",)
# Where a toolchain lives when it is not on PATH's default places; names of folders and
# versions, never credentials.
TOOLCHAIN = (
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "JAVA_HOME",
    "GOROOT",
    "GOPATH",
    "GOCACHE",
    "GOMODCACHE",
    "GOFLAGS",
    "GOTOOLCHAIN",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "PYENV_ROOT",
    "PYENV_VERSION",
)
# Toolchains that live under $HOME unless told otherwise: a private HOME would hide them
# from a command run without the jail (the jail shows them at their place, read-only).
HOME_TOOLCHAINS = {
    "CARGO_HOME": ".cargo",
    "RUSTUP_HOME": ".rustup",
    "PYENV_ROOT": ".pyenv",
    "GOPATH": "go",
}
# Never passed, whatever a spec lists: the model API's key and settings.
NEVER_PREFIXES = ("ANTHROPIC_",)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def allowed(
    pass_env: Iterable[str] = (),
    secrets: Iterable[str] = (),
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The allowlisted names of `source` (our environment) and those in `pass_env`;
    never ANTHROPIC_* or a name in `secrets`. HOME and TMPDIR are the caller's to set."""
    source = os.environ if source is None else source
    wanted = set(BASE) | set(TOOLCHAIN) | set(pass_env)
    drop = set(secrets or ())
    return {
        key: value
        for key, value in source.items()
        if (key in wanted or key.startswith(BASE_PREFIXES))
        and key not in drop
        and not key.startswith(NEVER_PREFIXES)
    }


def problem(names: object, secrets: Iterable[str] = ()) -> str | None:
    """Why a spec's `commands.pass_env` cannot be used, or None."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return "must be a list of environment variable names"
    secret = set(secrets or ())
    for name in names:
        if not NAME.match(name):
            return f"{name!r} is not an environment variable name"
        if name.startswith(NEVER_PREFIXES):
            return f"{name} is the model API's; it is never passed to a command"
        if name in secret:
            return f"{name} is also listed in `secrets`: a secret is never passed"
    return None


PREFIX = "autoresearch-env-"
OWNER = "owner"  # in each private folder: `pid start host`, to tell a dead owner's apart


class _Private:
    """One private folder per process for the HOME and TMPDIR of the harness's own tools
    (git, ruff, bandit): empty, mode 0700, removed when the process ends. A process killed
    with SIGKILL cannot remove its own: the next one to make its folder removes those whose
    owner is dead (`sweep_stale`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._root: Path | None = None
        self._folders = ("", "")

    def root(self) -> Path:
        with self._lock:
            if self._root is None or not os.path.isdir(self._root):
                root = Path(tempfile.mkdtemp(prefix=PREFIX))
                for name in ("home", "tmp"):
                    (root / name).mkdir(mode=0o700)
                (root / OWNER).write_text(_owner_line(os.getpid()))
                atexit.register(shutil.rmtree, root, True)
                sweep_stale(root.parent, keep=root)
                self._root, self._folders = root, (str(root / "home"), str(root / "tmp"))
            return self._root

    def folders(self) -> tuple[str, str]:
        """HOME and TMPDIR, in `root()` (made again if it went): the strings kept with it."""
        with self._lock:
            if self._root is not None and os.path.isdir(self._root):
                return self._folders
        self.root()
        with self._lock:
            return self._folders


_private = _Private()


def sweep_stale(parent: Path, keep: Path | None = None) -> list[Path]:
    """Remove the private folders in `parent` that are ours (our uid, a real folder, not a
    link), were made on this host and in this pid namespace, and whose owner process is
    gone (a pid that is dead or now names a process started at another time). A folder
    without a readable owner line (still being made, or made by another program) is left
    alone. Returns those removed."""
    removed = []
    host = _host()
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX) or (keep is not None and entry.path == str(keep)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            pid_text, start, owner_host = (Path(entry.path) / OWNER).read_text().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if owner_host != host or _alive(pid, start):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def _owner_line(pid: int) -> str:
    return f"{pid} {_start_time(pid) or '-'} {_host()}\n"


def _host() -> str:
    """This host and pid namespace: a pid means something only there (a container that
    shares /tmp with the machine numbers its processes apart)."""
    try:
        space = os.readlink("/proc/self/ns/pid").replace(":", "")
    except OSError:
        space = "-"
    return f"{socket.gethostname()}/{space}"


def _start_time(pid: int) -> str | None:
    """When the process started, in clock ticks since boot (Linux), or None: with it a pid
    the kernel has given to a new process is not taken for the old one."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its end.
    return stat_line.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process has the pid: not ours to judge
    now = _start_time(pid)
    return start == "-" or now is None or now == start


def for_tool(pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The environment of a tool the harness runs itself (git, ruff, bandit): the
    allowlist, with a private HOME and TMPDIR that hold nothing of the user's."""
    home, tmp = _private.folders()
    env = allowed(pass_env) if pass_env else _own_allowed()
    env["HOME"] = home
    env["TMPDIR"] = tmp
    return env


class _OwnAllowed:
    """`allowed()` of our own environment, filtered again only when that environment
    changed: every harness git call needs it, and filtering decodes every name and value
    (os.environ's own store, bytes, is compared whole instead: one C loop). The answer is
    a copy, and the pair (store, answer) is swapped in at once, so threads share it
    safely."""

    def __init__(self) -> None:
        self._last: tuple[dict[bytes, bytes], dict[str, str]] | None = None

    def __call__(self) -> dict[str, str]:
        store = getattr(os.environ, "_data", None)
        if not isinstance(store, dict):
            return allowed()  # another Python's os.environ: filtered every time
        last = self._last
        if last is None or last[0] != store:
            # The answer from the copy itself: a change made meanwhile is never paired
            # with an answer filtered before it.
            copy = dict(store)
            decoded = {os.fsdecode(key): os.fsdecode(value) for key, value in copy.items()}
            last = (copy, allowed(source=decoded))
            self._last = last
        return dict(last[1])


_own_allowed = _OwnAllowed()


def toolchain_homes(env: Mapping[str, str], home: str | None) -> dict[str, str]:
    """For a command given a private HOME: where the toolchains under the real `home` are
    (CARGO_HOME, RUSTUP_HOME, ...), for those `env` does not name already."""
    if not home or not os.path.isabs(home):
        return {}
    found = {}
    for name, folder in HOME_TOOLCHAINS.items():
        path = Path(home) / folder
        if name not in env and path.is_dir():
            found[name] = str(path)
    return found

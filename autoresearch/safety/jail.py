"""The jail the target's commands run in: a bubblewrap sandbox where it works, else none.

What each level protects, and what it does not, is in docs/safety.md. In short, inside a
`bwrap` jail a command sees the host's files read-only, may change only the session's
worktree, gets an empty home and /tmp of its own (every other home is hidden, whatever
$HOME says), cannot see the user's checkout, the `sessions/` folder or our process's
environment, and has no network unless the spec asks.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from autoresearch.errors import SpecError
from autoresearch.safety import words as shell_words

SANDBOX_MODES = ("auto", "bwrap", "none")
SPEC_FILE_HINT = "config/sessions/<name>.yaml"

# Replaced inside the jail by a private, writable folder that is thrown away afterwards.
SCRATCH_DIRS = {"tmp": Path("/tmp"), "vartmp": Path("/var/tmp"), "home": None}  # None: the home
# Where people's homes are: every folder in these is someone's, whether passwd lists it or not.
HOME_ROOTS = (Path("/home"),)
FIRST_USER_UID = 1000  # below it, passwd's homes are system folders (/bin, /var/mail, /var/www)
# Never hidden as a home, nor a home around them: a system account's "home" is often one.
SYSTEM_DIRS = tuple(Path(p) for p in ("/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc", "/dev"))
# Replaced by an empty folder: /run holds the host's daemon sockets (docker.sock, the user's
# session bus), and a unix socket can be connected to through a read-only mount.
EMPTIED_DIRS = (Path("/run"),)
# A PATH entry hidden by the jail is shown read-only again; for `<prefix>/bin` the whole
# prefix is (a virtualenv needs its lib/ and pyvenv.cfg, a node or cargo install its lib/).
PREFIX_MARKERS = ("pyvenv.cfg", "conda-meta", "lib")
# Folders under $HOME that hold many tools' files, not one tool: only these parts are shown.
SHARED_HOMES = {".local": ("bin", "lib")}
# Variables naming sockets and folders the jail does not have.
GONE_INSIDE = ("XDG_RUNTIME_DIR", "SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS")
MAX_LINKS = 2000  # symlinks followed per PATH folder (a folder of thousands is not a toolchain)


class JailError(SpecError):
    """The spec asks for a sandbox this machine cannot provide."""


@dataclass(frozen=True)
class Probe:
    works: bool
    reason: str = ""  # why bwrap cannot run here, when it cannot


@functools.cache
def probe() -> Probe:
    """Whether bubblewrap can build a jail on this machine (checked once per process)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return Probe(False, "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    argv = [exe, *_isolation_flags(network=False), "--ro-bind", "/", "/"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Probe(False, f"bwrap did not run: {e}")
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return Probe(False, f"bwrap cannot create namespaces here: {why}")
    return Probe(True)


@dataclass(frozen=True)
class Jail:
    """How the target's commands are confined. Built once per session, passed to every run.

    `mode` is "bwrap" or "none" (`auto` is resolved when the jail is built). Inside a
    bwrap jail only `worktree` is writable; `hide` are shown as empty read-only folders
    and `read_only` are shown read-only even where they lie inside a hidden folder.
    """

    mode: str
    worktree: Path
    hide: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    network: bool = False
    requested: str = "auto"
    note: str | None = None  # why `auto` fell back to none: say it once per session
    writable: tuple[Path, ...] = ()  # besides the worktree (e.g. a folder for test reports)

    def describe(self) -> dict:
        """What setup.json records about the jail."""
        return {
            "sandbox": self.mode,
            "requested": self.requested,
            "network": self.network if self.mode == "bwrap" else True,
            "note": self.note,
        }

    def argv(
        self,
        command: str,
        cwd: Path,
        scratch: Path,
        env: Mapping[str, str],
        info_fd: int | None = None,
        wrapper: Sequence[str] = (),
    ) -> list[str]:
        """The bwrap command line that runs `command` with `sh -c` in `cwd`.

        `scratch` is an empty host folder for the jail's private $HOME and /tmp; `info_fd`
        receives bwrap's JSON with the PID of the jail's init (killing it ends the jail).
        `wrapper` runs the shell inside the jail (strace, to see what the command runs).
        """
        if self.mode != "bwrap":
            raise ValueError(f"a jail in mode {self.mode!r} has no bwrap command line")
        cwd = Path(cwd).absolute()
        if not _within(cwd, self.worktree):
            raise ValueError(f"{cwd} is outside the jail's worktree {self.worktree}")
        argv = [shutil.which("bwrap") or "bwrap", *_isolation_flags(self.network)]
        if info_fd is not None:
            argv += ["--info-fd", str(info_fd)]
        argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc"]

        home, others = _homes(env)
        covers: list[tuple[Path, list[str]]] = []
        for name, where in SCRATCH_DIRS.items():
            where = where or home
            if where is None:
                continue
            (scratch / name).mkdir(parents=True, exist_ok=True)
            covers.append((where, ["--bind", str(scratch / name), str(where)]))
        emptied = [p for p in EMPTIED_DIRS if p.is_dir()]
        covers += [(p, ["--tmpfs", str(p)]) for p in emptied]
        covered = [where for where, _ in covers]
        shown = self._shown(env, covered, self._dns(emptied) + self._named(command, env, covered))
        hidden = [p for p in _unique([*self.hide, *others]) if p.exists()]
        for path in hidden:
            # An empty, read-only folder (or an empty file) in its place.
            how = ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
            covers.append((path, how))

        reveals = [(p, ["--ro-bind", str(p), str(p)]) for p in shown]
        reveals.append((self.worktree, ["--bind", str(self.worktree), str(self.worktree)]))
        reveals += [(p, ["--bind", str(p), str(p)]) for p in self.writable if p.exists()]
        # The worktree's `.git` stays read-only: a linked worktree's file (pointed elsewhere,
        # it would hand git a directory of the command's making) or a plain clone's folder.
        own_git = self.worktree / ".git"
        if own_git.exists() and not own_git.is_symlink():
            reveals.append((own_git, ["--ro-bind", str(own_git), str(own_git)]))
        # Shallow paths first, so a path shown again inside a covered one is mounted after it.
        # (The sort is stable: at equal depth a cover still comes before what it shows again.)
        for _, how in sorted([*covers, *reveals], key=lambda op: _depth(op[0])):
            argv += how
        # Read-only last: mounting a path shown again needs its mount point made first.
        for path in hidden:
            if path.is_dir():
                argv += ["--remount-ro", str(path)]
        argv += ["--chdir", str(cwd), "--", *wrapper, "/bin/sh", "-c", command]
        return argv

    def allowing(self, *paths: Path) -> Jail:
        """The same jail, with `paths` writable at the same place inside."""
        return replace(self, writable=self.writable + tuple(Path(p).absolute() for p in paths))

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The environment inside: TMPDIR and sockets of the host name places that are gone."""
        inner = dict(env)
        if self.mode == "bwrap":
            inner["TMPDIR"] = "/tmp"
            for name in GONE_INSIDE:
                inner.pop(name, None)
        return inner

    def _dns(self, emptied: list[Path]) -> list[Path]:
        """With the network on, the resolver's folder when /etc/resolv.conf links into /run."""
        resolv = Path("/etc/resolv.conf").resolve()
        if self.network and any(_within(resolv, p) for p in emptied):
            return [resolv.parent]
        return []

    def _shown(self, env: Mapping[str, str], covered: list[Path], extra: list[Path]) -> list[Path]:
        """Paths shown read-only inside covered folders: the git metadata and the toolchain."""
        wanted = [*self.read_only, *extra]
        home, others = _homes(env)
        places = [*covered, *self.hide, *others]
        # Where toolchains live (pyenv, cargo, a checkout's .venv), a PATH entry's whole tool
        # folder is shown: ~/.pyenv/shims needs ~/.pyenv/libexec and ~/.pyenv/versions.
        homes = [p for p in [home, *others, *self.hide] if p is not None]
        entries = []
        for entry in env.get("PATH", "").split(os.pathsep):
            if entry and os.path.isabs(entry) and Path(entry).is_dir():
                entries.append(Path(os.path.normpath(entry)))
        for path in entries:
            if not any(_within(path, p) for p in places) or _within(path, self.worktree):
                continue
            root = max((h for h in homes if _within(path, h)), key=_depth, default=None)
            tool = root / path.relative_to(root).parts[0] if root and path != root else None
            if tool is not None and tool.name in SHARED_HOMES:
                wanted += [tool / part for part in SHARED_HOMES[tool.name]]
            elif tool is not None and not _within(self.worktree, tool):
                wanted += [tool, *(c for c in _companions(tool, env) if c.exists())]
            else:
                wanted.append(self._prefix(path, places))
            # A virtualenv's python is often a link into a Python installed under $HOME.
            for linked in _linked_outside(path, places):
                if not any(_within(linked, w) for w in wanted):
                    wanted.append(self._prefix(linked.parent, places))
        shown: list[Path] = []
        for path in sorted(_unique(wanted), key=_depth):
            # Never a covered place itself or a folder around one (or around the worktree).
            too_wide = any(_within(p, path) for p in [*places, self.worktree])
            if path.exists() and not too_wide and not any(_within(path, s) for s in shown):
                shown.append(path)
        return shown

    def _named(self, command: str, env: Mapping[str, str], covered: list[Path]) -> list[Path]:
        """Programs the command names by absolute path inside a covered place, with their
        installation: `/home/u/proj/.venv/bin/python -m pytest` needs that .venv."""
        try:
            words = shell_words.split(command)
        except ValueError:
            return []
        home, others = _homes(env)
        places = [*covered, *self.hide, *others]
        found = []
        for word in words:
            if word.startswith("~/") and home is not None:
                word = str(home / word[2:])
            if not word.startswith("/"):
                continue
            path = Path(os.path.normpath(word))
            inside = any(_within(path, p) for p in places) and not _within(path, self.worktree)
            # Programs only: naming `~/.ssh/id_rsa` (or its folder) must not show it.
            if not inside or not path.is_file() or not os.access(path, os.X_OK):
                continue
            for where in _unique([path, path.resolve()]):
                found.append(self._prefix(where.parent, places))
        return found

    def _prefix(self, path: Path, places: list[Path]) -> Path:
        """`<prefix>/bin` -> `<prefix>` for an installation (it needs its lib/), else `path`."""
        prefix = path.parent
        too_wide = any(_within(p, prefix) for p in [*places, self.worktree])
        if path.name == "bin" and not too_wide and _is_prefix(prefix):
            return prefix
        return path


def build_jail(
    settings: Mapping | None,
    worktree: Path,
    hide: Iterable[Path] = (),
    read_only: Iterable[Path] = (),
) -> Jail:
    """The jail for a session's commands, from the spec's `commands` settings.

    `worktree` is the only folder commands may change; `hide` are folders they must not see
    (the `sessions/` folder, other worktrees). The checkout the worktree belongs to is hidden
    too, and its git directory shown read-only, so `git` in the worktree keeps working.
    """
    settings = settings or {}
    requested = settings.get("sandbox", "auto")
    if requested not in SANDBOX_MODES:
        raise JailError(
            f"{SPEC_FILE_HINT}: commands.sandbox must be one of {', '.join(SANDBOX_MODES)}, "
            f"got {requested!r}"
        )
    network = bool(settings.get("network", False))
    worktree = Path(worktree).absolute()
    if requested == "none":
        return Jail("none", worktree, network=True, requested=requested)
    check = probe()
    if not check.works:
        if requested == "bwrap":
            raise JailError(
                f"{SPEC_FILE_HINT}: commands.sandbox is bwrap, but {check.reason}; "
                "install bubblewrap or set commands.sandbox: none"
            )
        note = (
            f"commands run without a sandbox: {check.reason} "
            "(commands.sandbox: auto fell back to none; see docs/safety.md)"
        )
        return Jail("none", worktree, network=True, requested=requested, note=note)
    git_dirs = git_metadata(worktree)
    checkout = [d.parent for d in git_dirs if d.name == ".git" and d.parent != worktree]
    return Jail(
        "bwrap",
        worktree,
        hide=tuple(_unique([*(Path(p).absolute() for p in hide), *checkout])),
        read_only=tuple(_unique([*git_dirs, *(Path(p).absolute() for p in read_only)])),
        network=network,
        requested=requested,
    )


def git_metadata(worktree: Path) -> list[Path]:
    """The git directories a linked worktree uses: its own and the repository's common one."""
    dot_git = worktree / ".git"
    if not dot_git.is_file():
        return []
    text = dot_git.read_text().strip()
    if not text.startswith("gitdir:"):
        return []
    own = (worktree / text.removeprefix("gitdir:").strip()).resolve()
    common = own
    if (own / "commondir").is_file():
        common = (own / (own / "commondir").read_text().strip()).resolve()
    return _unique([common, own])


def _isolation_flags(network: bool) -> list[str]:
    # --cap-drop ALL: as root, bwrap keeps every capability otherwise, and with CAP_SYS_ADMIN
    # a command could simply unmount what hides the user's checkout.
    flags = ["--die-with-parent", "--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc"]
    flags += ["--unshare-uts", "--unshare-cgroup-try"]
    return flags if network else [*flags, "--unshare-net"]


def _home(env: Mapping[str, str]) -> Path | None:
    home = env.get("HOME")
    if not home or not os.path.isabs(home) or Path(home) == Path("/"):
        return None
    return Path(os.path.normpath(home))


def _homes(env: Mapping[str, str]) -> tuple[Path | None, list[Path]]:
    """The command's home (given a private scratch folder) and every other home (hidden).

    Whatever $HOME says: unset or `/` under cron, systemd or `env -i`, the passwd entry's
    home is still ours, and other users' homes are never the target's business either.
    """
    try:
        own = _as_home(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # a uid without a passwd entry (a container's)
        own = None
    home = _home(env) or own
    found = [own] if own is not None else []
    try:
        entries = pwd.getpwall()
    except OSError:
        entries = []
    found += [_as_home(e.pw_dir) for e in entries if e.pw_uid == 0 or e.pw_uid >= FIRST_USER_UID]
    for root in HOME_ROOTS:
        try:
            found += [_as_home(str(p)) for p in root.iterdir() if p.is_dir()]
        except OSError:
            continue
    others = [p for p in _unique(found) if p is not None and p != home and p.is_dir()]
    return home, others


def _as_home(path: str) -> Path | None:
    """`path` as a home to hide, or None for one that must stay (`/`, a system folder)."""
    if not path or not os.path.isabs(path):
        return None
    home = Path(os.path.normpath(path))
    if any(_within(system, home) for system in SYSTEM_DIRS) or home == Path("/"):
        return None
    return home


def _companions(tool: Path, env: Mapping[str, str]) -> list[Path]:
    """Folders a tool folder needs beside it: ~/.cargo/bin holds rustup's proxies."""
    if tool.name == ".cargo":
        return [Path(env.get("RUSTUP_HOME") or tool.parent / ".rustup")]
    return []


def _linked_outside(folder: Path, places: list[Path]) -> list[Path]:
    """Where the symlinks in `folder` lead, when that is inside a covered place."""
    targets = []
    try:
        links = [p for p in folder.iterdir() if p.is_symlink()]
    except OSError:
        return []
    for link in links[:MAX_LINKS]:
        target = link.resolve()
        if target.exists() and any(_within(target, p) for p in places):
            targets.append(target)
    return targets


def _depth(path: Path) -> int:
    return len(path.parts)


def _is_prefix(path: Path) -> bool:
    return any((path / marker).exists() for marker in PREFIX_MARKERS)


def _within(path: Path, root: Path) -> bool:
    inside, top = str(path), str(root)
    return inside == top or inside.startswith(top.rstrip("/") + "/")


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))

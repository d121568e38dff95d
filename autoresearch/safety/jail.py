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
import stat
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from autoresearch.errors import SpecError
from autoresearch.safety import words as shell_words
from autoresearch.safety.growth import DEFAULT_GROWTH_MB, GROWTH_KEY

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
# Who a jailed command is when we run as root: nobody. As root it could read every file only
# root may read (/etc/shadow, other users' keys); a user namespace mapping it to nobody does
# not help, since the kernel still sees uid 0 outside. So bwrap keeps only the right to
# change uid, and `setpriv` drops to this uid and gid, and every capability, before the
# command starts. A caller who is not root is unprivileged already.
JAIL_UID = JAIL_GID = 65534
# The size of each private folder of a jailed command ($HOME, /tmp, /var/tmp), in MiB: a
# tmpfs of that size, so a command that fills one fails there and never fills the host's disk.
DEFAULT_TMP_SIZE_MB = 1024
TMP_SIZE_KEY = "commands.tmp_size_mb"


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
    pass_env: tuple[str, ...] = ()  # commands.pass_env: names the commands get besides the base
    tmp_size_mb: int = DEFAULT_TMP_SIZE_MB  # commands.tmp_size_mb: each private folder's size
    drop_to: int | None = None  # the uid commands run as, when we are root (else ours)
    user_note: str | None = None  # why commands run as root, when we are root and they do
    keep_caps: tuple[str, ...] = ()  # capabilities kept (the harness's own git: see git.py)
    # Writable folders shown from another host place: (where inside, what is shown there).
    # The harness's git as nobody sees the git directory through an idmapped view of it.
    sources: tuple[tuple[Path, Path], ...] = ()
    # commands.worktree_growth_mb: how much a run may grow the worktree (growth.py); 0: no bound
    worktree_growth_mb: int = DEFAULT_GROWTH_MB

    def describe(self) -> dict:
        """What setup.json records about the jail."""
        described = {
            "sandbox": self.mode,
            "requested": self.requested,
            "network": self.network if self.mode == "bwrap" else True,
            "note": self.note,
        }
        if self.mode == "bwrap":
            described["user"] = self.user()
        return described

    def user(self) -> str:
        """Who the commands run as, in words (setup.json, status)."""
        if self.drop_to is not None:
            return f"uid {self.drop_to} (nobody): root-only files are unreadable"
        if os.geteuid() == 0:
            return f"root, without capabilities: {self.user_note or 'see docs/safety.md'}"
        return f"uid {os.geteuid()} (ours, unprivileged)"

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
        if self.drop_to is not None:
            argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # for setpriv only
        for cap in self.keep_caps:
            argv += ["--cap-add", cap]
        if info_fd is not None:
            argv += ["--info-fd", str(info_fd)]
        argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc"]

        home, others = _homes(env)
        covers: list[tuple[Path, list[str]]] = []
        sized = _sized_tmpfs()
        for name, where in SCRATCH_DIRS.items():
            where = where or home
            if where is None:
                continue
            if sized:
                # A tmpfs of a fixed size: thrown away with the jail, and full at the bound.
                size = str(self.tmp_size_mb << 20)
                covers.append((where, ["--perms", "1777", "--size", size, "--tmpfs", str(where)]))
                continue
            (scratch / name).mkdir(parents=True, exist_ok=True)
            (scratch / name).chmod(0o1777)  # nobody's, when the command runs as nobody
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
        source = dict(self.sources)
        reveals += [
            (p, ["--bind", str(source.get(p, p)), str(p)]) for p in self.writable if p.exists()
        ]
        # The worktree's `.git` stays read-only: a linked worktree's file (pointed elsewhere,
        # it would hand git a directory of the command's making) or a plain clone's folder.
        own_git = self.worktree / ".git"
        if own_git.exists() and not own_git.is_symlink():
            reveals.append((own_git, ["--ro-bind", str(own_git), str(own_git)]))
        if self.drop_to is not None:
            covers += _passable(covers, reveals)
        # Shallow paths first, so a path shown again inside a covered one is mounted after it.
        # (The sort is stable: at equal depth a cover still comes before what it shows again.)
        for _, how in sorted([*covers, *reveals], key=lambda op: _depth(op[0])):
            argv += how
        # Read-only last: mounting a path shown again needs its mount point made first.
        for path in hidden:
            if path.is_dir():
                argv += ["--remount-ro", str(path)]
        argv += ["--chdir", str(cwd), "--", *self._setpriv(), *wrapper, "/bin/sh", "-c", command]
        return argv

    def _setpriv(self) -> list[str]:
        """The program that makes the command nobody, inside the jail (root callers)."""
        if self.drop_to is None:
            return []
        exe = shutil.which("setpriv") or "setpriv"
        return [exe, f"--reuid={self.drop_to}", f"--regid={JAIL_GID}", "--clear-groups", "--"]

    def hand_over(self) -> None:
        """Let the jail's user change the worktree (and the other writable folders) as a
        command could before. Its files become uid 65534's; only what is not yet is
        changed (what the harness wrote since: a reset, an agent's file). The worktree's
        own folder and `.git` file stay ours, with the folder writable by the jail's group:
        git refuses a repository whose top another user owns ("dubious ownership")."""
        if self.drop_to is None:
            return
        _share_top(self.worktree)
        _chown_tree(self.worktree, self.drop_to, JAIL_GID, skip_top=True)
        for folder in self.writable:
            _chown_tree(folder, self.drop_to, JAIL_GID)

    def hand_over_worktree(self) -> None:
        """`hand_over` for the worktree alone: the harness's git as nobody (git.py) changes
        it, and the other writable folders are not the commands' to own."""
        if self.drop_to is not None:
            _share_top(self.worktree)
            _chown_tree(self.worktree, self.drop_to, JAIL_GID, skip_top=True)

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
        if self.mode == "bwrap" and self.drop_to is not None:
            # git in the jail, as nobody, would refuse the repository as another user's
            # ("dubious ownership"); the jail shows it read-only, so trust it there.
            inner |= {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "safe.directory",
                "GIT_CONFIG_VALUE_0": "*",
            }
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
    pass_env = tuple(settings.get("pass_env") or ())
    tmp_size_mb = int(settings.get("tmp_size_mb") or DEFAULT_TMP_SIZE_MB)
    growth_mb = settings.get("worktree_growth_mb")
    growth_mb = DEFAULT_GROWTH_MB if growth_mb is None else int(growth_mb)
    if requested == "none":
        return Jail("none", worktree, network=True, requested=requested, pass_env=pass_env)
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
        return Jail(
            "none", worktree, network=True, requested=requested, note=note, pass_env=pass_env
        )
    git_dirs = git_metadata(worktree)
    checkout = [d.parent for d in git_dirs if d.name == ".git" and d.parent != worktree]
    hidden = tuple(_unique([*(Path(p).absolute() for p in hide), *checkout]))
    drop_to, user_note = _jail_user(worktree, hidden)
    return Jail(
        "bwrap",
        worktree,
        drop_to=drop_to,
        user_note=user_note,
        hide=hidden,
        read_only=tuple(_unique([*git_dirs, *(Path(p).absolute() for p in read_only)])),
        network=network,
        requested=requested,
        pass_env=pass_env,
        tmp_size_mb=tmp_size_mb,
        worktree_growth_mb=growth_mb,
    )


def _passable(
    covers: list[tuple[Path, list[str]]], reveals: list[tuple[Path, list[str]]]
) -> list[tuple[Path, list[str]]]:
    """The folders bwrap makes between a covering tmpfs and a path shown inside it, made
    passable for nobody (bwrap would make them 0700: the worktree out of the command's
    reach). They exist only in the jail's tmpfs; no host folder changes."""
    places = [where for where, _ in covers]
    shown = {where for where, _ in reveals}
    made: dict[Path, list[str]] = {}
    for path, _ in reveals:
        inside = [c for c in places if _within(path, c) and c != path]
        if not inside:
            continue
        top = max(inside, key=_depth)
        for folder in path.parents:
            if folder == top or not _within(folder, top):
                break
            if folder not in shown:
                made[folder] = ["--perms", "0755", "--dir", str(folder)]
    return list(made.items())


def _jail_user(worktree: Path, hidden: Iterable[Path]) -> tuple[int | None, str | None]:
    """The uid a root caller's commands run as (nobody), or None and why they cannot."""
    if os.geteuid() != 0:
        return None, None
    if shutil.which("setpriv") is None:
        return None, "setpriv is not installed (util-linux), so commands run as root"
    # Folders the jail covers with its own (traversable) ones; any other folder above the
    # worktree must let nobody pass, or no command could reach the worktree by its path.
    home, others = _homes(os.environ)
    covered = [*hidden, *others, *(p for p in (home,) if p), Path("/tmp"), Path("/var/tmp")]
    for folder in Path(worktree).parents:
        if any(_within(folder, c) for c in covered) or folder == Path("/"):
            continue
        try:
            mode = folder.stat().st_mode
        except OSError:
            continue
        if not mode & stat.S_IXOTH:
            return None, f"{folder} is closed to other users, so commands run as root"
    return JAIL_UID, None


def _share_top(worktree: Path) -> None:
    """The worktree's folder: still ours, its group the jail's, writable by that group."""
    try:
        info = os.lstat(worktree)
        if info.st_gid != JAIL_GID:
            os.lchown(worktree, -1, JAIL_GID)
        if info.st_mode & 0o070 != 0o070:
            os.chmod(worktree, stat.S_IMODE(info.st_mode) | 0o070)
    except FileNotFoundError:
        return


def _chown_tree(top: Path, uid: int, gid: int, *, skip_top: bool = False) -> None:
    """Every file and folder under `top` owned by uid:gid, links themselves included
    (`skip_top`: not `top` itself, nor its `.git`)."""
    stack = [top]
    try:
        info = os.lstat(top)
        if not skip_top and (info.st_uid != uid or info.st_gid != gid):
            os.lchown(top, uid, gid)
    except FileNotFoundError:
        return
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            if skip_top and folder == top and entry.name == ".git":
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != uid or info.st_gid != gid:
                    os.lchown(entry.path, uid, gid)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
            except FileNotFoundError:
                continue


@functools.cache
def _sized_tmpfs() -> bool:
    """Whether this bwrap takes `--size` for a tmpfs (bubblewrap 0.5 and later)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        done = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout + done.stderr


def full_note(jail: Jail | None, output: str) -> str | None:
    """The line that names the bound a failed jailed run hit, when its output says a
    private folder was full; None otherwise."""
    if jail is None or jail.mode != "bwrap" or not _sized_tmpfs():
        return None
    if "No space left on device" not in output and "Disk quota exceeded" not in output:
        return None
    return (
        f"autoresearch: a private folder of the jail ($HOME, /tmp, /var/tmp) is limited to "
        f"{jail.tmp_size_mb} MiB and the run filled it (spec key {TMP_SIZE_KEY}); "
        f"(the worktree's growth has a bound of its own: {GROWTH_KEY})"
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

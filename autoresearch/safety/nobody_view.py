"""A view of a root-owned folder in which nobody may write as if it were root's: an idmapped
mount (Linux 5.12+, root only) of the folder at a private place, where what root owns on disk
shows as nobody's and what nobody writes through it is stored as root's.

Why: the harness's confined git (git.py) must write the repository's git directory, which is
root's when we are root, yet must not be able to read what only root may read on the host (a
filter the repository's own config names runs with git's rights). Run as nobody, without any
capability, with the git directory shown through this view, it can do the one and not the
other. Nothing on disk changes owner.

Each view is made once per process and folder, and unmounted when the process exits; a
process killed with SIGKILL leaves its view under /tmp/autoresearch-idmap-<owner>-*, which the
next view made on the machine removes (`umount -l` does too). The owner names the process
exactly (its pid namespace, pid and start time): a live process's view is never taken for a
dead one's, whatever pid namespace it runs in or whichever pid was reused.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import tempfile
from pathlib import Path

NOBODY = 65534
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442  # x86_64 and arm64 alike
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, 0o2000000
_AT_FDCWD, _AT_EMPTY_PATH, _AT_RECURSIVE = -100, 0x1000, 0x8000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_IDMAP = 0x00100000
_CLONE_NEWUSER = 0x10000000
_MNT_DETACH = 2


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


PREFIX = "autoresearch-idmap-"
_made: list[tuple[Path, Path]] = []  # (mount point, its private folder), unmounted at exit


@functools.cache
def view(folder: Path) -> Path | None:
    """Where `folder` is seen with root's files as nobody's; None where this cannot be made
    (not root, a kernel or filesystem without idmapped mounts)."""
    if os.geteuid() != 0 or not Path(folder).is_dir():
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    userns = _userns(libc)
    if userns is None:
        return None
    _remove_stale()
    # 0700, root's: no one else on the host reaches the view; bwrap, as root, binds it.
    place = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{_owner(os.getpid())}-"))
    point = place / "view"
    point.mkdir()
    tree = libc.syscall(
        _SYS_OPEN_TREE,
        _AT_FDCWD,
        os.fsencode(str(folder)),
        _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_RECURSIVE,
    )
    try:
        if tree < 0:
            return _give_up(place)
        attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, userns)
        size = ctypes.sizeof(attr)
        if libc.syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr), size):
            return _give_up(place)
        if libc.syscall(
            _SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, os.fsencode(str(point)), _MOVE_MOUNT_F_EMPTY_PATH
        ):
            return _give_up(place)
    finally:
        os.close(userns)
        if tree >= 0:
            os.close(tree)
    if not _made:
        atexit.register(_unmount_all)
    _made.append((point, place))
    return point


def _userns(libc: ctypes.CDLL) -> int | None:
    """A user namespace whose root is nobody outside, as a descriptor (the idmap's source)."""
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: into a new user namespace, then wait to be ended
        try:
            os.close(ready_r)
            os.close(hold_w)
            ok = libc.unshare(_CLONE_NEWUSER) == 0
            os.write(ready_w, b"1" if ok else b"0")
            os.read(hold_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(hold_r)
    try:
        if os.read(ready_r, 1) != b"1":
            return None
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{pid}/{name}").write_text(f"0 {NOBODY} 1\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        os.close(ready_r)
        os.close(hold_w)
        os.waitpid(pid, 0)


def _give_up(place: Path) -> None:
    _remove_empty(place)
    return None


def _remove_empty(place: Path) -> None:
    # Never a recursive removal: were the view still mounted, it would remove the folder's
    # own files through it.
    for folder in (place / "view", place):
        try:
            folder.rmdir()
        except OSError:
            pass


def _owner(pid: int) -> str | None:
    """`<pid namespace>.<pid>.<start time>` of a live process of ours, None when it is gone."""
    try:
        ns = os.readlink("/proc/self/ns/pid").split("[")[-1].rstrip("]")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    start = stat.rsplit(")", 1)[-1].split()[19]  # field 22: the start time, in clock ticks
    return f"{ns}.{pid}.{start}"


def _remove_stale() -> None:
    """The views of processes that ended without unmounting theirs (killed): only views of
    our pid namespace whose pid is gone or now another process (another start time)."""
    libc = ctypes.CDLL(None, use_errno=True)
    mine = _owner(os.getpid())
    if mine is None:
        return
    ns = mine.split(".")[0]
    for place in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        owner = place.name[len(PREFIX) :].split("-")[0]
        parts = owner.split(".")
        if len(parts) != 3 or parts[0] != ns or not parts[1].isdigit():
            continue  # another pid namespace's, or a name we did not make: not ours to judge
        if _owner(int(parts[1])) == owner:
            continue  # alive
        libc.umount2(os.fsencode(str(place / "view")), _MNT_DETACH)
        _remove_empty(place)


def present(point: Path) -> bool:
    """Whether a view this process made is still mounted where it was (someone may have
    unmounted it: `umount -l`, a cleanup run as root). One stat, no file read: through the
    view, the root-owned git directory shows as nobody's; the bare mount point is root's."""
    try:
        return os.stat(point).st_uid == NOBODY
    except OSError:
        return False


def _unmount_all() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for point, place in reversed(_made):
        libc.umount2(os.fsencode(str(point)), _MNT_DETACH)
        _remove_empty(place)
    _made.clear()

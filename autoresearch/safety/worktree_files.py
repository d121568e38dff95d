"""Reading one file of a worktree: the single reader behind the agents' file tools and every
file the harness itself reads from a target (outside the jail).

A worktree's content is the target's to choose, links and special files included. A file is
read only when its name resolves inside the worktree (links inside are fine, not `.git`),
and what is opened is a regular file of the worktree's own filesystem and mount (no FIFO,
socket, device or directory, no hard link to a file outside) that fits the size cap. The
checks are made on the opened descriptor, reached one directory at a time with O_NOFOLLOW,
so a link swapped in between the check and the read is refused, not followed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

# The largest file an agent may write (write_file's content, an edited file), as UTF-8.
MAX_WRITE_BYTES = 8_000_000

DEFAULT_MAX_BYTES = 2_000_000

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO that slipped past the check returns at once instead of waiting.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

NamesInside = Callable[[Path, tuple[int, int]], int]


class Refused(Exception):
    """A worktree file that is not read; the message names the file and says why."""


class Missing(Refused):
    """No file by that name: callers that treat an absent file as normal catch this first."""


def resolve(worktree: Path, rel: str) -> tuple[Path, str]:
    """(the resolved absolute path, its worktree-relative POSIX name) or Refused.

    Every link on the way is followed once here; the result must lie in the worktree and
    outside `.git`. "" and "." name the worktree itself.
    """
    root = Path(worktree).resolve()
    if Path(rel).is_absolute():
        raise Refused(f"{rel!r} is an absolute path, not a file of the repository")
    try:
        target = (root / rel).resolve() if rel not in ("", ".") else root
    except (RuntimeError, OSError) as err:  # RuntimeError: a symlink loop (Python < 3.13)
        raise Refused(f"{rel!r} cannot be resolved ({err})") from None
    if target != root and not target.is_relative_to(root):
        raise Refused(f"{rel!r} leads outside the repository (through a symlink)")
    name = target.relative_to(root).as_posix() if target != root else ""
    if any(part.lower() == ".git" for part in name.split("/")):
        raise Refused("the .git directory is managed by the harness and cannot be accessed")
    return target, name


def names_inside(root: Path, key: tuple[int, int]) -> int:
    """How many names the file `key` (st_dev, st_ino) has in the worktree, less `.git`."""
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            count += (st.st_dev, st.st_ino) == key
    return count


def check_file(st: os.stat_result, rel: str, root: Path, names: NamesInside = names_inside) -> None:
    """Refuse anything but a regular file of the worktree's own (`st` from lstat or fstat)."""
    if stat.S_ISDIR(st.st_mode):
        raise Refused(f"{rel!r} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{rel!r} is not a regular file (a FIFO, socket or device)")
    if st.st_dev != os.stat(root).st_dev:
        raise Refused(f"{rel!r} is on another filesystem mounted inside the repository")
    if st.st_nlink > 1 and names(root, (st.st_dev, st.st_ino)) < st.st_nlink:
        raise Refused(f"{rel!r} is a hard link to a file outside the repository")


def _mount_id(fd: int) -> str | None:
    """The mount an open file lies on (a bind mount keeps st_dev, not its mount id)."""
    try:
        with open(f"/proc/self/fdinfo/{fd}") as info:
            for line in info:
                if line.startswith("mnt_id:"):
                    return line.split()[1]
    except OSError:
        pass
    return None


def _is_plain_file(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_checked(root: Path, name: str, rel: str, names: NamesInside) -> int:
    """An fd of the regular file `name` (resolved, relative to `root`), reached without
    following any link: `resolve` already followed them, so meeting one now means the tree
    changed under us."""
    parts = name.split("/") if name else []
    if not parts:
        raise Refused(f"{rel!r} is a directory")
    root_fd = os.open(root, _DIR_FLAGS)
    fd = root_fd
    try:
        for part in parts[:-1]:
            try:
                step = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise Missing(f"{rel!r} does not exist") from None
            except OSError:
                # ENOTDIR for a file on the way (no such path) and for a link swapped in.
                if _is_plain_file(part, fd):
                    raise Missing(f"{rel!r} does not exist") from None
                raise Refused(f"{rel!r} changed while it was being opened") from None
            if fd != root_fd:
                os.close(fd)
            fd = step
        try:
            before = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            raise Missing(f"{rel!r} does not exist") from None
        if stat.S_ISLNK(before.st_mode):
            raise Refused(f"{rel!r} changed while it was being opened")
        check_file(before, rel, root, names)  # before opening: opening a device can act
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as err:
            raise Refused(f"{rel!r} cannot be opened ({err.strerror})") from None
        try:
            st = os.fstat(file_fd)
            if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
                raise Refused(f"{rel!r} changed while it was being opened")
            check_file(st, rel, root, names)
            if _mount_id(file_fd) != _mount_id(root_fd):
                raise Refused(f"{rel!r} lies in a filesystem mounted inside the repository")
        except BaseException:
            os.close(file_fd)
            raise
        return file_fd
    finally:
        if fd != root_fd:
            os.close(fd)
        os.close(root_fd)


def read_bytes(
    worktree: Path,
    rel: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    names: NamesInside = names_inside,
) -> bytes:
    """The content of the worktree's file `rel`, at most `max_bytes`, or Refused (Missing)."""
    target, name = resolve(worktree, rel)
    root = Path(worktree).resolve()
    fd = _open_checked(root, name, rel or ".", names)
    try:
        if os.fstat(fd).st_size > max_bytes:
            raise Refused(f"{rel!r} is larger than {max_bytes} bytes")
        chunks, size = [], 0
        # Never more than the cap and one byte, whatever the size said (the file may grow).
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise Refused(f"{rel!r} is larger than {max_bytes} bytes")
    return b"".join(chunks)


def read_text(
    worktree: Path, rel: str, *, max_bytes: int = DEFAULT_MAX_BYTES, errors: str = "replace"
) -> str:
    """`read_bytes` decoded as UTF-8 (`errors="strict"` raises UnicodeDecodeError)."""
    return read_bytes(worktree, rel, max_bytes=max_bytes).decode("utf-8", errors)


def read_if_any(
    worktree: Path,
    rel: str,
    refused: list[str] | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> str | None:
    """The file's text, or None when there is no such file or it is refused; a refusal's
    reason is appended to `refused`, for the caller to report where it matters."""
    try:
        return read_text(worktree, rel, max_bytes=max_bytes)
    except Missing:
        return None
    except Refused as err:
        if refused is not None:
            refused.append(f"{rel}: not read: {err}")
        return None


def why_unreadable(worktree: Path, rel: str) -> str | None:
    """Why `read_bytes` would refuse `rel` (size aside), or None when it would read it."""
    try:
        _, name = resolve(worktree, rel)
        os.close(_open_checked(Path(worktree).resolve(), name, rel or ".", names_inside))
    except Refused as err:
        return str(err)
    return None

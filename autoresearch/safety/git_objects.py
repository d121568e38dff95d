"""The objects a confined git writes (docs/safety.md, "Harness git in a box"): nothing of
the common git directory is writable in the box, whose objects/ holds every session's
commits and the user's own, so a program a repository brought could remove one, or plant a
file under the name of content the harness commits next (git writes no object it has). A
confined call on a linked worktree writes its objects to a folder of the worktree's own
(`OWN_OBJECTS`, as GIT_OBJECT_DIRECTORY; the repository's objects/ its read-only
alternate), and the harness takes each into objects/ after the call, checked against its
name (`take`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import zlib
from collections.abc import Callable
from dataclasses import dataclass

# The folder, in the worktree's administrative directory, where its confined git writes.
OWN_OBJECTS = "autoresearch-objects"
_HEX = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_READ = os.O_RDONLY | os.O_CLOEXEC


@dataclass(frozen=True)
class Store:
    """Where a confined call on a worktree writes objects (`own`, in its administrative
    directory) and the repository's objects it reads (`shared`, the common objects/)."""

    own: str
    shared: str

    @staticmethod
    def of(admin: str, common: str) -> Store | None:
        """The store of the linked worktree whose administrative directory is `admin` and
        common one `common`; None for a repository's own checkout (`admin` is `common`)."""
        if common == admin:
            return None
        own = os.path.join(admin, OWN_OBJECTS)
        _own_folder(own)
        return Store(own, os.path.join(common, "objects"))

    def env(self) -> dict[str, str]:
        return {"GIT_OBJECT_DIRECTORY": self.own, "GIT_ALTERNATE_OBJECT_DIRECTORIES": self.shared}


def take(store: Store, verified_pack: Callable[[str], bool]) -> None:
    """Every object a confined call wrote to the worktree's own folder moved into the
    repository's objects/, where none of that name is yet: a loose object once its content
    hashes to its name, a pack once `verified_pack` (given its index's path) checked every
    object in it. Whatever else is there (a file that does not hash to its name, an
    `info/alternates`, git's temporary files) is removed, never kept."""
    if not _own_folder(store.own):
        return  # (a link, now gone, or no folder: nothing of it is read)
    for entry in list(os.scandir(store.own)):
        if entry.is_dir(follow_symlinks=False) and _FAN_OUT.fullmatch(entry.name):
            for one in os.scandir(entry.path):
                name = entry.name + one.name
                if _HEX.fullmatch(name) and _hashes_to(one.path, name):
                    _link_into(one.path, os.path.join(store.shared, entry.name), one.name)
                _remove(one.path)
            _remove(entry.path)
        elif entry.is_dir(follow_symlinks=False) and entry.name == "pack":
            _take_packs(entry.path, os.path.join(store.shared, "pack"), verified_pack)
            _remove(entry.path)
        else:
            _remove(entry.path)


_FAN_OUT = re.compile(r"[0-9a-f]{2}")


def _own_folder(own: str) -> bool:
    """Whether `own` was a folder (not a link to one: a program in the box could point it at
    the repository's objects/, whose files the harness would then take out); made a folder
    where it was not. One lstat where all is well."""
    try:
        if stat.S_ISDIR(os.lstat(own).st_mode):
            return True
        os.unlink(own)
    except FileNotFoundError:
        pass
    with contextlib.suppress(FileExistsError):
        os.mkdir(own)
    return False


def _hashes_to(path: str, name: str) -> bool:
    """Whether the loose object file `path` (a regular file, not a link) holds the object
    `name`: its content, inflated, hashes to it (SHA-1, or SHA-256 for a 64-digit name)."""
    digest = hashlib.sha1() if len(name) == 40 else hashlib.sha256()
    inflate = zlib.decompressobj()
    try:
        fd = os.open(path, _READ | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        while chunk := os.read(fd, 1 << 16):
            while chunk:  # inflated a megabyte at a time: a small file may inflate to a lot
                digest.update(inflate.decompress(chunk, 1 << 20))
                chunk = inflate.unconsumed_tail
        digest.update(inflate.flush())
    except (OSError, zlib.error):
        return False
    finally:
        os.close(fd)
    return inflate.eof and not inflate.unused_data and digest.hexdigest() == name


def _take_packs(folder: str, shared: str, verified_pack: Callable[[str], bool]) -> None:
    """The packs a confined call wrote (`git add` streams a file above
    core.bigFileThreshold into one), each moved into `shared` once verified whole."""
    for entry in os.scandir(folder):
        if not entry.name.endswith(".idx") or not entry.is_file(follow_symlinks=False):
            continue
        stem = entry.path[: -len(".idx")]
        pack = stem + ".pack"
        if not os.path.isfile(pack) or os.path.islink(pack):
            continue
        if verified_pack(entry.path):
            # The pack first, then its index: git reads a pack only through its index.
            _link_into(pack, shared, os.path.basename(pack))
            _link_into(entry.path, shared, entry.name)
    for entry in os.scandir(folder):
        _remove(entry.path)


def _link_into(path: str, folder: str, name: str) -> None:
    """`path` also at `folder`/`name`, unless a file of that name is there (a link never
    replaces one: another session may have written the same object meanwhile)."""
    target = os.path.join(folder, name)
    try:
        try:
            os.link(path, target)
        except FileNotFoundError:  # the first object of its two digits here
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder)
            os.link(path, target)
    except FileExistsError:
        pass
    except OSError:
        # A file system without hard links: renamed, where no file of the name is yet.
        if not os.path.lexists(target):
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, target)


def _remove(path: str) -> None:
    """A file or folder of the worktree's own objects' folder, gone."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass

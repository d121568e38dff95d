"""The bound on a jailed run's growth of the worktree (`commands.worktree_growth_mb`).

The private $HOME and /tmp of a jailed run are tmpfs of a fixed size (jail.py); the worktree
is the host's own folder, bound writable, and no quota can be set on it without root and a
filesystem made for quotas. So a watcher measures it instead: the disk the worktree's files
take (blocks, each inode once, links not followed) at the start of the run, then again every
POLL_S or so while it runs (never more than a tenth of the time, however big the tree), and
once more when it ends. A run that grew it by more than the bound is stopped (its whole jail
killed) and is a failed run whose output names the bound and its key; what it wrote is
removed with the reset that ends the attempt (`clean -ffdx`).

Between two looks a fast writer can pass the bound by what it writes in that time: the bound
keeps a run from filling the disk, it is not exact to the byte.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

GROWTH_KEY = "commands.worktree_growth_mb"
DEFAULT_GROWTH_MB = 4096  # a Rust or C++ build's first run writes gigabytes into the tree
POLL_S = 0.25
WALK_SHARE = 10  # wait at least this many times as long as a walk took


def usage(top: Path) -> int:
    """Bytes of disk the files under `top` take (allocated blocks, each inode once)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(top)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                if info.st_nlink > 1:
                    key = (info.st_dev, info.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += info.st_blocks * 512
    return total


class Watch:
    """One run's watcher: `start` before the command, `finish` after; `on_exceed` is
    called (once, from the watcher's thread) when the growth passes the bound."""

    def __init__(self, top: Path, bound_mb: int, on_exceed: Callable[[], None]) -> None:
        self.top = Path(top)
        self.bound_mb = bound_mb
        self.limit = bound_mb << 20
        self.on_exceed = on_exceed
        began = time.monotonic()
        self.base = usage(self.top)
        self.walk_s = time.monotonic() - began
        self.grown = 0
        self.hit = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _look(self) -> bool:
        began = time.monotonic()
        self.grown = max(self.grown, usage(self.top) - self.base)
        self.walk_s = time.monotonic() - began
        if self.grown > self.limit and not self.hit:
            self.hit = True
            return True
        return False

    def _watch(self) -> None:
        while not self._stop.wait(max(POLL_S, WALK_SHARE * self.walk_s)):
            if self._look():
                self.on_exceed()
                return

    def finish(self) -> str | None:
        """The note naming the bound when the run passed it (now, or while it ran)."""
        self._stop.set()
        self._thread.join()
        if not self.hit:
            self._look()
        if not self.hit:
            return None
        return (
            f"autoresearch: the run grew the worktree by {self.grown >> 20} MiB, past its bound "
            f"of {self.bound_mb} MiB (spec key {GROWTH_KEY}), and was stopped: a failed run; "
            "what it wrote is removed with the attempt's reset"
        )

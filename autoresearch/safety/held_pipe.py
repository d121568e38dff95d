"""A pipe whose reading end only the harness holds: the channel a runner's report or the
measurement guard's verdict comes through.

The run's processes get the writing end (inherited, or opened by its /dev/fd path); the
harness reads the other end in a thread as the run goes, so nothing a process writes can
be taken back or rewritten afterwards, only added to, and an addition shows to whoever
parses what came through.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


class HeldPipe:
    """One run's channel; `finish` is what came through once every holder closed it."""

    def __init__(self, max_bytes: int, wait_s: float, fifo: Path | None = None) -> None:
        self.max_bytes, self.wait_s = max_bytes, wait_s
        self.fifo = fifo is not None
        if fifo is None:
            self.read_fd, self.write_fd = os.pipe()
            self.path = f"/dev/fd/{self.write_fd}"
        else:
            # A named pipe, for a process that opens the channel by its path and inherits no
            # descriptor: the harness holds a writing end of its own until the run is over,
            # so the pipe ends only then.
            os.mkfifo(fifo, 0o600)
            self.read_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            self.write_fd = os.open(fifo, os.O_WRONLY)
            os.set_blocking(self.read_fd, True)
            self.path = str(fifo)
        # The jail's user (nobody, under a root harness) must be able to open the writing end
        # by its path; never to read it (what it read the harness would not see: a report cut
        # short at will).
        os.fchmod(self.write_fd, 0o602)
        self.chunks: list[bytes] = []
        self.size = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        with os.fdopen(self.read_fd, "rb", buffering=0) as pipe:
            while block := pipe.read(1 << 16):
                if self.size <= self.max_bytes:  # the block past the bound shows it
                    self.chunks.append(block)
                self.size += len(block)

    @property
    def too_large(self) -> bool:
        return self.size > self.max_bytes

    def close_ours(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def finish(self) -> bytes | None:
        """What came through (past `max_bytes` by at most one block), once every holder
        closed it; None while one still holds it: a copy kept by something the run left
        behind keeps the pipe open, and a report that may still grow is no report."""
        self.close_ours()
        self.thread.join(self.wait_s)
        if self.thread.is_alive():
            return None
        return b"".join(self.chunks)

    def __enter__(self) -> HeldPipe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_ours()

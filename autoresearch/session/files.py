"""Writing session files: atomically, safely from parallel jobs, and under one lock.

Jobs run as threads of one Snakemake process (and, on a cluster, as processes on several
machines), so a temporary name must be unique per write, not per process, and every
read-modify-write of a shared session file happens under the session's file lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from autoresearch.safety import seen


def write_text(path: Path, text: str) -> None:
    """A crash leaves the old file or the new one, never half of one. Every value the
    session's masker has seen is masked first (seen.py)."""
    _replace(Path(path), "w", seen.scrub_for(Path(path), text))


def write_bytes(path: Path, data: bytes) -> None:
    """A binary file (a plot), written as `write_text` writes text."""
    _replace(Path(path), "wb", data)


def _replace(path: Path, mode: str, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as handle:
            handle.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2) + "\n")


def read_json(path: Path) -> Any:
    """The file's JSON, or None when it does not exist."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def cached_json(path: Path, key: str, produce: Callable[[], Any]) -> Any:
    """`produce()` kept under `key` in the JSON mapping at `path`: a measurement taken
    before a kill is reused by the rerun, so the rerun decides the same way and the
    append-only logs stay consistent with the branch."""
    cache = read_json(path) or {}
    if key not in cache:
        cache[key] = produce()
        write_json(path, cache)
    return cache[key]


# What the running job has read (jobs.run_job gives each job its own): a file every step
# of a job asks for again (a loop's decisions index, a mode's setup record) is opened
# once, and again only when it has changed (its inode, size or modification time).
_JOB_READS: ContextVar[dict[Path, tuple[tuple[int, int, int], str]] | None] = ContextVar(
    "job_reads", default=None
)


@contextmanager
def reads_once() -> Iterator[None]:
    """Within: `read_text_once` opens each unchanged file once."""
    token = _JOB_READS.set({})
    try:
        yield
    finally:
        _JOB_READS.reset(token)


def read_text_once(path: Path) -> str:
    """The file's text, read once per job while it is unchanged (outside a job: read)."""
    reads = _JOB_READS.get()
    if reads is None:
        return Path(path).read_text()
    stat = os.stat(path)
    key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    cached = reads.get(Path(path))
    if cached is None or cached[0] != key:
        cached = (key, Path(path).read_text())
        reads[Path(path)] = cached
    return cached[1]


def append_line(path: Path, line: str) -> None:
    """Append one line in a single write (whole lines, even from parallel writers)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(seen.scrub_for(path, line.rstrip("\n")) + "\n")


def append_text(path: Path, text: str) -> None:
    """Append whole lines in a single write."""
    with open(path, "a") as handle:
        handle.write(seen.scrub_for(Path(path), text))


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """An exclusive lock on `lock_path`, between threads and processes alike.

    Each call opens its own file description, so two threads of one process exclude
    each other as two processes do.
    """
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

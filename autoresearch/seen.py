"""The values a session's masker has found, kept so that every later write masks them too.

The scanner knows a secret by its surroundings (`password = "..."`); once an agent quotes
the bare value in prose, nothing around it says so. So each value masked once is kept in
the session folder (`.masked-values`, mode 0600, never a report output: it holds the bare
values, which only the target's own files had) and replaced wherever it appears in any
file or log written under that session afterwards. A file, not process state: a session's
jobs are threads of one process or processes on several machines.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

STORE = ".masked-values"
REDACTED = "<REDACTED>"
MIN_CHARS = 6  # shorter values are words and numbers that appear everywhere
# A session folder is known by what setup writes first or last.
SESSION_MARKERS = ("session.yaml", ".setup-created.json")
MAX_LEVELS = 8  # how far above a written file its session folder may be


def session_root(path: Path) -> Path | None:
    """The session folder `path` lies in, when it lies in one."""
    for folder in list(Path(path).absolute().parents)[:MAX_LEVELS]:
        if any((folder / marker).exists() for marker in SESSION_MARKERS):
            return folder
    return None


def remember(root: Path, values: Iterable[str]) -> None:
    """Add `values` to the session's store (created private, rewritten whole)."""
    new = {v for v in values if len(v.strip()) >= MIN_CHARS and REDACTED not in v}
    if not new:
        return
    store = Path(root) / STORE
    known = set(_load(store))
    if new <= known:
        return
    # One writer at a time: the lock file sits beside the store.
    with open(store.with_name(STORE + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = sorted(set(_load(store)) | new)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f"{STORE}.", suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "w") as handle:
            json.dump(merged, handle)
        os.replace(tmp, store)


def scrub(text: str, root: Path | None) -> str:
    """`text` with every value of `root`'s store replaced (longest first)."""
    if root is None:
        return text
    for value in sorted(_load(Path(root) / STORE), key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_for(path: Path, text: str) -> str:
    """`text` as it may be written to `path`: masked by the store of `path`'s session."""
    root = session_root(path)
    if root is None or not (root / STORE).exists():
        return text
    return scrub(text, root)


def _load(store: Path) -> list[str]:
    try:
        data = json.loads(store.read_text())
    except (OSError, ValueError):
        return []
    return [v for v in data if isinstance(v, str)] if isinstance(data, list) else []

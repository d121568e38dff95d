"""The values a session's masker has found, kept so that every later write masks them too.

The scanner knows a secret by its surroundings (`password = "..."`); once an agent quotes
the bare value in prose, nothing around it says so. So each value masked once is kept in
the session folder and replaced wherever it appears in any file or log written under that
session afterwards. Kept as keyed digests with their lengths (`.masked-values`, mode
0600), never the bare value: no file under sessions/ holds a secret. A file, not process
state: a session's jobs are threads of one process or processes on several machines.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterable
from pathlib import Path

STORE = ".masked-values"
REDACTED = "<REDACTED>"
MIN_CHARS = 6  # shorter values are words and numbers that appear everywhere
# A session folder is known by what setup writes first or last.
SESSION_MARKERS = ("session.yaml", ".setup-created.json")
MAX_LEVELS = 8  # how far above a written file its session folder may be
_SPACE = re.compile(r"\s")
_WORD = re.compile(r"[^\s\"'`<>]+")  # where a quoted value can stand in prose or code


def session_root(path: Path) -> Path | None:
    """The session folder `path` lies in, when it lies in one."""
    for folder in list(Path(path).absolute().parents)[:MAX_LEVELS]:
        if any((folder / marker).exists() for marker in SESSION_MARKERS):
            return folder
    return None


def remember(root: Path, values: Iterable[str]) -> None:
    """Add `values` to the session's store (created private, rewritten whole). A value
    with white space in it is left to the scanner's patterns (a key block, a phrase)."""
    new = [v for v in values if len(v) >= MIN_CHARS and not _SPACE.search(v)]
    if not new:
        return
    store = Path(root) / STORE
    with open(store.with_name(STORE + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one writer at a time
        data = _load(store) or {"salt": secrets.token_hex(16), "digests": {}}
        digests = data["digests"]
        added = {_digest(data["salt"], v): len(v) for v in new}
        if added.keys() <= digests.keys():
            return
        digests.update(added)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f"{STORE}.", suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        os.replace(tmp, store)


def scrub(text: str, root: Path | None) -> str:
    """`text` with every value of `root`'s store replaced: each stretch of a word that
    starts and ends at a word's edge or punctuation is compared by its digest."""
    data = _load(Path(root) / STORE) if root is not None else None
    if not data or not data["digests"]:
        return text
    salt, digests = data["salt"], data["digests"]
    lengths = sorted(set(digests.values()))
    spans: list[tuple[int, int]] = []
    for word in _WORD.finditer(text):
        token, base = word.group(), word.start()
        if len(token) < lengths[0]:
            continue
        edges = {0, len(token)}
        edges.update(
            i for i in range(1, len(token)) if not (token[i - 1].isalnum() and token[i].isalnum())
        )
        for start in sorted(edges):
            for size in lengths:
                end = start + size
                if end in edges and _digest(salt, token[start:end]) in digests:
                    spans.append((base + start, base + end))
    if not spans:
        return text
    out, position = [], 0
    for start, end in sorted(spans):
        if start < position:
            start = position
        if end <= position:
            continue
        out += [text[position:start], REDACTED]
        position = end
    return "".join(out) + text[position:]


def scrub_for(path: Path, text: str) -> str:
    """`text` as it may be written to `path`: masked by the store of `path`'s session."""
    root = session_root(path)
    if root is None or not (root / STORE).exists():
        return text
    return scrub(text, root)


def _digest(salt: str, value: str) -> str:
    key = bytes.fromhex(salt)
    return hashlib.blake2b(value.encode(), key=key, digest_size=16).hexdigest()


def _load(store: Path) -> dict | None:
    try:
        data = json.loads(store.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("digests"), dict):
        return None
    return data

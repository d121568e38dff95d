"""The one writer of lens outputs: every text a lens writes under `sessions/` is masked first.

Findings quote code, and code holds credentials; a model may also invent one. So nothing a
lens writes (Markdown, JSON, TSV, a log line) goes to disk without passing the masker. The
session's own commit ids are kept (a long hex string next to the word "key" would otherwise
look like a secret).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.safety import seen
from autoresearch.session import files

from .masking import redact


def mask_data(value: Any, keep: Iterable[str] = ()) -> Any:
    """`value` with every string in it masked (keys of mappings included)."""
    return _masked(value, tuple(keep), [0])


def _masked(
    value: Any,
    keep: tuple[str, ...],
    count: list[int],
    found: Callable[[list[str]], None] | None = None,
) -> Any:
    if isinstance(value, str):
        clean, values = redact(value, keep)
        count[0] += len(values)
        if found is not None:
            found(values)
        return clean
    if isinstance(value, dict):
        return {
            _masked(k, keep, count, found): _masked(v, keep, count, found) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_masked(v, keep, count, found) for v in value]
    return value


@dataclass
class Writer:
    """Masks, then writes atomically (files.write_text). `keep`: the session's commit ids.
    Every value it masks is kept in the session's store (seen.py), found from the path it
    writes or set as `root`, so a later write anywhere in the session masks it too."""

    keep: tuple[str, ...] = ()
    masked: int = field(default=0)  # secrets replaced so far, for the stage's log
    root: Path | None = None  # the session folder, when known before the first write

    def text(self, path: Path, text: str) -> None:
        self.root = self.root or seen.session_root(path)
        files.write_text(path, self.line(text))

    def json(self, path: Path, data: Any) -> None:
        self.root = self.root or seen.session_root(path)
        count = [0]
        clean = _masked(data, self.keep, count, self._remember)
        self.masked += count[0]
        self.text(path, json.dumps(clean, indent=2) + "\n")

    def line(self, text: str) -> str:
        clean, values = redact(text, self.keep)
        self.masked += len(values)
        self._remember(values)
        return seen.scrub(clean, self.root)

    def _remember(self, values: list[str]) -> None:
        if values and self.root is not None:
            seen.remember(self.root, values)


def masked_log(
    log: Callable[[str], None], keep: Iterable[str] = (), root: Path | None = None
) -> Callable[[str], None]:
    """A log function that masks each line first (progress lines quote tool results), and
    keeps what it masked in the session's store (`root`)."""
    writer = Writer(tuple(keep), root=root)
    return lambda line: log(writer.line(line))


def quiet(env: Any) -> None:
    """Every log line of a lens stage (a StageEnv) is masked: progress lines quote what tools
    read."""
    env.log = masked_log(env.log, (env.record.base_commit,), env.layout.root)

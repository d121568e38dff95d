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

from ... import files
from ...lenses.masking import mask


def mask_data(value: Any, keep: Iterable[str] = ()) -> Any:
    """`value` with every string in it masked (keys of mappings included)."""
    return _masked(value, tuple(keep), [0])


def _masked(value: Any, keep: tuple[str, ...], count: list[int]) -> Any:
    if isinstance(value, str):
        clean, n = mask(value, keep)
        count[0] += n
        return clean
    if isinstance(value, dict):
        return {_masked(k, keep, count): _masked(v, keep, count) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v, keep, count) for v in value]
    return value


@dataclass
class Writer:
    """Masks, then writes atomically (files.write_text). `keep`: the session's commit ids."""

    keep: tuple[str, ...] = ()
    masked: int = field(default=0)  # secrets replaced so far, for the stage's log

    def text(self, path: Path, text: str) -> None:
        clean, count = mask(text, self.keep)
        self.masked += count
        files.write_text(path, clean)

    def json(self, path: Path, data: Any) -> None:
        count = [0]
        clean = _masked(data, self.keep, count)
        self.masked += count[0]
        self.text(path, json.dumps(clean, indent=2) + "\n")

    def line(self, text: str) -> str:
        clean, count = mask(text, self.keep)
        self.masked += count
        return clean


def masked_log(log: Callable[[str], None], keep: Iterable[str] = ()) -> Callable[[str], None]:
    """A log function that masks each line first (progress lines quote tool results)."""
    kept = tuple(keep)
    return lambda line: log(mask(line, kept)[0])

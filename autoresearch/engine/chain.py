"""Chaining lenses: `chain: [debug, fix]` (or `then: fix`) runs each next lens as a child
session `sessions/<root>.<k>-<lens>/` whose input is the previous session's `handoff.json`.

Rule: the k-th link of root session `r`'s chain is session `r.<k>-<lens>`; its parent is `r`
for k = 1 and `r.<k-1>-<previous lens>` after that. A child has no spec file of its own: its
spec is the root's frozen spec with `mode` set to its lens, no chain of its own (the root's
chain says what follows), and `handoff` naming the parent's handoff.json. The root's `done`
waits for the first child's `done`, each child's for the next, and a child's setup waits for
its parent's handoff.json — so `snakemake sessions/<root>/done` runs the whole chain, and a
rerun resumes it wherever it stopped.

A child takes on only what its parent stands by (`inherited`): the confirmed items, never the
hypotheses the parent eliminated or the leads it left open, whichever lens reads the handoff.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autoresearch.session.files import read_json
from autoresearch.session.layout import SESSIONS

CHILD = re.compile(r"^(?P<root>[A-Za-z0-9][A-Za-z0-9._-]*?)\.(?P<k>[1-9][0-9]*)-(?P<lens>[a-z]+)$")


def chain_of(values: dict[str, Any]) -> list[str]:
    """The lenses that follow this session's own: `chain`, or `then` as a chain of one."""
    chain = list(values.get("chain") or [])
    if not chain and values.get("then"):
        chain = [values["then"]]
    return chain


def child_name(root: str, k: int, lens: str) -> str:
    return f"{root}.{k}-{lens}"


@dataclass(frozen=True)
class Link:
    """Where a session stands in a chain."""

    root: str
    k: int  # 0 for the root itself
    chain: tuple[str, ...]  # the root's chain

    @property
    def name(self) -> str:
        return self.root if self.k == 0 else child_name(self.root, self.k, self.chain[self.k - 1])

    @property
    def parent(self) -> str | None:
        if self.k == 0:
            return None
        if self.k == 1:
            return self.root
        return child_name(self.root, self.k - 1, self.chain[self.k - 2])

    @property
    def next(self) -> str | None:
        """The child that follows this session, if the chain goes on."""
        if self.k >= len(self.chain):
            return None
        return child_name(self.root, self.k + 1, self.chain[self.k])


def _frozen(name: str, sessions: Path) -> dict[str, Any] | None:
    path = sessions / name / "session.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def link_of(name: str, values: dict[str, Any] | None, sessions: Path | str = SESSIONS) -> Link:
    """This session's place: a chain child when its name says so and its root's frozen spec
    has that lens at that place; otherwise a root with its own chain (`values`)."""
    sessions = Path(sessions)
    match = CHILD.match(name)
    if match:
        root = _frozen(match["root"], sessions)
        k = int(match["k"])
        chain = chain_of(root or {})
        if root is not None and k <= len(chain) and chain[k - 1] == match["lens"]:
            return Link(match["root"], k, tuple(chain))
    return Link(name, 0, tuple(chain_of(values or {})))


def child_values(name: str, sessions: Path | str = SESSIONS) -> dict[str, Any] | None:
    """The spec of chain child `name` (see the module docstring), or None when `name` is not
    a child of a session that has started."""
    sessions = Path(sessions)
    link = link_of(name, None, sessions)
    if link.k == 0:
        return None
    values = dict(_frozen(link.root, sessions) or {})
    values.update(
        mode=link.chain[link.k - 1],
        chain=[],
        then=None,
        handoff=str((sessions / str(link.parent) / "handoff.json").absolute()),
    )
    return values


def stands_by(finding: dict[str, Any]) -> bool:
    """A finding its lens stands by: confirmed, or from a lens that gives no verdict."""
    return finding.get("verdict") in (None, "confirmed")


def inherited(handoff: Path) -> dict[str, Any]:
    """What a session takes on from another's handoff.json (a chain's parent, `fix.from`):
    who handed it on, and only the findings the parent stands by, with the files they name.
    The handoff itself keeps everything for a person; this is the one reader of it."""
    data = read_json(Path(handoff)) or {}
    kept = [f for f in data.get("findings") or [] if stands_by(f)]
    return {
        **data,
        "findings": kept,
        "files": sorted({str(f["file"]) for f in kept if f.get("file")}),
    }


def handoff_path(name: str, sessions: Path | str = SESSIONS) -> Path | None:
    """The parent's handoff.json a chain child waits for."""
    link = link_of(name, None, Path(sessions))
    return Path(sessions) / str(link.parent) / "handoff.json" if link.parent else None

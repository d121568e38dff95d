"""Broad mode's tracks as the files show them: the approved set, each track's status,
the hypothesis table of session.md and `status`."""

from __future__ import annotations

import json
from typing import Any

from autoresearch.engine.loop import Decision
from autoresearch.session.files import read_json
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal

from .hypotheses import Hypothesis, HypothesisError, parse_markdown
from .step import TrackStep

BRANCH = "autoresearch/broad/{name}/{hid}"


def load_approved(layout: SessionLayout) -> dict[str, Any]:
    return json.loads(layout.approved.read_text())


def approved_hypotheses(layout: SessionLayout) -> list[Hypothesis]:
    return [Hypothesis(**h) for h in load_approved(layout)["hypotheses"]]


def track_ids(layout: SessionLayout) -> list[str]:
    return [h.id for h in approved_hypotheses(layout)] if layout.approved.exists() else []


def known_hypotheses(layout: SessionLayout) -> list[Hypothesis]:
    """The approved set, or else what hypotheses.md proposes now (for status and summaries)."""
    if layout.approved.exists():
        return approved_hypotheses(layout)
    if layout.hypotheses_md.exists():
        try:
            return parse_markdown(layout.hypotheses_md.read_text(), str(layout.hypotheses_md))
        except HypothesisError:
            return []
    return []


def track_decisions(layout: SessionLayout, hid: str) -> list[Decision]:
    """The track's decisions, read as broad's TrackStep records."""
    return journal.load_decisions(layout, hid, TrackStep)


def track_status(layout: SessionLayout, hid: str, decisions: list[Decision] | None = None) -> str:
    """not-started | in-progress | complete | aborted, from the track's files (or from the
    decisions given, which may hold one not yet on disk)."""
    result = read_json(layout.track_result(hid))
    if result:
        return result["status"]
    if decisions is None:
        decisions = track_decisions(layout, hid)
    if decisions and decisions[-1].stop:
        return decisions[-1].extra.track_status or "complete"  # type: ignore[attr-defined]
    if decisions or layout.track_meta(hid).exists():
        return "in-progress"
    return "not-started"


def branch_of(layout: SessionLayout, hid: str) -> str:
    meta = read_json(layout.track_meta(hid))
    return meta["branch"] if meta else BRANCH.format(name=layout.name, hid=hid)


def hypothesis_table(layout: SessionLayout, decisions: list[Decision] | None = None) -> list[str]:
    """The table of session.md and `status`; `decisions` (every track's) may hold one not
    yet on disk."""
    items = known_hypotheses(layout)
    if not items:
        return ["(the strategist has not proposed hypotheses yet)"]
    lines = [
        "| ID | Category | Name | Hypothesis | Branch | Status |",
        "|----|----------|------|------------|--------|--------|",
    ]
    approved = layout.approved.exists()
    for item in items:
        own = None if decisions is None else [d for d in decisions if d.track == item.id]
        status = track_status(layout, item.id, own) if approved else "awaiting approval"
        cells = [item.id, item.category, item.name, item.statement, branch_of(layout, item.id)]
        cells = [c.replace("|", "\\|") for c in cells]
        lines.append("| " + " | ".join(cells + [status]) + " |")
    return lines

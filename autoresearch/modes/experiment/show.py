"""`autoresearch show NAME ITERATION [--candidate cK]`: one experiment's hypothesis,
measurements, verdict and diff, read from the iteration's files (never runs anything).

Discarded, crashed and guard-failed experiments keep their `proposal.patch`, so what any
experiment changed can be asked long after the worktree was reset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autoresearch.engine.loop import maybe_decision
from autoresearch.session.files import read_json
from autoresearch.session.layout import SessionLayout

from ...errors import SessionError
from .log import fmt
from .policy import KEPT
from .stages import experiment_lines, records


def render(layout: SessionLayout, key: str, iteration: int, candidate: str | None) -> str:
    if iteration == 0:
        base = records(layout)[0]
        return (
            f"Experiment #0 (baseline) of session {layout.name}\n"
            f"- {key}: {fmt(base['metric_value'])}\n- Samples: {base['samples']}\n"
            f"- Commit: {base['end_commit']}\n"
        )
    folder = layout.cycle(iteration)
    decision = maybe_decision(layout.decision(iteration))
    if decision is None and not folder.is_dir():
        done = layout.completed_cycles()
        have = f"iterations 1 to {done[-1]}" if done else "no iteration yet"
        raise SessionError(f"session {layout.name!r} has no iteration {iteration} ({have})")
    batch = (decision or {}).get("candidates") or []
    names = [c["candidate"] for c in batch] or sorted(
        p.name for p in folder.iterdir() if p.is_dir() and (p / "proposal.json").exists()
    )
    if candidate is not None and candidate not in names:
        have = ", ".join(names) if names else "none: one proposal per iteration"
        raise SessionError(
            f"iteration {iteration} of session {layout.name!r} has no candidate "
            f"{candidate!r} (candidates: {have})"
        )
    wanted = [candidate] if candidate else names
    if not wanted:
        return block(layout, key, iteration, decision, "", folder)
    by_name = {c["candidate"]: c for c in batch}
    parts = [
        block(layout, key, iteration, by_name.get(name), name, folder / name) for name in wanted
    ]
    if decision is not None and candidate is None:
        kept = decision.get("candidate") if decision["status"] == KEPT else None
        parts.insert(
            0,
            f"Iteration {iteration} of session {layout.name}: {len(wanted)} candidates; "
            + (f"{kept} kept\n" if kept else "none kept\n"),
        )
    return "\n".join(parts)


def block(
    layout: SessionLayout,
    key: str,
    iteration: int,
    rec: dict[str, Any] | None,
    candidate: str,
    folder: Path,
) -> str:
    """One experiment: its record (or its proposal while it is not decided yet), its diff."""
    name = f"#{iteration}/{candidate}" if candidate else f"#{iteration}"
    lines = [f"Experiment {name} of session {layout.name}"]
    if rec is None:
        proposal = read_json(folder / "proposal.json")
        if proposal is None:
            return "\n".join(lines + ["- not proposed yet", ""])
        lines += [
            f"- Hypothesis: {proposal['hypothesis']}",
            f"- Outcome: {proposal['outcome']} (not decided yet)",
        ]
        measured = read_json(folder / "measurement.json")
        if measured is not None:
            shown = {
                k: measured[k] for k in ("value", "samples", "passed", "error") if k in measured
            }
            lines.append(f"- Measured: {json.dumps(shown)}")
    else:
        lines += experiment_lines(rec, key)
        if rec.get("error"):
            lines.append("- Error: " + rec["error"].strip().splitlines()[0][:300])
        if rec["status"] == KEPT:
            lines.append(f"- Commit: {rec['end_commit']} (kept)")
        else:
            lines.append(f"- Not committed: the worktree went back to {rec['end_commit'][:12]}")
    patch = folder / "proposal.patch"
    text = patch.read_text() if patch.exists() else ""
    where = patch.relative_to(layout.root)
    lines += ["", f"diff ({where}):" if text else f"diff ({where}): no change", text.rstrip("\n")]
    return "\n".join(lines).rstrip("\n") + "\n"

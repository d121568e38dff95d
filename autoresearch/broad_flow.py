"""What rules/broad.smk's input functions call: cheap reads of a broad session's files.

Like workflow_support, nothing here writes: cluster jobs re-parse the workflow.
"""

from __future__ import annotations

from pathlib import Path

from . import broad
from .layout import session_layout
from .workflow_support import SESSIONS, frozen_spec, next_open_cycle


def _layout(name: str):
    return session_layout(SESSIONS, name)


def _rel(path: Path) -> str:
    """Snakemake matches relative paths: sessions/<name>/..."""
    return str(Path(SESSIONS) / path.relative_to(Path(SESSIONS).absolute()))


def approve_inputs(name: str) -> list[str]:
    layout = _layout(name)
    # Once approved, hypotheses.md is history: editing it must not rerun every track
    # (the workflow profile reruns on mtime).
    if broad.approved_set(layout).exists():
        return []
    return [_rel(broad.hypotheses_md(layout))]


def track_ids(name: str) -> list[str]:
    return [h.id for h in broad.approved_hypotheses(_layout(name))]


def red_inputs(name: str, hid: str, cycle: int) -> list[str]:
    layout = _layout(name)
    inputs = [_rel(layout.spec), _rel(broad.track_meta(layout, hid))]
    if cycle > 1:
        previous = layout.decision(cycle - 1, hid)
        if not previous.exists():
            inputs.append(_rel(previous))
    elif frozen_spec(name).get("parallel") is False:
        # Sequential tracks (the seed's default): a track starts when the one before ends.
        ids = track_ids(name)
        index = ids.index(hid) if hid in ids else 0
        if index > 0:
            inputs.append(_rel(broad.track_result(layout, ids[index - 1])))
    return inputs


def evaluate_inputs(name: str, hid: str, cycle: str) -> dict[str, str]:
    base = Path(SESSIONS) / name / "cycles" / hid / cycle
    inputs = {"green": str(base / "green.json")}
    if "refactor" in frozen_spec(name)["teams"]:
        inputs["refactor"] = str(base / "refactor.json")
    return inputs


def track_end_inputs(checkpoints, wildcards) -> str:
    """Completed decisions are read from disk; `.get()` is asked only of the next open
    cycle (asking it of every cycle makes a no-op rerun quadratic, DESIGN §7)."""
    cycle = next_open_cycle(wildcards.name, wildcards.hid)
    job = checkpoints.broad_evaluate.get(
        name=wildcards.name, hid=wildcards.hid, cycle=f"{cycle:03d}"
    )
    return job.output.decision


def track_results(checkpoints, name: str) -> list[str]:
    checkpoints.broad_approve.get(name=name)
    layout = _layout(name)
    return [_rel(broad.track_result(layout, hid)) for hid in track_ids(name)]


def comparison(name: str) -> list[str]:
    return [_rel(broad.comparison_md(_layout(name)))]

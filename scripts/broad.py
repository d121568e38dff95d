"""rules/broad.smk: strategist, approval, tracks, their cycles' inputs, comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage
from autoresearch.modes.broad.tracks import track_ids
from autoresearch.session.layout import rel, session_layout
from autoresearch.session.spec import load_frozen

from . import cycle
from .common import made_by


def approve_inputs(name: str) -> list[str]:
    layout = session_layout(name)
    # Once approved, hypotheses.md is history: editing it must not rerun every track
    # (the workflow profile reruns on mtime).
    if layout.approved.exists():
        return []
    return [rel(layout.hypotheses_md)]


def _track_ids(name: str) -> list[str]:
    return track_ids(session_layout(name))


def red_inputs(name: str, hid: str, cycle_number: int) -> list[str]:
    """The track's spec and branch, its previous decision; with `parallel: false` a track
    starts only when the one before it has ended."""
    layout = session_layout(name)
    inputs = [rel(layout.spec), rel(layout.track_meta(hid))]
    if cycle_number > 1:
        inputs += cycle.red_inputs(name, cycle_number, hid)[1:]  # the previous decision
    elif load_frozen(layout.spec).get("parallel") is False:
        ids = _track_ids(name)
        index = ids.index(hid) if hid in ids else 0
        if index > 0:
            inputs.append(rel(layout.track_result(ids[index - 1])))
    return inputs


def track_results(name: str, checkpoints: Any) -> list[str]:
    """Every approved track's end record, known once the approval checkpoint ran."""
    checkpoints.session.get(name=name)
    made_by(name, "comparison.md")
    checkpoints.broad_approve.get(name=name)
    layout = session_layout(name)
    return [rel(layout.track_result(hid)) for hid in _track_ids(name)]


# --- jobs (stage modules imported on first use, as in scripts/cycle.py) ---------------


def strategist(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.broad import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.strategist(env, Path(output.hypotheses), Path(output.record)),
    )


def approve(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.broad import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.approve(env, env.layout.hypotheses_md, Path(output[0])),
    )


def track(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.broad import stages

    run_stage(
        wildcards, input, output, log, lambda env, mode: stages.open_track(env, Path(output[0]))
    )


def track_end(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.broad import stages

    run_stage(
        wildcards, input, output, log, lambda env, mode: stages.end_track(env, Path(output[0]))
    )


def comparison(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.broad import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.compare(env, Path(output.md), Path(output.data)),
    )

"""rules/cycle.smk: Red, sanitize, Green and Refactor, and the evaluate checkpoint's inputs
(its job is scripts/step.py's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage
from autoresearch.session.layout import rel, session_layout
from autoresearch.session.spec import SpecReader, load_frozen


def red_inputs(name: str, cycle: int, track: str = "", loop: str = "cycles") -> list[str]:
    """The frozen spec, and the previous cycle's decision until it is on disk (so a
    finished session's DAG stays a few jobs long)."""
    layout = session_layout(name, loop)
    inputs = [rel(layout.spec)]
    if cycle > 1:
        previous = layout.decision(cycle - 1, track)
        if not previous.exists():
            inputs.append(rel(previous))
    return inputs


def evaluate_inputs(
    name: str, cycle: str, track: str = "", read_spec: SpecReader = load_frozen
) -> dict[str, str]:
    """Red's and Green's records, and Refactor's unless the spec's teams leave it out (the
    spec as `read_spec` reads it: the run's FrozenSpecs when Snakemake asks)."""
    layout = session_layout(name)
    base = layout.cycles(track) / cycle
    inputs = {"red": rel(base / "red.json"), "green": rel(base / "green.json")}
    if read_spec(layout.spec).refactor_on:
        inputs["refactor"] = rel(base / "refactor.json")
    return inputs


def green_inputs(name: str, cycle: str, read_spec: SpecReader = load_frozen) -> dict[str, Any]:
    """sanitized.md, Red's record (where the cycle starts: red.json, never its findings),
    and with `agent.parallel_green: k` above 1 the k lanes' records."""
    from autoresearch.engine.green_lanes import lane_ids, lanes_of

    layout = session_layout(name)
    inputs: dict[str, Any] = {
        "findings": rel(layout.cycles() / cycle / "sanitized.md"),
        "red": rel(layout.cycles() / cycle / "red.json"),
    }
    k = lanes_of(read_spec(layout.spec))
    if k > 1:
        lanes = layout.cycles() / cycle / "green-lanes"
        inputs["lanes"] = [rel(lanes / f"{lane}.json") for lane in lane_ids(k)]
    return inputs


# --- jobs ----------------------------------------------------------------------------
# The stage modules are imported by the first job that needs them, not when the workflow
# is parsed: every dry run and every cluster job parses it, and they need none of them.


def red(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.engine import teams

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: teams.red(
            env, Path(output.findings), Path(output.record), mode.red_scope(env)
        ),
    )


def sanitize(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.engine import teams

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: teams.sanitize(
            env,
            Path(input.findings),
            Path(output[0]),
            held_back=lambda reported: mode.held_back(env, reported),
        ),
    )


def green(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.engine import green_lanes, teams

    lanes = [Path(p) for p in input.get("lanes", [])]

    def merge(env, start, todo):
        return green_lanes.merge(env, start, todo, lanes)

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: teams.green(
            env,
            Path(input.findings),
            Path(output.patch),
            Path(output.record),
            merge if lanes else None,
        ),
    )


def green_lane(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.engine import green_lanes

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: green_lanes.work_lane(
            env, wildcards.lane, Path(input.findings), Path(output[0])
        ),
    )


def refactor(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.engine import teams

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: teams.refactor(env, Path(output.patch), Path(output.record)),
    )

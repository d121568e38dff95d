"""rules/experiment.smk: propose (or a batch's candidates and their measurements), the
decide checkpoint's inputs and resources, the report and the plot (the decide job is
scripts/step.py's, with the mode's judge)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage
from autoresearch.session.layout import rel, session_layout
from autoresearch.session.spec import SpecReader, load_frozen
from autoresearch.views import preload

LOOP = "iterations"
# The resources the measuring job declares. Snakemake needs the names when it parses the
# workflow, which must not import the experiment package (cluster jobs and dry runs of
# every mode parse it): the names of config/schema.yaml's experiment.resources, which
# checks the spec (a unit test keeps the two equal).
MEASURE_RESOURCES = (
    "gpu",
    "gpu_model",
    "gres",
    "cpus_per_task",
    "slurm_partition",
    "slurm_account",
    "slurm_extra",
    "qos",
    "constraint",
)


def _experiment(name: str, read_spec: SpecReader):
    """The session's frozen experiment spec, read through `read_spec` (the run's
    FrozenSpecs: Snakemake asks for it once per job while it builds the DAG); None
    before setup wrote session.yaml."""
    path = session_layout(name, LOOP).spec
    if not path.exists():
        return None
    from autoresearch.modes.experiment.program import from_frozen

    return from_frozen(read_spec(path)["experiment"])


def decide_inputs(name: str, iteration: str, read_spec: SpecReader = load_frozen) -> dict[str, Any]:
    """The proposal, or with `experiment.parallel: k` every candidate's measurement."""
    layout = session_layout(name, LOOP)
    cfg = _experiment(name, read_spec)
    k = cfg.parallel if cfg is not None else 1
    if k == 1:
        folder = layout.cycle(int(iteration))
        # The patch too: decide applies it (git reads it, or a copy the jail's user may read).
        return {
            "proposal": rel(folder / "proposal.json"),
            "patch": rel(folder / "proposal.patch"),
        }
    candidates = [layout.candidate(int(iteration), f"c{i}") for i in range(1, k + 1)]
    return {
        "measurements": [rel(c / "measurement.json") for c in candidates],
        "patches": [rel(c / "proposal.patch") for c in candidates],  # the winner's is applied
    }


def measuring_resources(
    rule: str, read_spec: SpecReader = load_frozen
) -> dict[str, Callable[[Any], Any]]:
    """`resources:` of the rules that measure: each named resource from the session's
    `experiment.resources`, unset (None) where the spec names none or the job does not
    measure. experiment_measure always measures; decide measures the proposal when there
    is one per iteration, and the incumbent when `remeasure_every` says so."""

    def measures(cfg: Any, iteration: int) -> bool:
        if rule == "experiment_measure" or cfg.parallel == 1:
            return True
        return bool(cfg.remeasure_every) and iteration % cfg.remeasure_every == 0

    def value(resource: str) -> Callable[[Any], Any]:
        def of(wildcards: Any) -> Any:
            cfg = _experiment(wildcards.name, read_spec)
            if cfg is None or not measures(cfg, int(wildcards.cycle)):
                return None
            return cfg.resources.get(resource)

        return of

    return {resource: value(resource) for resource in MEASURE_RESOURCES}


# --- jobs (stage modules imported on first use, as in scripts/cycle.py) ---------------


def propose(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.modes.experiment import stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.propose(
            env, Path(output.proposal), Path(output.record), Path(output.patch)
        ),
    )


def propose_candidate(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    """One candidate of a batch, in its own worktree."""
    from autoresearch.modes.experiment import candidates, stages

    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: stages.propose(
            candidates.candidate_env(env, wildcards.cand),
            Path(output.proposal),
            Path(output.record),
            Path(output.patch),
        ),
    )


def measure(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    """Measure and guard one candidate of a batch."""
    from autoresearch.modes.experiment import batch, candidates

    preload.start()  # the end's imports, while this job waits on the metric and the guard
    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: batch.measure(
            candidates.candidate_env(env, wildcards.cand), Path(output.measurement)
        ),
    )


def report(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    run_stage(
        wildcards, input, output, log, lambda env, mode: mode.write_report(env, Path(output[0]))
    )


def plot(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    run_stage(
        wildcards, input, output, log, lambda env, mode: mode.write_plot(env, Path(output[0]))
    )

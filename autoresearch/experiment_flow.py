"""What rules/experiment.smk's input functions compute: cheap reads of session files.

Kept apart from experiment.py so parsing the Snakefile imports no more than it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import workflow_support as support


def propose_inputs(name: str, cycle: str) -> list[str]:
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return support.red_inputs(name, int(cycle))


def decide_inputs(name: str, cycle: str) -> dict[str, str]:
    """The proposal, and experiment-setup.json, which exists in experiment sessions only:
    in any other session this rule has a missing input and Snakemake picks `evaluate`."""
    base = f"{support.SESSIONS}/{name}"
    return {
        "proposal": f"{base}/cycles/{cycle}/proposal.json",
        "setup": f"{base}/experiment-setup.json",
    }


def last_decision(checkpoints: Any, name: str) -> str:
    """The decision of the first open iteration (or the one that stopped the loop); only it
    is asked of the checkpoint, so a no-op rerun stays linear (DESIGN §7)."""
    cycle = support.next_open_cycle(name)
    return checkpoints.experiment_decide.get(name=name, cycle=f"{cycle:03d}").output.decision


def done_inputs(checkpoints: Any, name: str) -> list[str]:
    """The loop's last decision, then the report and the plot."""
    base = f"{support.SESSIONS}/{name}"
    return [last_decision(checkpoints, name), f"{base}/report.md", f"{base}/progress.png"]


# The jobs, called from the rules' `run:` blocks (in Snakemake's process, like the
# cycle stages: no fresh interpreter per job). experiment.py is imported on first use.


def propose(wildcards: Any, output: Any, log: Any) -> None:
    from .entry import run_stage
    from .experiment import propose as stage

    run_stage(
        wildcards,
        log,
        lambda env: stage(env, Path(output.proposal), Path(output.record), Path(output.patch)),
    )


def decide(wildcards: Any, output: Any, log: Any) -> None:
    from .entry import run_stage
    from .experiment import decide as stage

    run_stage(wildcards, log, lambda env: stage(env, Path(output.results), Path(output.decision)))


def report(wildcards: Any, output: Any, log: Any) -> None:
    from .entry import run_stage
    from .experiment import write_report

    run_stage(wildcards, log, lambda env: write_report(env, Path(output[0])))


def plot(wildcards: Any, output: Any, log: Any) -> None:
    from .entry import run_stage
    from .experiment import write_plot

    run_stage(wildcards, log, lambda env: write_plot(env, Path(output[0])))

"""The incumbent's pool through Snakemake: a comparison after a discard pools the runs the
incumbent had in it, the machine class is recorded, and the decision says how many."""

from __future__ import annotations

import json

from conftest import Workflow
from test_experiment import change, spec_for
from test_experiment_sequential import noisy_target

SCRIPT = {
    "experiment": {
        1: change(
            1000, "Rename the loop variable", content="def steps():\n    return 1000  # same\n"
        ),
        2: change(900, "Halve the inner loop"),  # a true 10% gain under 2% noise
    }
}


def decision(session, n):
    return json.loads((session / "iterations" / f"{n:03d}" / "decision.json").read_text())


def test_the_second_comparison_pools_the_incumbents_runs_from_the_first(tmp_path):
    target = noisy_target(tmp_path)
    workflow = Workflow(tmp_path / "work")
    spec = spec_for(
        target,
        workflow,
        SCRIPT,
        goal="fewer steps",
        scope=["fast.py"],
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        sequential={"pool": True},
        max_iterations=2,
    )
    spec["commands"] = {"sandbox": "none"}  # the counter lives outside the worktrees
    workflow.run("p", spec)
    session = workflow.session("p")
    first, second = decision(session, 1), decision(session, 2)
    assert first["status"] == "discarded" and first["sequential"]["pooled"] == 0
    assert first["machine"] and second["machine"] == first["machine"]
    assert second["start_commit"] == first["start_commit"]  # the same incumbent
    assert second["sequential"]["pooled"] == len(first["incumbent_samples"])
    assert second["sequential"]["test"].startswith("Yuen-Welch")
    assert second["status"] == "kept"
    assert "pooled from earlier comparisons" in (session / "decision-log.md").read_text()

"""verify and status on an experiment whose iteration measured nothing by design."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import Workflow
from test_experiment import BAD, change, finish, make_target, spec_for


def cli(wf: Workflow, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        cwd=wf.workdir,
        env=wf.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def exp_target(tmp_path):
    return make_target(tmp_path / "target")


def test_an_iteration_ending_in_a_syntax_error_is_no_missing_file(workflow, exp_target):
    script = {
        "experiment": {
            1: [
                {"tool": "write_file", "args": {"path": "fast.py", "content": BAD}},
                finish("Inline the helper"),
                finish("Inline the helper"),  # told of the error, hands it in again
            ],
            2: [finish("Nothing to try")],  # no change at all: nothing to measure either
            3: change(400, "Remove the redundant pass"),
        }
    }
    spec = spec_for(
        exp_target,
        workflow,
        script,
        goal="fewer steps",
        scope=["fast.py"],
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        max_iterations=3,
        guard="none",
    )
    workflow.run("x", spec)
    session = workflow.session("x")
    statuses = [
        (session / "iterations" / f"{n:03d}" / "decision.json").read_text() for n in (1, 2, 3)
    ]
    assert '"syntax_error"' in statuses[0] and '"no_change"' in statuses[1]
    assert not (session / "iterations" / "001" / "measurements.json").exists()
    proc = cli(workflow, "verify", "x")
    assert proc.returncode == 0, proc.stdout
    assert "measurements.json" not in proc.stdout
    said = cli(workflow, "status", "x").stdout
    assert "Verify:" not in said, said
    # A decision that claims a measured value still needs the measurements behind it.
    (session / "iterations" / "003" / "measurements.json").unlink()
    proc = cli(workflow, "verify", "x")
    assert proc.returncode == 1 and "iterations/003/measurements.json: missing" in proc.stdout

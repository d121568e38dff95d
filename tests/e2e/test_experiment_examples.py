"""The bundled experiment examples (examples/experiment-*), each run through Snakemake with
the scripted backend replaying its agent-script.yaml, as docs/experiment.md shows them."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, git

from autoresearch.examples import make_example_repo

# example -> (its experiment keys, the statuses of its experiments)
EXAMPLES = {
    "experiment-ml-training": ({"program": "program.md"}, ["kept", "discarded"]),
    "experiment-api-latency": ({"program": "program.md"}, ["kept"]),
    "experiment-prompt": ({"mission": "missions/sentiment"}, ["kept", "discarded"]),
    "experiment-build-time": ({"program": "program.md"}, ["kept"]),
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_each_bundled_example_runs_with_the_scripted_backend(workflow, tmp_path, example):
    experiment, statuses = EXAMPLES[example]
    source = ROOT / "examples" / example
    target = make_example_repo(source, tmp_path / f"{example}.ready")
    spec = {
        "mode": "experiment",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "experiment": experiment,
        "agent": {"backend": "script", "script": str(source / "agent-script.yaml")},
    }
    workflow.run("x", spec)
    session = workflow.session("x")
    lines = (session / "experiments.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["status"] for e in entries] == ["baseline", *statuses]
    baseline = json.loads((session / "baseline.json").read_text())
    assert baseline["experiment_id"] == 1  # the first change is the best
    branch = json.loads((session / "setup.json").read_text())["branch"]
    subjects = git(target, "log", "--format=%s", branch).splitlines()
    assert subjects[0].startswith("autoresearch: exp 1 -- ")
    assert subjects[1].startswith("autoresearch: baseline ")
    assert git(target, "status", "--porcelain") == ""  # the example's checkout untouched
    assert (session / "config.json").exists() and (session / "done").exists()
    if example == "experiment-ml-training":  # its program.md names a branch, keeps failures
        assert branch == "autoresearch/ml-training"
        refs = git(target, "for-each-ref", "--format=%(refname)", "refs/autoresearch/")
        assert refs.endswith("/0002")
    if example == "experiment-prompt":  # its mission writes runs/<run-id>/ as it goes
        (folder,) = (target / "missions/sentiment/runs").iterdir()
        assert "## Recommended next steps" in (folder / "summary.md").read_text()

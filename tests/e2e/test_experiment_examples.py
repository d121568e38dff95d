"""The bundled experiment examples (examples/experiment-*), each run through Snakemake with
the scripted backend replaying its agent-script.yaml, as docs/experiment.md shows them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Workflow, git

from autoresearch.session.examples import make_example_repo

# example -> (its experiment keys, the statuses of its experiments). experiment-ml-training
# is the demo's (config/sessions/demo-experiment.yaml): its session is run once, by the
# `demo` fixture, and its checks are the demo's test below.
EXAMPLES = {
    "experiment-api-latency": ({"program": "program.md"}, ["kept"]),
    "experiment-prompt": ({"mission": "missions/sentiment"}, ["kept", "discarded"]),
    "experiment-build-time": ({"program": "program.md"}, ["kept"]),
}
ML_TRAINING = ["kept", "discarded"]


def check_example_session(session: Path, target: Path, statuses: list[str]) -> str:
    """What every example's session leaves: its experiments' statuses, the first change the
    best, kept on the session's branch over the baseline, the example's checkout untouched.
    Returns the branch."""
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
    return branch


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
    check_example_session(workflow.session("x"), target, statuses)
    if example == "experiment-prompt":  # its mission writes runs/<run-id>/ as it goes
        (folder,) = (target / "missions/sentiment/runs").iterdir()
        assert "## Recommended next steps" in (folder / "summary.md").read_text()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Workflow:
    """What `make demo` runs for the experiment demo, on a fresh folder: the example's
    repository made by the workflow's own rule, its script replayed (run once, read below)."""
    workflow = Workflow(tmp_path_factory.mktemp("demo") / "work")
    (workflow.workdir / "examples").symlink_to(ROOT / "examples")
    spec = yaml.safe_load((ROOT / "config/sessions/demo-experiment.yaml").read_text())
    workflow.run("demo-experiment", spec)
    return workflow


def test_the_ml_training_example_runs_with_the_scripted_backend(demo):
    """The demo's session is experiment-ml-training's, as each example's above."""
    # Every bundled experiment example is run: the others above, this one by the demo.
    bundled = sorted(p.name for p in (ROOT / "examples").glob("experiment-*"))
    assert bundled == sorted([*EXAMPLES, "experiment-ml-training"])
    session = demo.session("demo-experiment")
    target = demo.workdir / "sessions/_examples/experiment-ml-training"
    assert (target / "train.py").read_text() == (
        ROOT / "examples/experiment-ml-training/train.py"
    ).read_text()
    branch = check_example_session(session, target, ML_TRAINING)
    # Its program.md names a branch, and keeps the failures' commits under refs/autoresearch/.
    assert branch == "autoresearch/ml-training"
    refs = git(target, "for-each-ref", "--format=%(refname)", "refs/autoresearch/")
    assert refs.endswith("/0002")


def test_the_bundled_experiment_demo_finishes_and_show_prints_its_first_experiment(demo):
    """What `make demo` leaves on a fresh clone: sessions/demo-experiment/done, and the
    README's `autoresearch show demo-experiment 1`."""
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "sessions/demo-experiment/done" in recipe
    done = (demo.session("demo-experiment") / "done").read_text()
    assert "stopped: iteration limit reached (max_iterations = 2)" in done
    assert "best: val_loss = 0.014766 (experiment 1)" in done
    show = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "show", "demo-experiment", "1"],
        cwd=demo.workdir,
        env=demo.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert show.returncode == 0, show.stderr
    assert "- Hypothesis: Raise the learning rate from 0.01 to 0.3" in show.stdout
    assert "+LEARNING_RATE = 0.3" in show.stdout

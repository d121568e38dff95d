"""The sequential keep decision (experiment.sequential) through Snakemake: a real gain is
kept, a change that does nothing is discarded, a guard failure spends no metric run.

The metric is the step count the fake model's change sets, times seeded noise: the seed is
the worktree's name and a count of its runs, kept outside the worktrees, so every run
differs and the whole session is reproducible. (The test keeps a change with no effect at
most alpha = 5% of the time; with these seeds it is discarded.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Workflow, make_repo
from test_experiment import FAST, TESTS, change, jsonl, spec_for

NOISY = """import json
import random
from pathlib import Path

import fast

# One count per worktree, so the noise does not depend on the order the jobs run in.
slot = Path.cwd().name
counter = Path({counters!r}) / f"{{slot}}.txt"
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
noise = random.Random(f"{{slot}}-{{n}}").gauss(0, 0.02)
print(json.dumps({{"ops": fast.steps() * (1 + noise)}}))
"""


def noisy_target(base: Path) -> Path:
    """`base`/target: 1000 steps, measured with NOISY's noise (its counts in `base`/runs)."""
    counters = base / "runs"
    counters.mkdir()
    return make_repo(
        base / "target",
        {
            "fast.py": FAST.format(n=1000),
            "measure.py": NOISY.format(counters=str(counters)),
            "tests/test_fast.py": TESTS,
        },
    )


SCRIPT = {
    "experiment": {
        1: change(900, "Halve the inner loop"),  # a true 10% gain under 2% noise
        2: change(
            900, "Rename the loop variable", content="def steps():\n    return 900  # same\n"
        ),
        3: change(0, "Skip the work entirely"),  # the guard fails
    }
}


@pytest.fixture(scope="module")
def seq_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("seq")
    target = noisy_target(base)
    workflow = Workflow(base / "work")
    spec = spec_for(
        target,
        workflow,
        SCRIPT,
        goal="fewer steps",
        scope=["fast.py"],
        guard="python -m pytest -q",
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        sequential=True,
        max_iterations=3,
    )
    # The counter lives outside the worktrees, where a jailed command may not write.
    spec["commands"] = {"sandbox": "none"}
    workflow.run("s", spec)
    return workflow, workflow.session("s"), base / "runs"


def decision(session, n):
    return json.loads((session / "iterations" / f"{n:03d}" / "decision.json").read_text())


def test_a_real_gain_is_kept_with_its_p_value_effect_interval_and_pairs(seq_run):
    _, session, _ = seq_run
    d = decision(session, 1)
    assert d["status"] == "kept" and d["improved"] is True
    assert d["pairs"] >= 5 and len(d["samples"]) == len(d["incumbent_samples"]) == d["pairs"]
    assert d["p_value"] < d["sequential"]["level"]
    assert 0 < d["ci"][0] < d["effect"] < d["ci"][1]
    assert -0.15 < -d["relative_effect"] < -0.05  # about 10% fewer steps


def test_a_change_that_does_nothing_is_discarded(seq_run):
    _, session, _ = seq_run
    d = decision(session, 2)
    assert d["status"] == "discarded" and d["improved"] is False
    assert d["pairs"] >= 5 and d["ci"][0] < 0 < d["ci"][1]
    assert d["best"]["experiment_id"] == 1  # the incumbent stays the kept change


def test_a_guard_failure_discards_without_a_metric_run(seq_run):
    _, session, counters = seq_run
    d = decision(session, 3)
    assert d["status"] == "guard_failed" and d["pairs"] == 0 and d["samples"] == []
    # Every metric run: the run setup traces (measured.py: untimed, apart from the baseline),
    # the baseline, then two per pair of iterations 1 and 2, none for 3.
    traced = json.loads((session / "setup.json").read_text())["measured"]["traced"]
    runs = int(traced) + 1 + 2 * (decision(session, 1)["pairs"] + decision(session, 2)["pairs"])
    assert sum(int(f.read_text()) for f in counters.iterdir()) == runs


def test_experiments_jsonl_records_the_decision_and_its_figures(seq_run):
    _, session, _ = seq_run
    entries = jsonl(session)
    assert [e["status"] for e in entries] == ["baseline", "kept", "discarded", "guard_failed"]
    kept = entries[1]
    for key in ("p_value", "effect", "relative_effect", "ci", "ci_level", "pairs"):
        assert kept[key] == decision(session, 1)[key]
    assert entries[3]["pairs"] == 0
    log = (session / "decision-log.md").read_text()
    assert "interval for the gain" in log and "samples per side" in log


def test_show_prints_the_sequential_figures(seq_run):
    workflow, session, _ = seq_run
    proc = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "show", "s", "1"],
        cwd=workflow.workdir,
        env=workflow.env() | {"PYTHONPATH": str(ROOT)},  # this checkout's package
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    pairs = decision(session, 1)["pairs"]
    assert f"- Sequential test: keep after {pairs} pairs" in proc.stdout
    assert "- Gain per pair: +" in proc.stdout and "interval [" in proc.stdout


def test_a_batch_measures_each_candidate_against_the_incumbent_in_its_own_worktree(tmp_path):
    counters = tmp_path / "runs"
    counters.mkdir()
    target = make_repo(
        tmp_path / "target",
        {
            "fast.py": FAST.format(n=1000),
            "measure.py": NOISY.format(counters=str(counters)),
            "tests/test_fast.py": TESTS,
        },
    )
    workflow = Workflow(tmp_path / "work")
    script = {
        "experiment": {
            "c1/1": change(
                1000, "Rename the loop variable", content="def steps():\n    return 1000  # same\n"
            ),
            "c2/1": change(900, "Halve the inner loop"),
        }
    }
    spec = spec_for(
        target,
        workflow,
        script,
        goal="fewer steps",
        scope=["fast.py"],
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        sequential=True,
        parallel=2,
        max_iterations=1,
    )
    spec["commands"] = {"sandbox": "none"}
    workflow.run("b", spec)  # one core: the runs take the counter's seeds in turn
    session = workflow.session("b")
    d = decision(session, 1)
    by_name = {c["candidate"]: c for c in d["candidates"]}
    assert by_name["c1"]["status"] == "discarded" and by_name["c2"]["status"] == "kept"
    assert d["best"]["candidate"] == "c2" and by_name["c2"]["p_value"] < 0.05
    for c in ("c1", "c2"):
        measured = json.loads((session / f"iterations/001/{c}/measurement.json").read_text())
        assert len(measured["incumbent_samples"]) == measured["sequential"]["samples"] >= 5
        assert (session / "tracks" / f"{c}-incumbent" / "worktree" / "fast.py").read_text() == (
            FAST.format(n=1000)
        )

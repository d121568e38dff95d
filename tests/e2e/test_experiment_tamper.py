"""In-process gaming through Snakemake: the file the agent may edit replaces `print`, and a
byte-identical, protected measure.py then reports `ops = 1`. The change is flagged and not
kept; with `allow_flagged: true` the same change is measured, and the measurement's guard
refuses it (tampered); an improvement beyond `max_gain` is a flag too."""

from __future__ import annotations

import json

from conftest import git, make_repo
from test_experiment import FAST, TESTS, change, jsonl, spec_for
from test_experiment import MEASURE as TEMPLATE

MEASURE = TEMPLATE.replace("{{", "{").replace("}}", "}")

# Every print in the process now says what the metric wants to hear.
TAMPER = (
    FAST.format(n=1000)
    + "\n\nimport builtins\n\n_print = builtins.print\n"
    + "builtins.print = lambda *a, **k: _print('{\"ops\": 1}')\n"
)
SCRIPT = {
    "experiment": {
        1: change(1000, "Count faster", content=TAMPER),
        2: change(800, "Halve the inner loop"),  # an honest 20% gain
    }
}


def target(tmp_path):
    return make_repo(
        tmp_path / "target",
        {"fast.py": FAST.format(n=1000), "measure.py": MEASURE, "tests/test_fast.py": TESTS},
    )


def run(workflow, repo, **extra):
    spec = spec_for(
        repo,
        workflow,
        SCRIPT,
        goal="fewer steps",
        scope=["fast.py"],
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        max_iterations=2,
        **extra,
    )
    workflow.run("t", spec)
    session = workflow.session("t")
    decisions = [
        json.loads((session / "iterations" / f"{n:03d}" / "decision.json").read_text())
        for n in (1, 2)
    ]
    return session, decisions


def test_a_print_replacement_that_fools_a_protected_measure_script_is_not_kept(workflow, tmp_path):
    repo = target(tmp_path)
    session, (tampered, honest) = run(workflow, repo)
    assert tampered["status"] == "discarded" and tampered["samples"] == []  # never measured
    assert tampered["verdict"].startswith("flagged, not kept: fast.py:")
    assert {f["check"] for f in tampered["flags"]} >= {"builtins"}
    assert "rebinds builtins.print" in tampered["verdict"]
    assert honest["status"] == "kept" and honest["metric_value"] == 800
    subjects = git(session / "worktree", "log", "--format=%s").splitlines()
    assert len(subjects) == 3 and "Halve the inner loop" in subjects[0]  # on the baseline
    assert "builtins" not in (session / "worktree" / "fast.py").read_text()
    proposal = json.loads((session / "iterations/001/proposal.json").read_text())
    assert proposal["flags"] == tampered["flags"]
    assert [e["status"] for e in jsonl(session)] == ["baseline", "discarded", "kept"]


def test_allow_flagged_lets_it_be_measured_and_the_measurements_guard_refuses_it(
    workflow, tmp_path
):
    repo = target(tmp_path)
    session, (tampered, honest) = run(workflow, repo, allow_flagged=True)
    # The screen's flags allowed, the change is measured: the guard in the measuring process
    # (measure/guard.py) sees print rebound, so no value is read and nothing is kept.
    assert tampered["status"] == "crash" and tampered["metric_value"] is None
    assert tampered["error"] == (
        "measurement tampered: the measured process changed builtins.print (fast.py:8)"
    )
    assert tampered["end_commit"] == tampered["start_commit"]
    assert honest["status"] == "kept" and honest["metric_value"] == 800


def test_an_improvement_beyond_max_gain_is_flagged_and_not_kept(workflow, tmp_path):
    repo = target(tmp_path)
    session, (_, honest) = run(workflow, repo, max_gain="10%")
    assert honest["status"] == "discarded" and honest["metric_value"] == 800
    assert "improves by 20.0%, more than max_gain 10%" in honest["verdict"]
    assert [f["check"] for f in honest["flags"]] == ["gain"]


def test_a_module_patched_through_vars_is_flagged_and_its_fake_result_not_kept(workflow, tmp_path):
    # No name the checks knew: json.dumps replaced through the module's namespace, so the
    # protected measure.py prints {"ops": 1}.
    patched = (
        FAST.format(n=1000)
        + "\n\nimport json\n\nvars(json).update(dumps=lambda *a, **k: '{\"ops\": 1}')\n"
    )
    script = {"experiment": {1: change(1000, "Serialise less", content=patched)}}
    repo = target(tmp_path)
    spec = spec_for(
        repo,
        workflow,
        script,
        goal="fewer steps",
        scope=["fast.py"],
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        max_iterations=1,
    )
    workflow.run("v", spec)
    session = workflow.session("v")
    decision = json.loads((session / "iterations/001/decision.json").read_text())
    assert decision["status"] == "discarded" and decision["samples"] == []
    assert "uses vars(json)" in decision["verdict"]
    assert "vars(json)" not in (session / "worktree" / "fast.py").read_text()

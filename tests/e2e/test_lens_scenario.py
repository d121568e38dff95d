"""The scenario lens through Snakemake: one dimension per iteration, least covered first;
situations classified new / variant / duplicate; every dimension tried before saturation may
stop the loop; the report files, pytest skeletons, and the high-severity hand-on."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import Workflow, calc_repo, git


def situation(title, dimension, severity="medium", **extra) -> dict:
    args = {
        "title": title,
        "dimension": dimension,
        "actors": "a clerk",
        "precondition": "the calculator is loaded",
        "trigger": f"the clerk tries {title}",
        "flow": "the clerk calls the function",
        "expected": "a clear answer",
        "what_can_go_wrong": "an exception",
        "severity": severity,
        **extra,
    }
    return {"tool": "report_situation", "args": args}


SCRIPT = {
    "explorer": {
        1: [
            situation("adds two numbers", "happy-path", location="calc.py:2"),
            situation("mean of nothing", "happy-path", severity="high", location="calc.py:6"),
        ],
        2: [
            situation("mean of nothing", "errors", location="calc.py:5"),  # a variant
            situation("adds two numbers", "happy-path", location="calc.py:2"),  # duplicate
            situation("weird", "telepathy"),  # not a dimension
        ],
    }
}


@pytest.fixture(scope="module")
def scenario_run(tmp_path_factory):
    """One scenario session of SCRIPT: every test here reads it and changes nothing."""
    base = tmp_path_factory.mktemp("scenario")
    workflow, target = Workflow(base / "work"), calc_repo(base / "target")
    head = git(target, "rev-parse", "HEAD")
    spec = {
        "mode": "scenario",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "scenario": {"seed": "A clerk averages the day's sales", "format": "pytest"},
        "fail_on": "high",
        "agent": {
            "backend": "script",
            "script": str(workflow.script(SCRIPT)),
            "transcript": str(workflow.workdir / "t.jsonl"),
        },
    }
    workflow.run("sc", spec)
    return workflow, target, head


def rows(session):
    with (session / "scenario-results.tsv").open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def test_each_dimension_is_tried_once_before_saturation_stops_the_loop(scenario_run):
    workflow = scenario_run[0]
    log = rows(workflow.session("sc"))
    assert [r["category"] for r in log[:2]] == ["happy-path", "errors"]
    assert len(log) == 12 and len({r["category"] for r in log}) == 12
    decision = json.loads((workflow.session("sc") / "lens/012/decision.json").read_text())
    assert decision["reason"] == "saturated: 3 iterations in a row added nothing new"


def test_each_brief_names_one_dimension_and_the_seed(scenario_run):
    workflow = scenario_run[0]
    briefs = workflow.transcript(workflow.workdir / "t.jsonl")
    assert [b["data"]["dimension"] for b in briefs][:3] == ["happy-path", "errors", "edge-values"]
    assert all("A clerk averages the day's sales" in b["task"] for b in briefs)


def test_situations_are_classified_and_the_drops_counted(scenario_run):
    session = scenario_run[0].session("sc")
    handoff = json.loads((session / "handoff.json").read_text())
    second = rows(session)[1]
    assert second["new"] == "0"  # only a variant: nothing new
    assert second["drop_reasons"] == "duplicate=1,not-allowed=1"
    summary = (session / "summary.md").read_text()
    # Drops count under the dimension the iteration worked on.
    assert "| errors | 1 | 0 | 1 | 1 | 0 | 0 |" in summary
    assert "| happy-path | 1 | 2 | 0 | 0 | 0 | 1 |" in summary
    assert [f["title"] for f in handoff["findings"]] == ["mean of nothing"]  # high only
    assert handoff["findings"][0]["task"].startswith("write a test for this scenario")


def test_the_report_files_and_pytest_skeletons(scenario_run):
    session = scenario_run[0].session("sc")
    for name in ("scenarios.md", "edge-cases.md", "use-cases.md", "summary.md", "findings.md"):
        assert (session / name).is_file(), name
    assert "- Given the calculator is loaded" in (session / "use-cases.md").read_text()
    assert "adds two numbers" not in (session / "edge-cases.md").read_text()
    skeleton = (session / "tests" / "test_scenarios.py").read_text()
    compile(skeleton, "test_scenarios.py", "exec")
    assert skeleton.count("@pytest.mark.skip") == 3


def test_scenario_changes_nothing_and_gates_on_the_high_situation(scenario_run):
    workflow, target, head = scenario_run
    assert git(target, "rev-parse", "HEAD") == head and git(target, "status", "--porcelain") == ""
    assert "gate: FAILED" in (workflow.session("sc") / "done").read_text()

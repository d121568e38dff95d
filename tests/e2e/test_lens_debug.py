"""The debug lens through Snakemake: a bug is confirmed only by a failing reproduction, a
passing one stays a lead, a disproven hypothesis is kept in eliminated.md, the schema drops
are counted, the target is never changed, and the gate drives `autoresearch check`."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from conftest import Workflow, git, make_repo

CALC = (
    "def mean(values):\n    return sum(values) / len(values)\n\n\n"
    "def add(a, b):\n    return a + b\n"
)
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FAILING_REPRO = (
    "from calc import mean\n\n\ndef test_empty_mean_is_zero():\n    assert mean([]) == 0\n"
)
PASSING_REPRO = "from calc import add\n\n\ndef test_add_negative():\n    assert add(-1, 1) == 0\n"


def bug(title, location="calc.py:2", verdict="confirmed", severity="high", **extra) -> dict:
    args = {
        "title": title,
        "category": "crash",
        "location": location,
        "hypothesis": f"I think {title} because of the code; test by a reproduction.",
        "evidence": "mean divides by len(values).",
        "verdict": verdict,
        "severity": severity,
        **extra,
    }
    return {"tool": "report_bug", "args": args}


SCRIPT = {
    "debugger": {
        1: [
            bug("mean of an empty list crashes", reproduction=FAILING_REPRO,
                impact="A caller with no values gets ZeroDivisionError.",
                root_cause="No guard for an empty list."),
            bug("add loses negative numbers", location="calc.py:6", reproduction=PASSING_REPRO),
            bug("add overflows", location="calc.py:6", verdict="disproven", severity="low"),
            bug("nowhere", location="calc.py:99"),
            bug("bad severity", severity="urgent"),
            bug("mean of an empty list crashes", reproduction=FAILING_REPRO),  # duplicate
        ],
    }
}  # fmt: skip


@pytest.fixture(scope="module")
def debug_run(tmp_path_factory):
    """One debug session of SCRIPT: every test here reads it and changes nothing."""
    base = tmp_path_factory.mktemp("debug")
    workflow = Workflow(base / "work")
    target = make_repo(base / "target", {"calc.py": CALC, "tests/test_calc.py": TESTS})
    head = git(target, "rev-parse", "HEAD")
    spec = {
        "mode": "debug",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "debug": {"symptom": "mean() crashes on some inputs"},
        "agent": {"backend": "script", "script": str(workflow.script(SCRIPT))},
    }
    workflow.run("dbg", spec)
    return workflow, target, head


def test_a_failing_reproduction_confirms_a_bug_and_a_passing_one_leaves_a_lead(debug_run):
    workflow, _, _ = debug_run
    handoff = json.loads((workflow.session("dbg") / "handoff.json").read_text())
    verdicts = {f["title"]: f["verdict"] for f in handoff["findings"]}
    assert verdicts == {
        "mean of an empty list crashes": "confirmed",
        "add loses negative numbers": "new-lead",
        "add overflows": "disproven",
    }
    confirmed = next(f for f in handoff["findings"] if f["verdict"] == "confirmed")
    assert confirmed["regression_test"] == FAILING_REPRO
    saved = workflow.session("dbg") / confirmed["reproduction_file"]
    assert saved.read_text() == FAILING_REPRO


def test_the_report_files_separate_bugs_from_eliminated_hypotheses(debug_run):
    session = debug_run[0].session("dbg")
    findings = (session / "findings.md").read_text()
    assert "[confirmed] [high] mean of an empty list crashes" in findings
    assert "add overflows" not in findings
    assert "add overflows" in (session / "eliminated.md").read_text()
    summary = (session / "summary.md").read_text()
    assert "1 confirmed, 1 new-lead, 0 inconclusive, 1 disproven" in summary


def test_bad_location_bad_severity_and_a_duplicate_are_dropped_and_counted(debug_run):
    session = debug_run[0].session("dbg")
    with (session / "debug-results.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == 1
    assert rows[0]["dropped"] == "3"
    assert rows[0]["drop_reasons"] == "duplicate=1,location=1,not-allowed=1"
    checked = json.loads((session / "lens" / "001" / "checked.json").read_text())
    reasons = sorted(d["reason"].split(":")[0] for d in checked["dropped"])
    assert reasons[0].startswith("duplicate of") and "location does not exist" in reasons


def test_the_hunt_stops_when_no_lead_is_left(debug_run):
    session = debug_run[0].session("dbg")
    decision = json.loads((session / "lens" / "001" / "decision.json").read_text())
    assert decision["stop"] and decision["reason"] == "no untested lead remains"


def test_debug_changes_nothing_in_the_target(debug_run):
    workflow, target, head = debug_run
    assert git(target, "rev-parse", "HEAD") == head
    assert git(target, "status", "--porcelain") == ""
    worktree = workflow.session("dbg") / "worktree"
    assert git(worktree, "status", "--porcelain") == ""  # the scratch test is gone
    assert git(worktree, "rev-parse", "HEAD") == head


def test_a_confirmed_high_bug_fails_the_gate_and_check_exits_1(debug_run):
    workflow = debug_run[0]
    assert "gate: FAILED" in (workflow.session("dbg") / "done").read_text()
    check = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "check", "dbg"],
        cwd=workflow.workdir, capture_output=True, text=True,
    )  # fmt: skip
    assert check.returncode == 1 and "FAILED" in check.stdout

"""The sweep loop across cycles: what later Red briefs say, stop rules, revert order."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import (
    CALC,
    CALC_TESTS,
    GUARDED_CALC,
    MEAN_FINDING,
    Workflow,
    calc_repo,
    git,
    make_repo,
)

OTHER = dict(MEAN_FINDING, title="add is not commutative-safe", location="calc.py:2")


@pytest.fixture(scope="module")
def two_cycles(tmp_path_factory):
    """Two cycles without Refactor: Red finds MEAN_FINDING, Green fixes it, Red finds OTHER.
    Returns the Workflow and the briefs; read by the tests of either cycle."""
    script = {
        "red": {
            1: [{"tool": "report_finding", "args": MEAN_FINDING}],
            2: [{"tool": "report_finding", "args": OTHER}],
        },
        "green": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": GUARDED_CALC}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "guard"}},
            ]
        },
    }
    base = tmp_path_factory.mktemp("loop")
    workflow = Workflow(base / "work")
    target = calc_repo(base / "target")
    return workflow, workflow.run_script(target, script, max_cycles=2, teams=["red", "green"])


def test_later_red_is_told_what_was_tried_and_where_to_look(two_cycles):
    _, briefs = two_cycles
    red2 = [b for b in briefs if b["team"] == "red"][1]
    text = red2["system"] + red2["task"]
    assert "F-001 mean crashes on empty input (calc.py:5) (fixed)" in text
    assert "calc.py" in red2["data"].get("adjacent_files", [])
    # Only the category that found something last cycle is kept.
    assert red2["data"]["categories"] == ["bugs"]


def test_finding_ids_continue_across_cycles(two_cycles):
    workflow, _ = two_cycles
    second = (workflow.session("s") / "cycles/002/red-findings.md").read_text()
    assert "[F-002]" in second and "add is not commutative-safe" in second


@pytest.fixture(scope="module")
def one_cycle_without_refactor(tmp_path_factory):
    """One cycle in which Red finds nothing, the teams without Refactor and no stop_below
    (so only max_cycles can end it): read by the tests of either."""
    base = tmp_path_factory.mktemp("loop")
    workflow = Workflow(base / "work")
    spec = dict(max_cycles=1, stop_below=None, teams=["red", "green"])
    workflow.run_script(calc_repo(base / "target"), {"red": {"*": []}}, **spec)
    return workflow


def test_stops_at_max_cycles(one_cycle_without_refactor):
    workflow = one_cycle_without_refactor
    assert workflow.decision("s", 1)["reason"] == "max_cycles reached (1)"
    assert "stopped: max_cycles reached (1)" in (workflow.session("s") / "done").read_text()


# The stop rules' other reasons (Refactor changed nothing while Green fixed; Green kept no
# fix, with or without Refactor) are tests/unit/test_stop_rules.py's, on the decisions the
# loop writes; here the loop's own records reach one of them and done says it.
def test_two_cycles_that_found_nothing_stop_saying_nothing_fixable_was_left(workflow, target):
    # Refactor changed nothing in either cycle, but only because there was nothing to fix.
    workflow.run_script(target, {"red": {"*": []}}, max_cycles=5, stop_below=None)
    assert not workflow.decision("s", 1)["stop"]
    reason = "nothing fixable was left: two consecutive cycles in which Red found nothing"
    assert workflow.decision("s", 2)["reason"] == reason
    assert f"stopped: {reason}" in (workflow.session("s") / "done").read_text()
    assert not (workflow.session("s") / "cycles/003").exists()


def test_teams_without_refactor_skip_the_rule(one_cycle_without_refactor):
    workflow = one_cycle_without_refactor
    cycle = workflow.session("s") / "cycles/001"
    assert not (cycle / "refactor-patch.md").exists()
    rows = (workflow.session("s") / "results.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[1] for r in rows] == ["red", "green"]


# A suite that passes on the per-fix gate's runs (the change staged) but fails on a
# committed tree whenever calc.py carries a marker: a fault only evaluate's run of the
# commit can catch, once it runs the tree again (`evaluate.rerun`: else it reuses the
# gate's run of the very same tree).
FLAKY_CONFTEST = """\
import pathlib
import subprocess


def pytest_sessionstart(session):
    staged = subprocess.run(["git", "diff", "--cached", "--quiet"]).returncode != 0
    if not staged and "MARKER" in pathlib.Path("calc.py").read_text():
        raise SystemExit("a committed marked tree fails")
"""


def test_broken_cycle_reverts_refactor_then_green_newest_first(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "t",
        {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "conftest.py": FLAKY_CONFTEST},
    )
    marked = GUARDED_CALC + "# MARKER\n"
    script = {
        "red": {1: [{"tool": "report_finding", "args": MEAN_FINDING}]},
        "green": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": marked}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "guard"}},
            ]
        },
        "refactor": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": marked + "# r1\n"}},
                {"tool": "finish_refactor", "args": {"summary": "r1"}},
                {
                    "tool": "write_file",
                    "args": {"path": "calc.py", "content": marked + "# r1\n# r2\n"},
                },
                {"tool": "finish_refactor", "args": {"summary": "r2"}},
            ]
        },
    }
    # per_fix: its gate tests the staged change, so only evaluate's run meets the fault
    # (the batch gate tests committed trees and would take F-001 out first).
    workflow.run_script(repo, script, max_cycles=2, test_gate="per_fix", evaluate={"rerun": True})
    decision = workflow.decision("s", 1)
    assert [r["subject"] for r in decision["reverted"]] == [
        "refactor: r2",
        "refactor: r1",
        "fix: [F-001] guard",
    ]
    assert decision["tests_pass"] and decision["fixed"] == []
    assert "MARKER" not in (workflow.session("s") / "worktree/calc.py").read_text()
    log = git(workflow.session("s") / "worktree", "log", "--format=%s").splitlines()
    assert log[0].startswith('Revert "fix: [F-001] guard"')
    # The page says what broke before the reverts from the decision alone, so verify can
    # render it again and finds it whole.
    page = (workflow.session("s") / "cycles/001/eval-results.md").read_text()
    first = f"- Before reverts: {decision['first_test_summary']}; {decision['first_test_verdict']}"
    assert decision["first_test_summary"] and first in page.splitlines()
    verify = [sys.executable, "-m", "autoresearch.cli", "verify", "s"]
    proc = subprocess.run(
        verify, cwd=workflow.workdir, env=workflow.env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout


# Breaks every run of a committed tree for good once calc.py was marked: the poison file
# lies outside the repository, where no revert can reach it.
POISONING_CONFTEST = """\
import pathlib
import subprocess


def pytest_sessionstart(session):
    poison = pathlib.Path({poison!r})
    if "MARKER" in pathlib.Path("calc.py").read_text():
        poison.write_text("x")
    staged = subprocess.run(["git", "diff", "--cached", "--quiet"]).returncode != 0
    if not staged and poison.exists():
        raise SystemExit("a committed tree fails")
"""


def test_unrecoverable_break_stops_the_session(workflow, tmp_path):
    conftest = POISONING_CONFTEST.format(poison=str(tmp_path / "poison"))
    repo = make_repo(
        tmp_path / "t",
        {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "conftest.py": conftest},
    )
    script = {
        "red": {1: [{"tool": "report_finding", "args": MEAN_FINDING}]},
        "green": {
            1: [
                {
                    "tool": "write_file",
                    "args": {"path": "calc.py", "content": GUARDED_CALC + "# MARKER\n"},
                },
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "g"}},
            ]
        },
    }
    # No jail: the poison must be able to outlive the worktree's history. per_fix: the
    # fault must get past Green's gate (a staged change) to meet evaluate's reverts, and
    # evaluate must run the gate's tree again (`evaluate.rerun`).
    workflow.run_script(
        repo,
        script,
        max_cycles=3,
        teams=["red", "green"],
        commands={"sandbox": "none"},
        test_gate="per_fix",
        evaluate={"rerun": True},
    )
    decision = workflow.decision("s", 1)
    assert decision["broken"] and decision["stop"]
    assert [r["how"] for r in decision["reverted"]] == ["revert", "reset"]
    assert "reverting did not bring them back" in (workflow.session("s") / "done").read_text()
    assert not (workflow.session("s") / "cycles/002").exists()


def test_red_refuses_findings_at_places_that_do_not_exist_and_repeats(workflow, target):
    elsewhere = dict(MEAN_FINDING, location="nowhere.py:3")
    past_end = dict(MEAN_FINDING, location="calc.py:999")
    again = dict(MEAN_FINDING, title="  MEAN crashes on empty input ")
    script = {
        "red": {
            1: [
                {"tool": "report_finding", "args": elsewhere},
                {"tool": "report_finding", "args": past_end},
                {"tool": "report_finding", "args": MEAN_FINDING},
                {"tool": "report_finding", "args": again},
            ]
        },
        "green": {
            1: [{"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "nothing"}}]
        },
    }
    workflow.run_script(target, script, max_cycles=1)
    findings = (workflow.session("s") / "cycles/001/red-findings.md").read_text()
    assert findings.count("calc.py:5") == 1 and "nowhere.py" not in findings
    log = (workflow.session("s") / "logs/red/001.log").read_text()
    assert "there is no file 'nowhere.py'" in log and "the file has" in log
    assert "already reported in this run as F-001" in log
    # Green called finish_fix without changing anything: the skip says so.
    green = (workflow.session("s") / "cycles/001/green-patch.md").read_text()
    assert "[F-001] not kept: finish_fix was called with no change" in green


# The target's ruff config fixes what it finds: Red must report, not fix.
RUFF_FIXES_ON_ITS_OWN = 'fix = true\n\n[lint]\nselect = ["F401"]\n'


def test_ruff_red_reports_without_fixing_whatever_the_target_config_says(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "t",
        {
            "calc.py": "import os\nimport sys\n\n\n" + CALC,
            "tests/test_calc.py": CALC_TESTS,
            "ruff.toml": RUFF_FIXES_ON_ITS_OWN,
        },
    )
    spec = {
        "mode": "sweep",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "teams": ["red", "green"],
        "agent": {"backend": "ruff"},
    }
    workflow.run("s", spec)
    findings = (workflow.session("s") / "cycles/001/red-findings.md").read_text()
    assert findings.count("### [F-") == 2  # both reported: nothing was fixed behind Red's back
    assert not json.loads((workflow.session("s") / "cycles/001/red.json").read_text())[
        "worktree_restored"
    ]

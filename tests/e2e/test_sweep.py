"""Sweep mode through Snakemake: the cycle's files, commits, clean room and stop rules."""

from __future__ import annotations

import json

import pytest
from conftest import Workflow, calc_repo, git, script_spec

from autoresearch.safety import git as gitops

FIXED_MEAN = """\
def add(a, b):
    return a + b


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)
"""
BROKEN_ADD = FIXED_MEAN.replace("return a + b", "return a - b")

RED_NARRATIVE = "I read calc.py line by line and noticed this while tracing mean()."
FIX_HINT = "You should add a guard that raises ValueError."

SCRIPT = {
    "red": {
        1: [
            {
                "tool": "report_finding",
                "args": {
                    "severity": "high",
                    "title": "mean crashes on an empty list",
                    "location": "calc.py:5",
                    "issue": f"mean([]) divides by zero. {RED_NARRATIVE} {FIX_HINT}",
                    "impact": "Callers get ZeroDivisionError instead of a clear error.",
                },
            },
            {
                "tool": "report_finding",
                "args": {
                    "severity": "medium",
                    "title": "add lacks type checks",
                    "location": "calc.py:1",
                    "issue": "add accepts any operands.",
                    "impact": "Wrong types give confusing results.",
                },
            },
            {
                "tool": "report_finding",
                "args": {
                    "severity": "low",
                    "title": "module has no docstring",
                    "location": "calc.py:1",
                    "issue": "calc.py has no module docstring.",
                    "impact": "Readers must guess the module's purpose.",
                },
            },
        ],
    },
    "green": {
        1: [
            {"tool": "write_file", "args": {"path": "calc.py", "content": FIXED_MEAN}},
            {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "guard empty mean"}},
            {"tool": "write_file", "args": {"path": "calc.py", "content": BROKEN_ADD}},
            {"tool": "finish_fix", "args": {"finding_id": "F-002", "summary": "change add"}},
            {"tool": "skip_finding", "args": {"finding_id": "F-003", "reason": "cosmetic"}},
        ],
    },
    "refactor": {
        1: [
            {
                "tool": "edit_file",
                "args": {
                    "path": "calc.py",
                    "old_str": "def add(a, b):",
                    "new_str": "def add(a, b):  # sum of two numbers",
                },
            },
            {"tool": "finish_refactor", "args": {"summary": "comment add"}},
        ],
    },
}


def run_session(workflow, target, **extra):
    script = workflow.script(SCRIPT)
    transcript = workflow.workdir / "transcript.jsonl"
    spec = script_spec(target, script, transcript, **extra)
    workflow.run("s", spec)
    return workflow.transcript(transcript)


def session_of(tmp_path_factory, **extra):
    """One session of SCRIPT, run once for the tests of its module that only read it: its
    Workflow, target, briefs and the user's checkout of the target as it was before."""
    base = tmp_path_factory.mktemp("sweep")
    workflow, target = Workflow(base / "work"), calc_repo(base / "target")
    before = gitops.snapshot(target)
    return workflow, target, run_session(workflow, target, max_cycles=1, **extra), before


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """A cycle under the default (batch) test gate: its Workflow, target and briefs."""
    return session_of(tmp_path_factory)


@pytest.fixture(scope="module")
def per_fix(tmp_path_factory):
    """The same cycle under the per-fix test gate."""
    return session_of(tmp_path_factory, test_gate="per_fix")


def test_cycle_writes_every_stage_file(batch):
    workflow, _, _, _ = batch
    cycle = workflow.session("s") / "cycles" / "001"
    for name in (
        "red-findings.md",
        "sanitized.md",
        "green-patch.md",
        "refactor-patch.md",
        "eval-results.md",
        "decision.json",
    ):
        assert (cycle / name).is_file(), name
    assert (workflow.session("s") / "done").read_text().startswith("session: s")


def test_users_checkout_is_identical_after_a_session(batch):
    # The cycle kept a fix, reverted a failing one and committed Refactor's change, all on
    # the session's branch in its own worktree: the user's branch, index and files are as
    # they were.
    _, target, _, before = batch
    assert gitops.snapshot(target) == before


def test_green_commits_passing_fix_and_restores_failing_one(per_fix):
    workflow, _, _, _ = per_fix
    worktree = workflow.session("s") / "worktree"
    subjects = git(worktree, "log", "--format=%s").splitlines()
    assert subjects[:2] == ["refactor: comment add", "fix: [F-001] guard empty mean"]
    assert not any("F-002" in s for s in subjects)
    assert "return a + b" in (worktree / "calc.py").read_text()
    patch = (workflow.session("s") / "cycles/001/green-patch.md").read_text()
    assert "[F-002] tests fail: tests/test_calc.py::test_add" in patch  # names the test
    assert "[F-003] cosmetic" in patch


def test_refactor_patch_gives_its_change_count_under_its_title(batch):
    workflow, _, _, _ = batch
    text = (workflow.session("s") / "cycles/001/refactor-patch.md").read_text()
    assert text.splitlines()[:3] == ["# Refactor team: cycle 001", "", "## Changes: 1"]


def test_green_is_never_told_reds_narrative_or_fix_hints(batch):
    _, _, briefs, _ = batch
    green = [b for b in briefs if b["team"] == "green"]
    assert green
    for brief in green:
        text = json.dumps(brief)
        assert "mean([]) divides by zero" in text
        assert "noticed" not in text and "should add a guard" not in text
        assert "scripted notes" not in text


def test_refactor_is_told_changed_files_and_no_finding(batch):
    _, _, briefs, _ = batch
    refactor = [b for b in briefs if b["team"] == "refactor"]
    assert refactor
    text = json.dumps(refactor)
    assert "calc.py" in text
    for leaked in ("F-001", "mean crashes", "divides by zero", "empty list"):
        assert leaked not in text


def test_red_gets_no_write_tool(batch):
    _, _, briefs, _ = batch
    red_tools = set(next(b for b in briefs if b["team"] == "red")["tools"])
    assert not red_tools & {"write_file", "edit_file", "run_tests"}


def test_results_tsv_has_a_row_per_team(batch):
    workflow, _, _, _ = batch
    rows = (workflow.session("s") / "results.tsv").read_text().splitlines()
    assert rows[0].split("\t") == [
        "cycle",
        "team",
        "status",
        "tests_pass",
        "description",
        "files_changed",
        "timestamp",
        "track",
        "tokens",
        "cost_usd",
    ]
    assert [r.split("\t")[1] for r in rows[1:]] == ["red", "green", "refactor"]


def test_one_committed_tree_is_tested_once_per_session(workflow, target):
    # No Refactor: Evaluate meets the very tree Green's last run tested.
    run_session(workflow, target, max_cycles=1, teams=["red", "green"])
    session = workflow.session("s")
    runs = [json.loads(line) for line in (session / "test-runs.jsonl").read_text().splitlines()]
    # No tree ran the same tests twice: the suite, or a few of its tests alone (a
    # bisection step, the batch gate's early run), filed under their `selection`.
    keys = [(r["tree"], r["selection"]) for r in runs]
    assert len(keys) == len(set(keys))
    trees = [r["tree"] for r in runs if not r["selection"]]
    decision = json.loads((session / "cycles/001/decision.json").read_text())
    end_tree = git(target, "rev-parse", f"{decision['end_commit']}^{{tree}}")
    assert end_tree in trees  # the tree the cycle ended on was measured...
    assert "was tested before" in (session / "logs/evaluate/001.log").read_text()  # ...once


def test_under_the_per_fix_gate_no_stage_tests_again_the_tree_the_gate_tested(per_fix):
    # Green's final run and evaluate meet trees the per-fix gate's runs already tested.
    workflow, target, _, _ = per_fix
    session = workflow.session("s")
    runs = [json.loads(line) for line in (session / "test-runs.jsonl").read_text().splitlines()]
    trees = [r["tree"] for r in runs]
    assert len(trees) == len(set(trees))
    decision = json.loads((session / "cycles/001/decision.json").read_text())
    assert git(target, "rev-parse", f"{decision['end_commit']}^{{tree}}") in trees
    assert "was tested before" in (session / "logs/green/001.log").read_text()
    assert "was tested before" in (session / "logs/evaluate/001.log").read_text()


def test_evaluate_rerun_tests_the_final_tree_again(workflow, target):
    run_session(workflow, target, max_cycles=1, teams=["red", "green"], evaluate={"rerun": True})
    session = workflow.session("s")
    assert "was tested before" not in (session / "logs/evaluate/001.log").read_text()

"""`test_gate: batch`: each change is committed at once, the suite runs once at the stage's
end, and a failure is bisected; what stays on the branch is what `per_fix` keeps."""

from __future__ import annotations

import json

from conftest import CALC, git, script_spec
from test_sweep import SCRIPT


def finding(n: int, title: str, location: str) -> dict:
    return {
        "tool": "report_finding",
        "args": {
            "severity": "high",
            "title": title,
            "location": location,
            "issue": f"problem {n}",
            "impact": "wrong results",
        },
    }


SUBTRACT = CALC.replace("a + b", "a - b")
NOTE = {"path": "calc.py", "old_str": "a - b", "new_str": "a - b  # note"}


def run(workflow, target, script: dict, **extra) -> dict:
    spec = script_spec(
        target, workflow.script(script), workflow.workdir / "t.jsonl", max_cycles=1, **extra
    )
    workflow.run("s", spec)
    return workflow.decision("s", 1)


def test_batch_keeps_what_per_fix_keeps_with_fewer_test_runs(workflow, target):
    decision = run(workflow, target, SCRIPT, test_gate="batch")
    worktree = workflow.session("s") / "worktree"
    subjects = git(worktree, "log", "--format=%s").splitlines()
    # The same branch as per_fix leaves (test_sweep): the fix that breaks test_add is gone.
    assert subjects[:3] == ["refactor: comment add", "fix: [F-001] guard empty mean", "initial"]
    assert "return a + b" in (worktree / "calc.py").read_text()
    assert [f["id"] for f in decision["fixed"]] == ["F-001"]
    patch = (workflow.session("s") / "cycles/001/green-patch.md").read_text()
    assert "[F-002] not kept: the stage's end test run, bisected, fails from this change on" in (
        patch
    )
    assert "tests/test_calc.py::test_add" in patch
    # The session's runs: Green's end (F-002's tree, failing), the bisection's one step
    # (F-001's tree) and Refactor's end. Green's final run and evaluate's are trees
    # tested already: not run again.
    runs = (workflow.session("s") / "test-runs.jsonl").read_text().splitlines()
    trees = [json.loads(line)["tree"] for line in runs]
    assert len(trees) == len(set(trees)) == 3
    log = (workflow.session("s") / "logs/green/001.log").read_text()
    assert "test gate: F-002 taken out" in log


def test_a_fix_built_on_one_taken_out_goes_too_and_an_independent_one_is_replayed(workflow, target):
    script = {
        "red": {
            1: [
                finding(1, "add is wrong", "calc.py:2"),
                finding(2, "add needs a note", "calc.py:2"),
                finding(3, "readme is short", "README.md:1"),
            ]
        },
        "green": {
            1: [
                # F-001 breaks test_add; F-002 edits the line F-001 wrote; F-003 is apart.
                {"tool": "write_file", "args": {"path": "calc.py", "content": SUBTRACT}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "subtract"}},
                {"tool": "edit_file", "args": NOTE},
                {"tool": "finish_fix", "args": {"finding_id": "F-002", "summary": "note"}},
                {"tool": "write_file", "args": {"path": "README.md", "content": "# calc\nAdds.\n"}},
                {"tool": "finish_fix", "args": {"finding_id": "F-003", "summary": "readme"}},
            ]
        },
    }  # fmt: skip
    decision = run(workflow, target, script, test_gate="batch", teams=["red", "green"])
    worktree = workflow.session("s") / "worktree"
    assert git(worktree, "log", "--format=%s").splitlines() == ["fix: [F-003] readme", "initial"]
    (kept,) = decision["fixed"]
    assert kept["id"] == "F-003" and kept["commit"] == git(worktree, "rev-parse", "HEAD")
    reasons = {s["id"]: s["reason"] for s in decision["skipped"]}
    assert "tests/test_calc.py::test_add" in reasons["F-001"]
    assert reasons["F-002"] == "not kept: it built on F-001, which was taken out"
    assert decision["tests_pass"] is True


def test_by_default_green_hears_its_change_is_committed_and_tested_at_the_end(workflow, target):
    run(workflow, target, SCRIPT, teams=["red", "green"])  # no test_gate: batch
    log = (workflow.session("s") / "logs/green/001.log").read_text()
    assert "the tests run once when the stage ends" in log


def test_an_unknown_gate_is_refused_naming_the_key(workflow, target):
    spec = script_spec(
        target, workflow.script(SCRIPT), workflow.workdir / "t.jsonl", test_gate="later"
    )
    proc = workflow.run("s", spec, check=False)
    assert proc.returncode != 0
    assert "test_gate" in proc.stderr
    assert not (workflow.session("s") / "setup.json").exists()

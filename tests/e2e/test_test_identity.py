"""The test gate judges test identity: a change that makes a passing test stop passing, by
any means (a config that deselects it, a removal), is not kept, and the cycle never reads as
a pass with fewer tests; `allow_test_removal: true` lets a removal through, named."""

from __future__ import annotations

import json

import pytest
from conftest import CALC, CALC_TESTS, SCREEN_OFF, git, script_spec

BROKEN_MEAN = CALC.replace("/ len", "/ 2 / len")
HIDE_MEAN = '[pytest]\naddopts = -k "not test_mean"\n'
EXTRA_TEST = "from calc import add\n\n\ndef test_add_zero():\n    assert add(0, 1) == 1\n"


def finding(title: str, n: int = 1) -> dict:
    return {
        "tool": "report_finding",
        "args": {
            "severity": "high",
            "title": title,
            "location": "calc.py:5",
            "issue": f"problem {n}",
            "impact": "wrong results",
        },
    }


def write(path: str, content: str) -> dict:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def finish(summary: str, finding_id: str = "F-001") -> dict:
    return {"tool": "finish_fix", "args": {"finding_id": finding_id, "summary": summary}}


def session(workflow, target, script: dict, **extra) -> None:
    spec = script_spec(
        target, workflow.script(script), workflow.workdir / "t.jsonl", teams=["red", "green"]
    )
    # The tamper screen would refuse a hidden test first: here the gate's ids alone.
    workflow.run("s", spec | {"max_cycles": 1} | SCREEN_OFF | extra)


@pytest.mark.parametrize("gate", ["batch", "per_fix"])
def test_a_fix_that_hides_the_test_it_breaks_is_not_kept_and_evaluate_does_not_pass_it(
    workflow, target, gate
):
    script = {
        "red": {1: [finding("mean is slow")]},
        "green": {1: [write("calc.py", BROKEN_MEAN), write("pytest.ini", HIDE_MEAN), finish("x")]},
    }
    session(workflow, target, script, test_gate=gate)

    decision = workflow.decision("s", 1)
    assert decision["fixed"] == []
    (skip,) = decision["skipped"]
    assert "tests/test_calc.py::test_mean" in skip["reason"]
    assert "allow_test_removal" in skip["reason"]
    worktree = workflow.session("s") / "worktree"
    assert git(worktree, "rev-list", "--count", "main..HEAD") == "0"
    assert not (worktree / "pytest.ini").exists()
    results = (workflow.session("s") / "cycles/001/eval-results.md").read_text()
    assert "- Test status: pass (2 passed)" in results  # the start's two tests, not one
    assert "1 passed" not in results
    assert decision["tests_removed"] == []


def test_a_test_a_kept_change_added_is_held_in_the_next_cycle(workflow, target):
    script = {
        "red": {1: [finding("add is untested")], 2: [finding("too many tests", 2)]},
        "green": {
            1: [write("tests/test_more.py", EXTRA_TEST), finish("test add")],
            2: [write("tests/test_more.py", "# gone\n"), finish("drop a test", "F-002")],
        },
    }
    session(workflow, target, script, max_cycles=2)

    first, second = workflow.decision("s", 1), workflow.decision("s", 2)
    assert [f["id"] for f in first["fixed"]] == ["F-001"]
    assert "tests/test_more.py::test_add_zero" in first["tests"]["passing_ids"]
    assert second["fixed"] == []
    assert "tests/test_more.py::test_add_zero" in second["skipped"][0]["reason"]
    worktree = workflow.session("s") / "worktree"
    assert "test_add_zero" in (worktree / "tests/test_more.py").read_text()


def test_allow_test_removal_keeps_a_removal_and_records_the_ids(workflow, target):
    without_mean = CALC_TESTS[: CALC_TESTS.index("\n\ndef test_mean")] + "\n"
    script = {
        "red": {1: [finding("test_mean is redundant")]},
        "green": {1: [write("tests/test_calc.py", without_mean), finish("drop test_mean")]},
    }
    session(workflow, target, script, allow_test_removal=True)

    decision = workflow.decision("s", 1)
    assert [f["id"] for f in decision["fixed"]] == ["F-001"]
    assert decision["tests_removed"] == ["tests/test_calc.py::test_mean"]
    green = json.loads((workflow.session("s") / "cycles/001/green.json").read_text())
    assert green["tests_removed"] == ["tests/test_calc.py::test_mean"]
    results = (workflow.session("s") / "cycles/001/eval-results.md").read_text()
    assert "removed, allowed by allow_test_removal" in results
    assert "tests/test_calc.py::test_mean" in results

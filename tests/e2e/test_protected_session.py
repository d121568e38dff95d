"""What gets committed and measured is what the rules allow, through Snakemake.

A change whose test run rewrites a protected file is rejected and the file restored; a
fix that needs a git-ignored file the commit lacks is not kept, because evaluate runs the
tests on the commit alone; a file left outside git never reaches the metric.
"""

from __future__ import annotations

import json

import pytest
from conftest import SCREEN_OFF, git, make_repo, script_spec

TESTS = "from src import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"
# The metric trusts a cache file when one is there: what a leftover could fool.
COUNT = "cat metric.cache 2>/dev/null || grep -c TODO src.py || true\n"
GOAL = {"metric": "todo count", "command": "sh count.sh", "target": "<= 1"}
REWRITES_BENCH = """\
import pathlib

pathlib.Path(__file__).with_name("count.sh").write_text("echo 0\\n")


def answer():
    return 42
"""


def src(todos: int) -> str:
    return "def answer():\n    return 42\n" + "".join(f"# TODO {i}\n" for i in range(todos))


@pytest.fixture
def todo_repo(tmp_path):
    files = {
        "src.py": src(3),
        "count.sh": COUNT,
        "tests/test_src.py": TESTS,
        ".gitignore": "*.cache\nbuild/\n",
    }
    return make_repo(tmp_path / "todo", files)


FINDING = [
    {
        "tool": "report_finding",
        "args": {
            "severity": "high",
            "title": "TODO markers",
            "location": "src.py:3",
            "issue": "Unfinished TODOs are left in the module.",
            "impact": "Raises the TODO count.",
        },
    }
]


def fix(*writes: tuple[str, str]) -> list[dict]:
    steps = [{"tool": "write_file", "args": {"path": p, "content": c}} for p, c in writes]
    return steps + [{"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "fixed"}}]


def narrow(workflow, repo, green: list[dict], **extra) -> dict:
    script = workflow.script({"red": {1: FINDING}, "green": {1: green}})
    spec = script_spec(repo, script, workflow.workdir / "t.jsonl", mode="narrow", **extra)
    spec |= {"goal": GOAL, "angles": [{"name": "todos", "hypothesis": "TODOs go."}]}
    return spec | {"max_cycles": 1}


def records(workflow, name: str) -> tuple[dict, dict]:
    cycle = workflow.session(name) / "cycles" / "001"
    return json.loads((cycle / "green.json").read_text()), workflow.decision(name, 1)


def test_a_change_whose_test_run_rewrites_a_protected_file_is_rejected(workflow, todo_repo):
    # The screen would refuse the change first (it names the evaluator): the guard alone here.
    workflow.run("p", narrow(workflow, todo_repo, fix(("src.py", REWRITES_BENCH))) | SCREEN_OFF)

    green, decision = records(workflow, "p")
    assert green["fixed"] == []
    # The batch gate commits the change, meets the rewrite when it tests the commit, and
    # takes the change out (per_fix's commit guard would have refused the commit).
    assert "protected file count.sh changed" in green["skipped"][0]["reason"]
    worktree = workflow.session("p") / "worktree"
    assert (worktree / "count.sh").read_text() == COUNT
    assert git(worktree, "rev-list", "--count", "main..HEAD") == "0"  # nothing committed
    assert decision["narrow"]["value"] == 3  # measured with the real script
    assert (
        "protected file count.sh changed"
        in (workflow.session("p") / "cycles/001/green-patch.md").read_text()
    )


def test_a_file_left_outside_git_does_not_reach_the_metric(workflow, todo_repo):
    spec = narrow(
        workflow,
        todo_repo,
        fix(("src.py", src(2)), ("metric.cache", "0\n")),
        allow_ignored_writes=True,
    )
    workflow.run("m", spec)

    green, decision = records(workflow, "m")
    assert [f["id"] for f in green["fixed"]] == ["F-001"]
    assert decision["narrow"]["value"] == 2  # src.py's count, not the leftover's 0
    assert not decision["stop"] or not decision["reason"].startswith("goal met")


def helper_fix_spec(workflow, repo, **extra) -> dict:
    """Green writes build/helpers.py (git-ignored) and a src.py that imports it."""
    uses_helper = "from build.helpers import forty_two\n\n\ndef answer():\n    return forty_two()\n"
    helper = "def forty_two():\n    return 42\n"
    script = workflow.script(
        {
            "red": {1: FINDING},
            "green": {1: fix(("build/helpers.py", helper), ("src.py", uses_helper))},
        }
    )
    return script_spec(
        repo, script, workflow.workdir / "t.jsonl", allow_ignored_writes=True, max_cycles=1, **extra
    )


def test_a_fix_that_imports_an_ignored_file_is_not_kept(workflow, todo_repo):
    # per_fix: its gate tests what would be committed, without the ignored file the
    # agent wrote (tested.py), so the fix is refused before it is ever committed.
    workflow.run("i", helper_fix_spec(workflow, todo_repo, test_gate="per_fix"))

    green, decision = records(workflow, "i")
    assert green["fixed"] == []
    assert green["tests_pass"]
    assert decision["fixed"] == [] and not decision["reverted"]
    assert decision["tests_pass"]
    worktree = workflow.session("i") / "worktree"
    assert (worktree / "src.py").read_text() == src(3)
    assert git(worktree, "rev-list", "--count", "main..HEAD") == "0"


def test_with_the_batch_gate_a_fix_that_needs_an_ignored_file_never_leaves_green(
    workflow, todo_repo
):
    workflow.run("b", helper_fix_spec(workflow, todo_repo))

    green, decision = records(workflow, "b")
    # The batch gate tests the commit alone, as evaluate does: the fix is taken out there.
    assert green["fixed"] == []
    assert green["skipped"][0]["reason"].startswith("not kept: the stage's end test run")
    assert decision["tests_pass"] and not decision["reverted"]
    worktree = workflow.session("b") / "worktree"
    assert git(worktree, "rev-list", "--count", "main..HEAD") == "0"

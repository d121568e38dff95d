"""The agent's own `run_tests` of a tree counts for the gate (tested.py): a session whose
Green runs the tests before each finish_fix runs no tree twice, keeps what passes, refuses
what fails, and runs again a tree the agent changed after its run. Each run of the suite,
whoever asked for it, is logged by a wrapper with the tree the worktree held."""

from __future__ import annotations

import json

from conftest import git, script_spec
from test_sweep import BROKEN_ADD, FIXED_MEAN
from test_test_gate import WRAPPER, finding

RUN_TESTS = {"tool": "run_tests", "args": {}}
README = "# calc\n\nAdds and averages.\n"


def session(workflow, target, tmp_path, green: list[dict], findings: int, gate: str):
    log = tmp_path / "runs.log"
    wrapper = tmp_path / "logged.sh"
    wrapper.write_text(WRAPPER.format(log=log))
    wrapper.chmod(0o755)
    script = {
        "red": {1: [finding(n, f"problem {n}", "calc.py:1") for n in range(1, findings + 1)]},
        "green": {1: green},
    }
    spec = script_spec(
        target,
        workflow.script(script),
        workflow.workdir / "t.jsonl",
        test_command=f"{wrapper} python -m pytest -q",
        commands={"sandbox": "none"},  # the wrapper logs outside the worktree
        max_cycles=1,
        teams=["red", "green"],
        test_gate=gate,
    )
    workflow.run("s", spec)
    runs = [line.split()[0] for line in log.read_text().splitlines()]
    return workflow.decision("s", 1), runs[1:]  # setup's baseline run first


def filed(workflow) -> list[dict]:
    path = workflow.session("s") / "test-runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def fix(n: int, content: str, *between: dict, path: str = "calc.py") -> list[dict]:
    return [
        {"tool": "write_file", "args": {"path": path, "content": content}},
        RUN_TESTS,
        *between,
        {"tool": "finish_fix", "args": {"finding_id": f"F-{n:03d}", "summary": f"fix {n}"}},
    ]


def test_per_fix_the_gate_reuses_the_agents_runs_and_runs_an_edited_tree_again(
    workflow, target, tmp_path
):
    sums = {"path": "README.md", "old_str": "Adds", "new_str": "Sums"}
    edit = {"tool": "edit_file", "args": sums}
    green = (
        fix(1, FIXED_MEAN)
        + fix(2, BROKEN_ADD)
        + fix(3, README, edit, path="README.md")  # edited after its run
    )
    decision, runs = session(workflow, target, tmp_path, green, 3, "per_fix")
    assert [f["id"] for f in decision["fixed"]] == ["F-001", "F-003"]
    assert "tests/test_calc.py::test_add" in decision["skipped"][0]["reason"]
    worktree = workflow.session("s") / "worktree"
    kept = git(worktree, "rev-parse", f"{decision['fixed'][0]['commit']}^{{tree}}")
    end = git(worktree, "rev-parse", "HEAD^{tree}")
    # The agent's three runs; the gate ran only F-003's tree as the agent left it.
    assert len(runs) == 4 and runs[0] == kept and runs[3] == end
    assert runs.count(kept) == 1 and runs.count(end) == 1
    assert [e.get("by") for e in filed(workflow)] == ["agent", "agent", "agent", None]


def test_batch_settles_on_the_agents_runs_without_running_a_tree_again(workflow, target, tmp_path):
    green = fix(1, FIXED_MEAN) + fix(2, BROKEN_ADD)
    decision, runs = session(workflow, target, tmp_path, green, 2, "batch")
    assert [f["id"] for f in decision["fixed"]] == ["F-001"]
    assert "tests/test_calc.py::test_add" in decision["skipped"][0]["reason"]
    worktree = workflow.session("s") / "worktree"
    kept = git(worktree, "rev-parse", "HEAD^{tree}")
    # Only the agent's two runs: the end that fails, its bisection and the new end are
    # trees the agent had tested.
    assert len(runs) == len(set(runs)) == 2 and runs[0] == kept
    assert all(e.get("by") == "agent" for e in filed(workflow))

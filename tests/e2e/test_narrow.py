"""Narrow mode through Snakemake: goal gate, baseline, per-cycle measurement, reverts, angles.

The target's metric is the number of TODO lines in src.py (`sh count.sh`), which the
scripted Green team raises or lowers at will.
"""

from __future__ import annotations

import json

import pytest
from conftest import Workflow, git, make_repo, script_spec

from autoresearch.safety import git as ar_git


def src(todos: int) -> str:
    return "def answer():\n    return 42\n" + "".join(f"# TODO {i}\n" for i in range(todos))


GOOD_GOAL = {"metric": "todo count", "command": "sh count.sh", "target": "<= 1"}
ONE_ANGLE = [{"name": "todos", "hypothesis": "TODOs can be resolved."}]
TESTS = "from src import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"
COUNT = "grep -c TODO src.py || true\n"


def todo_repo_at(path):
    files = {"src.py": src(3), "count.sh": COUNT, "tests/test_src.py": TESTS, "README.md": "# t\n"}
    return make_repo(path, files)


@pytest.fixture
def todo_repo(tmp_path):
    return todo_repo_at(tmp_path / "todo")


def finding(n: int) -> list[dict]:
    return [
        {
            "tool": "report_finding",
            "args": {
                "severity": "high",
                "title": f"TODO marker {n}",
                "location": "src.py:3",
                "issue": "An unfinished TODO is left in the module.",
                "impact": "Raises the TODO count.",
            },
        }
    ]


def write_src(todos: int, fid: str) -> list[dict]:
    return [
        {"tool": "write_file", "args": {"path": "src.py", "content": src(todos)}},
        {"tool": "finish_fix", "args": {"finding_id": fid, "summary": f"now {todos} TODOs"}},
    ]


def skip(fid: str) -> list[dict]:
    return [{"tool": "skip_finding", "args": {"finding_id": fid, "reason": "not for now"}}]


def narrow_spec(workflow, target, script: dict, goal=None, angles=None, **extra) -> dict:
    transcript = workflow.workdir / "transcript.jsonl"
    spec = script_spec(target, workflow.script(script), transcript, mode="narrow", **extra)
    spec["goal"] = goal if goal is not None else GOOD_GOAL
    spec["angles"] = (
        angles
        if angles is not None
        else [{"name": "todos", "hypothesis": "TODOs can be resolved."}]
    )
    return spec


def read(workflow, name: str, file: str) -> str:
    return (workflow.session(name) / file).read_text()


# --- the goal is met ---------------------------------------------------------------------


# High: sanitize would pass it on; only the angle holds it back.
OFF_ANGLE = {
    "tool": "report_finding",
    "args": {
        "severity": "high",
        "title": "answer lacks a docstring",
        "location": "src.py:1",
        "issue": "answer() has no docstring.",
        "impact": "Readers guess its purpose.",
    },
}


@pytest.fixture(scope="module")
def goal_met(tmp_path_factory):
    """A session that meets its goal in cycle 2, read by the tests of either behaviour: the
    goal gate, and a finding off the angle (cycle 2's second) that waits in ideas.md. The
    workflow, the target and the target's state before the session."""
    base = tmp_path_factory.mktemp("narrow")
    workflow = Workflow(base / "work")
    todo_repo = todo_repo_at(base / "todo")
    before = ar_git.snapshot(todo_repo)
    script = {
        "red": {n: finding(n) + ([OFF_ANGLE] if n == 2 else []) for n in range(1, 7)},
        "green": {
            1: [
                # Protected: the measurement script and the tests (narrow default).
                {"tool": "write_file", "args": {"path": "count.sh", "content": "echo 0\n"}},
                {"tool": "write_file", "args": {"path": "tests/test_src.py", "content": "x\n"}},
                *write_src(2, "F-001"),
            ],
            2: write_src(1, "F-002"),
        },
    }
    # The angle's scope, not the finding's severity, decides what is off it.
    angle = {"name": "todos", "hypothesis": "TODOs can be resolved.", "match": ["^TODO"]}
    workflow.run("n", narrow_spec(workflow, todo_repo, script, angles=[angle]))
    return workflow, todo_repo, before


def test_goal_met_stops_session_with_progress_plot_and_protection(goal_met):
    workflow, todo_repo, before = goal_met
    assert ar_git.snapshot(todo_repo) == before  # the user's checkout is untouched
    worktree = workflow.session("n") / "worktree"
    assert git(worktree, "rev-parse", "--abbrev-ref", "HEAD") == "autoresearch/narrow/n"
    assert (worktree / "count.sh").read_text() == COUNT
    assert (worktree / "tests/test_src.py").read_text() == TESTS

    baseline = json.loads(read(workflow, "n", "baseline.json"))
    assert baseline["value"] == 3 and baseline["samples"] == [3]
    assert "./count.sh" in baseline["protected"] and "tests" in baseline["protected"]

    last = workflow.decision("n", 2)
    assert last["stop"] and last["reason"].startswith("goal met: todo count is 1")
    assert last["narrow"]["met"] and last["narrow"]["value"] == 1
    assert not (workflow.session("n") / "cycles/003").exists()

    progress = read(workflow, "n", "goal-progress.md")
    assert "| 1 | 2 | -1 | -1 | todos | 2 | kept (1 fixes) |" in progress
    assert "| 2 | 1 | -2 | -1 | todos | 1 | goal met |" in progress
    assert "- Final value: 1" in progress and "fix: [F-002] now 1 TODOs" in progress

    summary = read(workflow, "n", "session.md")
    assert "- Baseline value: 3" in summary and "- Current value: 1 (Δ baseline -2)" in summary
    assert "| 1 | todos | TODOs can be resolved. | goal-met |" in summary
    assert (workflow.session("n") / "goal-progress.png").read_bytes()[:4] == b"\x89PNG"
    assert "goal met" in read(workflow, "n", "done")

    briefs = workflow.transcript(workflow.workdir / "transcript.jsonl")
    reds = [b for b in briefs if b["team"] == "red"]
    assert [b["data"]["angle"]["current"] for b in reds] == ["3", "2"]
    assert "scoped to one angle only: todos" in reds[0]["task"]
    green_text = json.dumps([b for b in briefs if b["team"] == "green"])
    assert "TODOs can be resolved" not in green_text  # the clean room holds in narrow mode
    refused = read(workflow, "n", "logs/green/001.log")
    assert refused.count("ERROR") >= 2 and "protected" in refused

    # A plain rerun has nothing left to do.
    proc = workflow.run("n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


# --- regressions, exhaustion, the next angle, all exhausted ------------------------------------


def test_regressions_revert_and_angles_exhaust_in_priority_order(workflow, todo_repo):
    script = {
        "red": {n: finding(n) for n in range(1, 7)},
        "green": {
            1: write_src(5, "F-001"),
            2: write_src(4, "F-002"),
            3: write_src(6, "F-003"),
            4: write_src(2, "F-004"),
            5: skip("F-005"),
            6: skip("F-006"),
        },
    }
    angles = [
        {"name": "later", "hypothesis": "Second angle.", "priority": 2},
        {"name": "first", "hypothesis": "First angle.", "priority": 1},
    ]
    goal = {"metric": "todo count", "command": "sh count.sh", "target": "<= 0"}
    workflow.run("r", narrow_spec(workflow, todo_repo, script, goal=goal, angles=angles))

    worktree = workflow.session("r") / "worktree"
    d = [workflow.decision("r", n) for n in range(1, 7)]
    assert [x["narrow"]["angle"] for x in d] == ["first"] * 3 + ["later"] * 3
    # Cycles 1-3: worse than the baseline, reverted, the counter rising to exhaustion.
    for n, x in enumerate(d[:3], start=1):
        assert x["narrow"]["regressed"] and x["narrow"]["reverted"]
        assert x["narrow"]["regressions"] == n and x["narrow"]["current"] == 3
        assert x["fixed"] == [] and x["skipped"][-1]["reason"].startswith("reverted:")
        assert x["end_commit"] != x["start_commit"]  # a revert commit, not a rewrite
        assert not x["stop"]
    assert d[0]["reverted"][0]["how"] == "revert"
    assert d[2]["narrow"]["exhausted_now"] == "3 consecutive regressions"
    assert d[2]["narrow"]["next_angle"] == "later"
    assert "src.py" not in d[0]["files_changed"]
    # Cycle 4: the next angle keeps an improvement; 5 and 6 keep nothing: exhausted.
    assert d[3]["narrow"]["value"] == 2 and not d[3]["narrow"]["regressed"]
    assert [x["narrow"]["idle"] for x in d[3:]] == [0, 1, 2]
    assert d[5]["stop"] and d[5]["reason"].startswith("all angles exhausted")
    assert src(2) == (worktree / "src.py").read_text()

    subjects = git(worktree, "log", "--format=%s").splitlines()
    assert sum(s.startswith('Revert "fix: [F-00') for s in subjects) == 3

    briefs = workflow.transcript(workflow.workdir / "transcript.jsonl")
    reds = [b["data"]["angle"] for b in briefs if b["team"] == "red"]
    assert [a["name"] for a in reds] == ["first"] * 3 + ["later"] * 3
    assert [a["current"] for a in reds] == ["3", "3", "3", "3", "2", "2"]

    progress = read(workflow, "r", "goal-progress.md")
    assert "| 1 | 5 | +2 | +2 | first | 5 | regression 1, reverted |" in progress
    assert "angle exhausted (3 consecutive regressions)" in progress
    assert "| 4 | 2 | -1 | -1 | later | 2 | kept (1 fixes) |" in progress
    summary = read(workflow, "r", "session.md")
    assert "| 1 | first | First angle. | exhausted |" in summary
    assert "| 2 | later | Second angle. | exhausted |" in summary
    rows = [r.split("\t") for r in read(workflow, "r", "results.tsv").splitlines()[1:]]
    assert [r[2] for r in rows if r[1] == "green"][:4] == ["reverted"] * 3 + ["ok"]
    assert (workflow.session("r") / "goal-progress.png").exists()


# --- the goal gate -------------------------------------------------------------------------


# A bad goal or angle is refused before anything runs: tests/unit/test_mode_spec_refusals.py.


def test_failing_baseline_measurement_is_a_clear_error(workflow, todo_repo):
    goal = {"metric": "m", "command": "echo boom >&2; exit 3", "target": "<= 1"}
    proc = workflow.run("m", narrow_spec(workflow, todo_repo, {}, goal=goal), check=False)
    assert proc.returncode != 0
    assert "key 'goal.command': the baseline measurement failed" in proc.stderr
    assert "exit code 3" in proc.stderr and "boom" in proc.stderr
    assert not (workflow.session("m") / "session.yaml").exists()
    assert not (workflow.session("m") / "cycles/001").exists()


def test_off_angle_findings_wait_in_ideas_and_never_reach_green(goal_met):
    workflow, _, _ = goal_met
    assert "answer lacks a docstring" in read(workflow, "n", "ideas.md")
    assert "TODO marker 2" in read(workflow, "n", "cycles/002/sanitized.md")
    assert "docstring" not in read(workflow, "n", "cycles/002/sanitized.md")
    green = [
        b
        for b in workflow.transcript(workflow.workdir / "transcript.jsonl")
        if b["team"] == "green"
    ]
    assert len(green) == 2 and all("docstring" not in json.dumps(b) for b in green)

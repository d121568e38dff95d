"""A narrow session whose measurement script is found only by watching it run.

`cd bench && ./p99.sh` names no file a text parser could find; setup traces the run,
protects bench/p99.sh, and `status` lists it. Green rewriting it to `echo 1` is refused,
and a change whose code rewrites it at test time is rejected: the goal is never "met".
"""

from __future__ import annotations

import stat
import subprocess
import sys

import pytest
from conftest import git, script_spec

from autoresearch.safety import trace

pytestmark = pytest.mark.skipif(trace.strace() is None, reason="strace is not installed")

P99 = "#!/bin/sh\ngrep -c TODO ../src.py || true\n"
GOAL = {"metric": "p99 ms", "command": "cd bench && ./p99.sh", "target": "<= 1"}
TESTS = "from src import answer\n\n\ndef test_answer():\n    assert answer() == 42\n"
SRC = "def answer():\n    return 42\n# TODO 1\n# TODO 2\n# TODO 3\n"
# Code under test that rewrites the benchmark when the tests import it.
REWRITES_BENCH = """\
import pathlib

pathlib.Path(__file__).with_name("bench").joinpath("p99.sh").write_text("echo 1\\n")


def answer():
    return 42
"""
FINDING = {
    "tool": "report_finding",
    "args": {
        "severity": "high",
        "title": "slow p99",
        "location": "src.py:3",
        "issue": "The p99 latency is high.",
        "impact": "Users wait.",
    },
}


@pytest.fixture
def bench_repo(tmp_path):
    repo = tmp_path / "svc"
    files = {"src.py": SRC, "bench/p99.sh": P99, "tests/test_src.py": TESTS}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    script = repo / "bench/p99.sh"
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def narrow(workflow, repo, green: list[dict]) -> dict:
    script = workflow.script({"red": {1: [FINDING]}, "green": {1: green}})
    spec = script_spec(repo, script, workflow.workdir / "t.jsonl", mode="narrow")
    return spec | {
        "goal": GOAL,
        "angles": [{"name": "latency", "hypothesis": "It can be faster."}],
        "max_cycles": 1,
    }


def finish(*writes: tuple[str, str]) -> list[dict]:
    steps = [{"tool": "write_file", "args": {"path": p, "content": c}} for p, c in writes]
    return steps + [{"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "faster"}}]


def test_green_rewriting_the_traced_script_is_refused_and_the_goal_is_not_met(workflow, bench_repo):
    workflow.run("m", narrow(workflow, bench_repo, finish(("bench/p99.sh", "echo 1\n"))))

    worktree = workflow.session("m") / "worktree"
    assert (worktree / "bench/p99.sh").read_text() == P99
    decision = workflow.decision("m", 1)
    assert decision["narrow"]["value"] == 3 and not decision["narrow"]["met"]
    assert "goal met" not in (decision.get("reason") or "")
    log = (workflow.session("m") / "logs/green/001.log").read_text()
    assert "bench/p99.sh" in log and "protected" in log

    shown = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "status", "m"],
        cwd=workflow.workdir,
        env=workflow.env(),
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    line = next(ln for ln in shown.splitlines() if "bench/p99.sh" in ln)
    assert "traced exec" in line and "goal.command" in line


def test_a_change_whose_code_rewrites_the_traced_script_is_rejected(workflow, bench_repo):
    workflow.run("r", narrow(workflow, bench_repo, finish(("src.py", REWRITES_BENCH))))

    worktree = workflow.session("r") / "worktree"
    assert (worktree / "bench/p99.sh").read_text() == P99
    decision = workflow.decision("r", 1)
    assert decision["fixed"] == [] and decision["narrow"]["value"] == 3
    assert not decision["narrow"]["met"]
    assert git(worktree, "rev-list", "--count", "main..HEAD") == "0"

"""Discarded experiments keep their diff, and one that a later kept change may have made
worth retrying is offered to the agent and allowed once."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import git
from test_experiment import change, finish, jsonl, make_target, spec_for

SCRIPT = {
    "experiment": {
        1: change(1200, "Cache the intermediate sums"),  # worse: discarded
        2: change(800, "Halve the inner loop"),  # kept, touches fast.py like #1
        3: change(700, "Cache the intermediate sums"),  # the one retry of #1: allowed
        # A second retry of #1 is refused; then a new idea.
        4: [finish("cache the intermediate sums!"), *change(650, "Hoist the constant")],
    }
}


def test_a_discard_is_offered_for_retry_once_after_a_kept_change_touches_its_files(
    workflow, tmp_path
):
    target = make_target(tmp_path / "target")
    transcript = tmp_path / "briefs.jsonl"
    spec = spec_for(target, workflow, SCRIPT, transcript, program="program.md", max_iterations=4)
    workflow.run("r", spec)
    session = workflow.session("r")
    briefs = [b for b in workflow.transcript(transcript) if b["team"] == "experiment"]
    assert "May be worth retrying now" not in briefs[1]["task"]
    assert [r["id"] for r in briefs[2]["data"]["retry"]] == ["#1"]
    assert (
        "may be worth retrying now: it was rejected when the best was ops = 1000 "
        '(1200 is not better than 1000); since then #2 ("Halve the inner loop") changed '
        "fast.py" in briefs[2]["task"]
    )
    assert briefs[3]["data"]["retry"] == []

    third = json.loads((session / "iterations/003/proposal.json").read_text())
    assert third["retry_of"] == 1 and third["refused_duplicates"] == []
    fourth = json.loads((session / "iterations/004/proposal.json").read_text())
    assert fourth["refused_duplicates"] == [
        {"hypothesis": "cache the intermediate sums!", "matches": 1}
    ]
    entries = jsonl(session)
    assert [e["status"] for e in entries] == ["baseline", "discarded", "kept", "kept", "kept"]
    assert entries[3]["retry_of"] == 1 and "retry_of" not in entries[2]
    assert (
        "Cache the intermediate sums (steps() returns 700) [retry of #1]"
        in (session / "decision-log.md").read_text()
    )
    assert git(session / "worktree", "log", "-1", "--format=%s", "HEAD~1").startswith(
        "autoresearch: exp 3 -- ops=700 (was 800)"
    )


def test_show_prints_a_discarded_experiments_diff_and_verdict(workflow, tmp_path):
    target = make_target(tmp_path / "target")
    script = {"experiment": {1: SCRIPT["experiment"][1]}}
    spec = spec_for(target, workflow, script, program="program.md", max_iterations=1)
    workflow.run("s", spec)

    def show(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "autoresearch.cli", "show", "s", *args],
            cwd=workflow.workdir,
            env=workflow.env(),  # this checkout's package
            capture_output=True,
            text=True,
        )

    out = show("1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Experiment #1 of session s\n")
    assert "- Hypothesis: Cache the intermediate sums" in out.stdout
    assert "- ops: 1000 → 1200" in out.stdout and "- Status: discarded" in out.stdout
    assert "- Why: 1200 is not better than 1000" in out.stdout
    assert "diff (iterations/001/proposal.patch):" in out.stdout
    assert "-    return 1000\n+    return 1200" in out.stdout
    assert "ops: 1000" in show("0").stdout
    missing = show("7")
    assert missing.returncode == 1
    assert "session 's' has no iteration 7 (iterations 1 to 1)" in missing.stderr

"""The ship lens through Snakemake: gates, the score, and shipping only after approval."""

from __future__ import annotations

import json

import pytest
from conftest import CALC, CALC_TESTS, Workflow, git, make_repo

SECRET = 'API_KEY = "sk_live_' + "4eC39HqLyjWDarjtT1zdp7dc" + '"\n'
SAFE = 'import os\n\nAPI_KEY = os.environ.get("API_KEY", "")\n'


def feature_repo(tmp_path, extra):
    """main at the first commit; the checked-out branch `feature` adds `extra`."""
    repo = make_repo(tmp_path / "target", {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS})
    git(repo, "checkout", "-q", "-b", "feature")
    for name, text in extra.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "feature")
    return repo


def ship_spec(repo, workflow, script=None, **ship):
    return {
        "mode": "ship",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        "ship": {"type": "pr", "base": "main", "drop": ["lint"], **ship},
        "agent": {
            "backend": "script",
            "script": str(workflow.script(script or {})),
            "transcript": str(workflow.workdir / "t.jsonl"),
        },
    }


def fix(gate, path, content):
    return [
        {"tool": "write_file", "args": {"path": path, "content": content}},
        {"tool": "finish_fix", "args": {"finding_id": gate, "summary": f"pass {gate}"}},
    ]


def test_prepare_fixes_one_failing_gate_at_a_time_until_all_pass(workflow, tmp_path):
    todo = CALC + "\n\n# TODO handle empty input\n"
    repo = feature_repo(tmp_path, {"config.py": SECRET, "calc.py": todo})
    script = {"ship": {1: fix("secrets", "config.py", SAFE), 2: fix("todo", "calc.py", CALC)}}
    workflow.run("s", ship_spec(repo, workflow, script))
    session = workflow.session("s")
    setup = json.loads((session / "lens-setup.json").read_text())
    baseline = {r["name"]: r for r in setup["baseline"]}
    assert baseline["secrets"]["status"] == "fail"  # the planted secret fails its gate
    assert "config.py:1" in baseline["secrets"]["detail"]
    assert "sk_live" not in (session / "lens-setup.json").read_text()
    assert baseline["todo"]["status"] == "fail" and baseline["tests"]["status"] == "pass"
    decisions = [json.loads((session / f"ship/00{n}/decision.json").read_text()) for n in (1, 2)]
    assert [(d["gate"], d["status"]) for d in decisions] == [("secrets", "kept"), ("todo", "kept")]
    assert [d["score"] for d in decisions] == [0.75, 1.0]
    assert decisions[1]["reason"] == "every gate passes"
    done = (session / "done").read_text()
    assert "score: 4/4 gates pass" in done and "gate: PASSED" in done
    assert "    git push origin autoresearch/ship/s" in done
    checklist = (session / "ship-checklist.md").read_text()
    assert "- [x] **secrets** (pass)" in checklist
    rows = (session / "ship-log.tsv").read_text().splitlines()
    assert len(rows) == 3 and "\tsecrets\t1\t" in rows[1]


@pytest.fixture(scope="module")
def breaking(tmp_path_factory):
    """A session without `approve: manual` whose agent breaks a passing gate, run to done
    once: read by the test of its decision and by the refusal of its shipping step (its
    shipping commands touch a spy file, for real: `dry_run: false`)."""
    base = tmp_path_factory.mktemp("ship")
    workflow = Workflow(base / "work")
    repo = feature_repo(base, {"calc.py": CALC + "\n# TODO x\n"})
    broken = CALC.replace("return a + b", "return a - b")
    script = {"ship": {"*": fix("todo", "calc.py", broken)}}
    spy = base / "spy"
    spec = ship_spec(repo, workflow, script, commands=[f"touch {spy}"], dry_run=False)
    workflow.run("b", spec)
    return workflow, spy


def test_a_change_that_breaks_a_passing_gate_is_not_kept(breaking):
    workflow, _ = breaking
    first = json.loads((workflow.session("b") / "ship/001/decision.json").read_text())
    assert first["status"] == "reverted" and first["broke"] == ["tests"]


def test_a_change_the_gates_run_rewrote_after_the_agent_wrote_it_is_not_kept(workflow, tmp_path):
    """The tests gate runs the agent's code; a test that rewrites calc.py would get its own
    text committed under the agent's name if the commit took the worktree as the gates left it."""
    rewrite = (
        "from pathlib import Path\n\n\ndef test_rewrites():\n"
        "    p = Path('calc.py')\n    p.write_text(p.read_text() + '# touched\\n')\n"
    )
    repo = feature_repo(tmp_path, {"calc.py": CALC + "\n# TODO x\n", "tests/test_w.py": rewrite})
    script = {"ship": {1: fix("todo", "calc.py", CALC)}}
    workflow.run("w", ship_spec(repo, workflow, script))
    first = json.loads((workflow.session("w") / "ship/001/decision.json").read_text())
    assert first["status"] == "reverted"
    assert first["rejected"].startswith("calc.py changed by a command after the agent wrote it")
    assert first["end_commit"] == first["start_commit"]


def spy_spec(repo, workflow, spy, **extra):
    spec = ship_spec(repo, workflow, commands=[f"touch {spy}"], **extra)
    spec["approve"] = "manual"
    return spec


def test_ship_commands_never_run_without_approval(workflow, tmp_path):
    repo = feature_repo(tmp_path, {"notes.txt": "fine\n"})
    spy = tmp_path / "shipped-for-real"
    workflow.run("a", spy_spec(repo, workflow, spy, dry_run=False))
    assert f"    touch {spy}" in (workflow.session("a") / "done").read_text()
    assert not spy.exists()  # done lists the commands and runs none
    refused = workflow.run("a", None, target="sessions/a/shipped", check=False)
    assert refused.returncode != 0 and not spy.exists()  # no approval file
    (workflow.session("a") / "approved").touch()
    workflow.run("a", None, target="sessions/a/shipped")
    assert spy.exists()


def test_approved_shipping_is_a_dry_run_by_default(workflow, tmp_path):
    repo = feature_repo(tmp_path, {"notes.txt": "fine\n"})
    spy = tmp_path / "spy"
    workflow.run("d", spy_spec(repo, workflow, spy))
    (workflow.session("d") / "approved").touch()
    workflow.run("d", None, target="sessions/d/shipped")
    assert not spy.exists()
    assert f"would run: touch {spy}" in (workflow.session("d") / "shipped").read_text()


def test_without_approve_manual_the_shipping_step_is_refused(breaking):
    workflow, spy = breaking
    approval = workflow.session("b") / "approved"
    approval.touch()
    try:
        proc = workflow.run("b", None, target="sessions/b/shipped", check=False)
    finally:
        approval.unlink()  # the session as the fixture left it, for the other test
    assert proc.returncode != 0 and "only with approve: manual" in proc.stderr
    assert not spy.exists() and not (workflow.session("b") / "shipped").exists()


def test_ship_runs_without_a_key_and_leaves_each_failing_gate_to_a_person(workflow, tmp_path):
    todo = CALC + "\n\n# TODO handle empty input\n"
    repo = feature_repo(tmp_path, {"config.py": SECRET, "calc.py": todo})
    spec = {**ship_spec(repo, workflow), "agent": {"backend": "ruff"}}
    workflow.run("s", spec)
    session = workflow.session("s")
    decisions = sorted(session.glob("ship/*/decision.json"))
    # One try per failing gate: the ruff backend would skip it again from the same commit.
    assert [json.loads(p.read_text())["status"] for p in decisions] == ["skipped", "skipped"]
    done = (session / "done").read_text()
    assert "score: 2/4 gates pass" in done and "gate: FAILED" in done
    assert "every failing gate is blocked or needs a person" in done
    assert "    git push origin autoresearch/ship/s" in done  # written, not run
    assert git(session / "worktree", "log", "--format=%s", "-1") == "feature"

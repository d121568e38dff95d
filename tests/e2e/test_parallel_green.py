"""Parallel Green (`agent.parallel_green: k`) through Snakemake with the script backend:
groups of findings naming no file in common, each worked on by a lane job in its own
worktree from the stage's start commit, applied back in finding order (docs/cost.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import Workflow, git, make_repo, script_spec, wait_for

MODULES = {name: f"def {name}():\n    return {i}\n" for i, name in enumerate("abc", 1)}
TESTS = "".join(
    f"from {name} import {name}\n\n\ndef test_{name}():\n    assert {name}() == {i}\n\n\n"
    for i, name in enumerate("abc", 1)
)


def fixed(name: str, note: str = "fixed") -> str:
    return MODULES[name].replace("    return", f"    # {note}\n    return")


def report(fid_title: str, where: str, issue: str = "It is wrong.") -> dict:
    return {
        "tool": "report_finding",
        "args": {
            "severity": "high",
            "title": fid_title,
            "location": where,
            "issue": issue,
            "impact": "Wrong results.",
        },
    }


def write(path: str, content: str) -> dict:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def finish(fid: str, summary: str) -> dict:
    return {"tool": "finish_fix", "args": {"finding_id": fid, "summary": summary}}


# F-001 and F-003 name a.py (one group), F-002 b.py, F-004 c.py.
RED = [
    report("a is off by one", "a.py:2"),
    report("b is off by one", "b.py:2"),
    report("a has no docstring", "a.py:1"),
    report("c is off by one", "c.py:2"),
]
GREEN = {
    "F-001/1": [
        write("a.py", fixed("a")),
        finish("F-001", "fix a"),
        write("a.py", '"""a."""\n' + fixed("a")),
        finish("F-003", "document a"),
    ],
    "F-002/1": [write("b.py", fixed("b")), finish("F-002", "fix b")],
    "F-004/1": [write("c.py", fixed("c")), finish("F-004", "fix c")],
}


def target_repo(tmp_path):
    return make_repo(
        tmp_path / "abc", {**{f"{n}.py": t for n, t in MODULES.items()}, "test_abc.py": TESTS}
    )


def run(workflow, tmp_path, green, k=3, **extra):
    target = target_repo(tmp_path)
    script = workflow.script({"red": {1: RED}, "green": green})
    transcript = workflow.workdir / "transcript.jsonl"
    spec = script_spec(target, script, transcript, max_cycles=1, teams=["red", "green"], **extra)
    spec["agent"]["parallel_green"] = k
    workflow.run("p", spec, cores=3)
    session = workflow.session("p")
    return session, json.loads((session / "cycles/001/green.json").read_text()), transcript


def fix_subjects(worktree) -> list[str]:
    return [s for s in git(worktree, "log", "--reverse", "--format=%s").splitlines() if "fix:" in s]


@pytest.fixture(scope="module")
def three_lanes(tmp_path_factory):
    """One session of GREEN on three lanes: (session, green.json, transcript), read below."""
    base = tmp_path_factory.mktemp("lanes")
    return run(Workflow(base / "work"), base, GREEN)


def test_groups_are_worked_on_from_the_start_commit_and_applied_in_finding_order(three_lanes):
    session, record, _ = three_lanes
    worktree = session / "worktree"
    assert fix_subjects(worktree) == [
        "fix: [F-001] fix a",
        "fix: [F-003] document a",
        "fix: [F-002] fix b",
        "fix: [F-004] fix c",
    ]
    assert [(g["lane"], g["findings"], g["status"]) for g in record["groups"]] == [
        ("g1", ["F-001", "F-003"], "applied"),
        ("g2", ["F-002"], "applied"),
        ("g3", ["F-004"], "applied"),
    ]
    start = record["start_commit"]
    for group in record["groups"]:
        # Each group's first commit was made on the stage's start commit, in a lane's
        # worktree (replayed onto the branch, it may get the same sha when nothing before
        # it was: same parent, tree, message and second).
        assert git(worktree, "rev-parse", group["commits"][0] + "^").strip() == start
        own = session / "tracks" / f"green-{group['lane']}" / "worktree"
        assert git(own, "rev-parse", "HEAD").strip() == group["commits"][-1]
    assert (worktree / "a.py").read_text() == '"""a."""\n' + fixed("a")
    assert (worktree / "b.py").read_text() == fixed("b")
    assert (worktree / "c.py").read_text() == fixed("c")
    assert [r["id"] for r in record["fixed"]] == ["F-001", "F-003", "F-002", "F-004"]
    assert record["skipped"] == [] and record["tests_pass"]
    assert sorted(p.name for p in (session / "cycles/001/green-lanes").iterdir()) == [
        "g1.json",
        "g2.json",
        "g3.json",
    ]
    assert "- g2: F-002: applied" in (session / "cycles/001/green-patch.md").read_text()


def test_a_group_that_changes_an_earlier_groups_file_is_skipped_with_the_reason(workflow, tmp_path):
    green = {
        **GREEN,
        # F-002 names b.py, but its agent also rewrites a.py, which F-001's group changed.
        "F-002/1": [
            write("b.py", fixed("b")),
            write("a.py", fixed("a", "b's idea")),
            finish("F-002", "fix b and a"),
        ],
    }
    session, record, _ = run(workflow, tmp_path, green)
    worktree = session / "worktree"
    assert fix_subjects(worktree) == [
        "fix: [F-001] fix a",
        "fix: [F-003] document a",
        "fix: [F-004] fix c",
    ]
    assert (worktree / "a.py").read_text() == '"""a."""\n' + fixed("a")
    assert (worktree / "b.py").read_text() == MODULES["b"]
    skipped = {g["findings"][0]: g for g in record["groups"] if g["status"] == "skipped"}
    assert list(skipped) == ["F-002"]
    assert skipped["F-002"]["reason"] == "it changes a.py, which the group of F-001 changed"
    assert [(r["id"], r["reason"]) for r in record["skipped"]] == [
        (
            "F-002",
            "not kept: its group's commits were not applied: "
            "it changes a.py, which the group of F-001 changed",
        )
    ]
    assert [r["id"] for r in record["fixed"]] == ["F-001", "F-003", "F-004"]


def test_each_groups_agent_is_told_only_its_own_findings(three_lanes):
    _, _, transcript = three_lanes
    briefs = [json.loads(line) for line in transcript.read_text().splitlines()]
    told = sorted(
        sorted(fid for fid in ("F-001", "F-002", "F-003", "F-004") if f"[{fid}]" in b["task"])
        for b in briefs
        if b["team"] == "green"
    )
    assert told == [["F-001", "F-003"], ["F-002"], ["F-004"]]


def test_parallel_green_1_is_one_green_job_as_without_the_key(workflow, tmp_path):
    serial = {"1": [step for steps in GREEN.values() for step in steps]}
    session, record, _ = run(workflow, tmp_path, serial, k=1)
    assert not (session / "cycles/001/green-lanes").exists()
    assert not (session / "logs/green_lane").exists()
    assert "groups" not in record
    assert fix_subjects(session / "worktree") == [
        "fix: [F-001] fix a",
        "fix: [F-003] document a",
        "fix: [F-002] fix b",
        "fix: [F-004] fix c",
    ]


def test_a_run_killed_during_a_lane_is_completed_by_the_plain_rerun(workflow, tmp_path):
    hold = tmp_path / "go-on"
    green = {**GREEN, "F-004/1": [{"wait_for": str(hold)}, *GREEN["F-004/1"]]}
    target = target_repo(tmp_path)
    script = workflow.script({"red": {1: RED}, "green": green})
    spec = script_spec(target, script, tmp_path / "t.jsonl", max_cycles=1, teams=["red", "green"])
    spec["agent"]["parallel_green"] = 3
    lanes = workflow.session("p") / "cycles/001/green-lanes"
    proc = subprocess.Popen(
        workflow.command("p", spec, cores=3),
        cwd=workflow.workdir,
        env=workflow.env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Lanes g1 and g2 finish while g3 holds at F-004's group.
        held = workflow.session("p") / "logs/green_lane/001-g3.log"

        def lanes_held() -> bool:
            done = {p.name for p in lanes.glob("*.json")}
            return held.exists() and {"g1.json", "g2.json"} <= done

        wait_for(lambda: lanes_held() or proc.poll() is not None, 300)
        assert proc.poll() is None, proc.stderr.read()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not (lanes / "g3.json").exists()
    first = (lanes / "g1.json").stat().st_mtime_ns
    hold.touch()
    workflow.run("p", spec)
    assert (lanes / "g1.json").stat().st_mtime_ns == first  # a finished lane is not redone
    assert fix_subjects(workflow.session("p") / "worktree") == [
        "fix: [F-001] fix a",
        "fix: [F-003] document a",
        "fix: [F-002] fix b",
        "fix: [F-004] fix c",
    ]


def cli(workflow, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        cwd=workflow.workdir,
        env=workflow.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_groups_that_pass_alone_but_fail_together_lose_the_later_one_to_the_gate(
    workflow, tmp_path
):
    # Each lane's per-fix gate passes its change alone (a=2: 4, b=3: 4); together they
    # make 5, a tree no lane tested: the stage's end run takes the later group out.
    target = make_repo(
        tmp_path / "ab",
        {
            "a.py": MODULES["a"],
            "b.py": MODULES["b"],
            "test_ab.py": "from a import a\nfrom b import b\n\n\ndef test_ab():\n"
            "    assert a() + b() != 5\n",
        },
    )
    green = {
        "F-001/1": [write("a.py", MODULES["a"].replace("1", "2")), finish("F-001", "a=2")],
        "F-002/1": [write("b.py", MODULES["b"].replace("2", "3")), finish("F-002", "b=3")],
    }
    script = workflow.script({"red": {1: RED[:2]}, "green": green})
    spec = script_spec(target, script, tmp_path / "t.jsonl", max_cycles=1)
    spec["agent"]["parallel_green"] = 2
    spec["test_gate"] = "per_fix"
    workflow.run("p", spec, cores=2)
    session = workflow.session("p")
    record = json.loads((session / "cycles/001/green.json").read_text())
    assert fix_subjects(session / "worktree") == ["fix: [F-001] a=2"]
    assert [r["id"] for r in record["skipped"]] == ["F-002"]
    assert "fails from this change on" in record["skipped"][0]["reason"]
    assert record["tests_pass"] and workflow.decision("p", 1)["tests_pass"]
    # The session's readers take the lanes' records as any other.
    status = cli(workflow, "status", "p")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    verified = cli(workflow, "verify", "p")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_lanes_left_from_a_deleted_target_are_set_aside_and_the_new_session_completes(
    workflow, tmp_path
):
    import shutil

    session, _, _ = run(workflow, tmp_path, GREEN, k=2)
    lanes = sorted(p.resolve() for p in session.glob("tracks/green-*/worktree"))
    assert lanes  # the lanes' worktrees, in the store
    # The user deletes the target and the session, makes the target again at the same path
    # and starts over: the store still holds the lanes, whose .git names a repository gone.
    shutil.rmtree(tmp_path / "abc")
    shutil.rmtree(session)
    session, green, _ = run(workflow, tmp_path, GREEN, k=2)
    assert (session / "done").exists()
    assert sorted(r["id"] for r in green["fixed"]) == ["F-001", "F-002", "F-003", "F-004"]
    for lane in lanes:  # set aside, never deleted
        (aside,) = lane.parent.glob(f"{lane.name}.orphaned-*")
        assert (aside / ".git").exists()

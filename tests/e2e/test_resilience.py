"""Completed stages are history: code or config changes never rerun them; kill -9,
a plain rerun, and a concurrent second run never duplicate or lose a commit."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from conftest import ROOT, Workflow, git, script_spec, wait_for

FIX = "def add(a, b):\n    return b + a\n\n\ndef mean(values):\n    return sum(values) / len(values)\n"  # noqa: E501
FIX2 = FIX.replace("return sum(values)", "return float(sum(values))")
FINDING = {"severity": "high", "title": "t", "location": "calc.py:1", "issue": "i.", "impact": "x."}


def slow_green_script(sleep: float) -> dict:
    finding2 = dict(FINDING, title="u")
    return {
        "red": {
            1: [
                {"tool": "report_finding", "args": FINDING},
                {"tool": "report_finding", "args": finding2},
            ]
        },
        "green": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": FIX}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "one"}},
                {"sleep": sleep},
                {"tool": "write_file", "args": {"path": "calc.py", "content": FIX2}},
                {"tool": "finish_fix", "args": {"finding_id": "F-002", "summary": "two"}},
            ]
        },
    }


def private_workflow_copy(tmp_path: Path) -> Path:
    """A copy of the workflow whose scripts and config a test may touch."""
    copy = tmp_path / "wfcopy"
    copy.mkdir()
    for part in ("Snakefile", "rules", "scripts", "config", "profiles", "autoresearch"):
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, copy / part)
    return copy


def subjects(worktree: Path) -> list[str]:
    return git(worktree, "log", "--format=%s").splitlines()


def committed(worktree: Path, subject: str) -> bool:
    """Whether the session branch has a commit with this subject yet. False while the
    worktree is still being made (its .git file is written last), never an error."""
    if not (worktree / ".git").is_file():
        return False
    proc = subprocess.run(
        ["git", "log", "--format=%s"], cwd=worktree, capture_output=True, text=True
    )
    return proc.returncode == 0 and subject in proc.stdout.splitlines()


def test_code_and_config_changes_never_rerun_finished_stages(tmp_path, target):
    copy = private_workflow_copy(tmp_path)
    workflow = Workflow(tmp_path / "work", copy / "Snakefile")
    script = workflow.script(slow_green_script(0))
    spec = script_spec(target, script, tmp_path / "t.jsonl", max_cycles=2)
    workflow.run("s", spec)
    stamps = {p: p.stat().st_mtime_ns for p in workflow.session("s").rglob("*") if p.is_file()}
    history = subjects(workflow.session("s") / "worktree")

    later = time.time() + 5
    code = [
        *(copy / "rules").iterdir(),
        *(copy / "scripts").rglob("*.py"),
        *(copy / "autoresearch").rglob("*.py"),
    ]
    for path in code:
        os.utime(path, (later, later))
    cycle_rules = copy / "rules" / "cycle.smk"  # and an edit to a rule's code
    rule_code = "        scripts.cycle.green(wildcards, input, output, log)"
    assert rule_code in cycle_rules.read_text()
    cycle_rules.write_text(cycle_rules.read_text().replace(rule_code, rule_code + "  # edited"))
    defaults = copy / "config" / "config.yaml"
    defaults.write_text(defaults.read_text().replace("max_findings: 15", "max_findings: 4"))
    spec["test_timeout_s"] = 123  # a changed threshold in the session spec
    proc = workflow.run("s", spec)

    assert "Nothing to be done" in proc.stderr
    after = {p: p.stat().st_mtime_ns for p in workflow.session("s").rglob("*") if p.is_file()}
    changed = [p for p in stamps if after.get(p) != stamps[p] and ".run.lock" not in p.name]
    assert changed == []
    assert subjects(workflow.session("s") / "worktree") == history


def test_kill_during_green_then_rerun_finishes_without_duplicates(workflow, target):
    spec = script_spec(
        target,
        workflow.script(slow_green_script(30)),
        workflow.workdir / "t.jsonl",
        max_cycles=1,
        teams=["red", "green"],
    )
    proc = workflow.start("s", spec)
    worktree = workflow.session("s") / "worktree"
    wait_for(lambda: committed(worktree, "fix: [F-001] one"))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (workflow.session("s") / "cycles/001/green-patch.md").exists()

    # The session's frozen spec names the same script: rewritten without the sleep, the
    # rerun replays it at once.
    workflow.script(slow_green_script(0))
    workflow.run("s", None)
    log = subjects(worktree)
    assert log.count("fix: [F-001] one") == 1
    assert log.count("fix: [F-002] two") == 1
    assert (workflow.session("s") / "done").exists()


def test_kill_during_evaluate_then_rerun_finishes_without_duplicates(workflow, tmp_path):
    # The target's suite sleeps in uncached runs (pytest --cache-clear) once the flag is set.
    from conftest import CALC, CALC_TESTS, make_repo

    flag = tmp_path / "slow-eval"  # unique per test run, unlike a name under /tmp
    asleep = tmp_path / "asleep"  # made when evaluate's run has begun its sleep
    slow = (
        "import sys, time\n\nif '--cache-clear' in sys.argv and "
        f"__import__('os').path.exists({str(flag)!r}):\n"
        f"    open({str(asleep)!r}, 'w').close()\n    time.sleep(60)\n"
    )
    repo = make_repo(
        tmp_path / "t", {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "conftest.py": slow}
    )
    try:
        spec = script_spec(
            repo,
            workflow.script(slow_green_script(0)),
            tmp_path / "t.jsonl",
            max_cycles=1,
            teams=["red", "green"],
            evaluate={"rerun": True},  # evaluate runs the suite itself, not Green's run again
            commands={"sandbox": "none"},  # the flag is outside the jail's view (its /tmp)
        )
        proc = workflow.start("s", spec)
        wait_for((workflow.session("s") / "cycles/001/green.json").exists)
        flag.write_text("")  # from now on the uncached run sleeps: that is evaluate's
        wait_for(asleep.exists)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        flag.unlink()
    assert not (workflow.session("s") / "cycles/001/decision.json").exists()
    workflow.run("s", spec)
    log = subjects(workflow.session("s") / "worktree")
    assert log.count("fix: [F-001] one") == 1 and log.count("fix: [F-002] two") == 1
    assert workflow.decision("s", 1)["tests_pass"]


def test_second_concurrent_run_refuses_and_harms_nothing(workflow, target, tmp_path):
    release = tmp_path / "release"  # the first run holds after its first fix until this exists
    script = slow_green_script(0)
    script["green"][1][2] = {"wait_for": str(release)}
    spec = script_spec(
        target, workflow.script(script), workflow.workdir / "t.jsonl", max_cycles=1,
        teams=["red", "green"],
    )  # fmt: skip
    first = workflow.start("s", spec)
    worktree = workflow.session("s") / "worktree"
    wait_for(lambda: committed(worktree, "fix: [F-001] one"))
    second = workflow.run("s", spec, check=False)
    release.write_text("")
    assert second.returncode != 0
    assert "already being run" in second.stderr
    assert first.wait(timeout=300) == 0
    log = subjects(worktree)
    assert log.count("fix: [F-001] one") == 1 and log.count("fix: [F-002] two") == 1
    assert (workflow.session("s") / "done").exists()

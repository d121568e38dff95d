"""`autoresearch status` reads session files only; it never runs a stage."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, Workflow, calc_repo, script_spec

FINDING = {"severity": "high", "title": "x", "location": "calc.py:1", "issue": "i.", "impact": "m."}


def status(workdir, *args):
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "status", *args],
        cwd=workdir,
        # This checkout's package, whichever checkout the environment's was installed from
        # (the sessions' Snakemake runs import this one: conftest.Workflow.env).
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Workflow:
    """A finished one-cycle sweep whose one finding Green skipped, read by the tests of a
    session's summary and of its running/paused state."""
    base = tmp_path_factory.mktemp("status")
    workflow = Workflow(base / "work")
    script = {
        "red": {"*": [{"tool": "report_finding", "args": FINDING}]},
        "green": {
            "*": [{"tool": "skip_finding", "args": {"finding_id": "F-001", "reason": "unclear"}}]
        },
    }
    target = calc_repo(base / "target")
    transcript = workflow.workdir / "t.jsonl"
    workflow.run("s", script_spec(target, workflow.script(script), transcript, max_cycles=1))
    return workflow


def test_status_of_a_session_summarises_it(swept):
    workflow = swept
    out = status(workflow.workdir, "s").stdout
    for line in (
        "Session: s [done]",
        "Version: autoresearch 0.1.0",
        "Mode: sweep",
        "Cycles run: 1",
        "Fixes kept: 0",
        "Tests: pass",
        "Open issues: 1",
        "Stopped: max_cycles reached (1)",
    ):
        assert line in out


def test_status_without_name_prints_a_table_and_runs_nothing(workflow, target):
    workflow.run(
        "s",
        script_spec(target, workflow.script({}), workflow.workdir / "t.jsonl", max_cycles=1),
        target="sessions/s/session.yaml",
    )
    before = sorted(p.name for p in (workflow.session("s")).rglob("*"))
    out = status(workflow.workdir).stdout
    assert out.splitlines()[0].split() == [
        "session",
        "mode",
        "state",
        "cycles",
        "fixes",
        "tests",
        "cost_usd",
    ]
    assert out.splitlines()[1].split()[:3] == ["s", "sweep", "set"]
    assert sorted(p.name for p in workflow.session("s").rglob("*")) == before


def test_status_of_unknown_session_fails(tmp_path):
    (tmp_path / "sessions").mkdir()
    proc = status(tmp_path, "nope")
    assert proc.returncode == 2 and "no session 'nope'" in proc.stderr


def test_status_says_running_while_a_run_holds_the_session_and_paused_otherwise(swept):
    import fcntl

    workflow = swept
    done = workflow.session("s") / "done"
    finished = done.read_text()
    done.unlink()  # a cycle run, the session not finished
    try:
        assert "Session: s [paused]" in status(workflow.workdir, "s").stdout
        with open(workflow.session("s") / ".run.lock", "a+") as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a live run holds it
            assert "Session: s [running]" in status(workflow.workdir, "s").stdout
            table = status(workflow.workdir).stdout
            assert table.splitlines()[1].split()[:3] == ["s", "sweep", "running"]
        assert "Session: s [paused]" in status(workflow.workdir, "s").stdout
    finally:
        done.write_text(finished)  # the shared session is finished again for the other tests

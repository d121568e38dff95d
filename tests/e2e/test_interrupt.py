"""One Ctrl-C ends a running session's commands and the run; the plain rerun resumes."""

from __future__ import annotations

import os
import signal
import time

from conftest import git, kill_all, live_processes, script_spec, wait_for

from autoresearch.safety import commands

FIX = "def add(a, b):\n    return b + a\n\n\ndef mean(values):\n    return sum(values) / len(values)\n"  # noqa: E501
FINDING = {"severity": "high", "title": "t", "location": "calc.py:1", "issue": "i.", "impact": "x."}
# Sleeps in Green's test run (once the fix is written) while the first run's SLOW is set.
SLOW_TESTS = (
    'if [ -n "$SLOW" ] && grep -q "b + a" calc.py; then touch sleeping; sleep 302.5; fi; '
    "python -m pytest -q"
)


def test_one_ctrl_c_ends_a_session_cleanly_and_the_rerun_resumes(workflow, target, tmp_path):
    script = workflow.script(
        {
            "red": {1: [{"tool": "report_finding", "args": FINDING}]},
            "green": {
                1: [
                    {"tool": "write_file", "args": {"path": "calc.py", "content": FIX}},
                    {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "one"}},
                ]
            },
        }
    )
    spec = script_spec(target, script, tmp_path / "t.jsonl", max_cycles=1, test_command=SLOW_TESTS)
    spec["commands"] = {**spec.get("commands", {}), "pass_env": ["SLOW"]}
    worktree = workflow.session("s") / "worktree"
    workflow.extra_env["SLOW"] = "1"
    proc = workflow.start("s", spec)
    try:
        wait_for(lambda: (worktree / "sleeping").exists() or proc.poll() is not None, 300)
        assert proc.poll() is None, proc.stderr.read()
        start = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the foreground group
        _, stderr = proc.communicate(timeout=120)
        assert time.monotonic() - start < 60  # not the test command's 302 s
        assert proc.returncode != 0
        assert "Traceback" not in stderr
        assert commands.INTERRUPT_MESSAGE.strip() in stderr
        assert live_processes("302.5") == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_all("302.5")

    del workflow.extra_env["SLOW"]
    workflow.run("s", spec)
    assert workflow.decision("s", 1)["tests_pass"]
    assert (workflow.session("s") / "done").exists()
    subjects = git(worktree, "log", "--format=%s").splitlines()
    assert subjects.count("fix: [F-001] one") == 1

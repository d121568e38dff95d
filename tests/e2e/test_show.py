"""`autoresearch show NAME N` on a sweep session: the cycle's findings, the commits it kept
with their diffs, and what was skipped and why (the session of test_finalize.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import CALC, Workflow, make_repo
from test_finalize import SCRIPT, TESTS, TEXT


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("show")
    target = make_repo(tmp / "target", {"calc.py": CALC, "text.py": TEXT, **TESTS})
    wf = Workflow(tmp / "work")
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "teams": ["red", "green"],
        "test_gate": "per_fix",
        "agent": {"backend": "script", "script": str(wf.script(SCRIPT))},
    }
    wf.run("s", spec)
    return wf


def show(wf: Workflow, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "show", *args],
        cwd=wf.workdir,
        env=wf.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_show_lists_a_sweep_cycles_findings_with_what_became_of_each(session):
    proc = show(session, "s", "1")
    assert proc.returncode == 0, proc.stderr
    assert "Findings (7 reported, 7 passed to Green):" in proc.stdout
    assert "- [F-001] high mean crashes on an empty list (calc.py:5): fixed" in proc.stdout
    assert "- [F-007] high text.py has no docstring (text.py:1): skipped: cosmetic" in proc.stdout


def test_show_prints_the_kept_commits_and_their_diffs(session):
    out = show(session, "s", "1").stdout
    assert "Kept commits (6):" in out
    assert " fix: [F-001] guard empty mean\n" in out
    first = out.split("diff of ")[1]
    assert re.match(r"[0-9a-f]{12} fix: \[F-001\] guard empty mean:\ndiff --git a/calc.py", first)
    assert "+    if not values:" in first


def test_show_lists_what_was_skipped_and_why(session):
    out = show(session, "s", "1").stdout
    assert "Skipped (1):\n- [F-007] text.py has no docstring (text.py:1): cosmetic" in out


def test_show_names_the_cycles_a_session_has(session):
    proc = show(session, "s", "5")
    assert proc.returncode == 1
    assert "session 's' has no finished cycle 5 (cycles 1 to 1)" in proc.stderr

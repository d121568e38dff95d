"""Narrow tells the truth: a measurement that prints no number after a cycle is explained
where a person looks (`done`, `status`, session.md), a reverted cycle claims no fix, and
`scope` bounds what Red may report."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import Workflow, make_repo, no_key_sweep

TESTS = "import app\n\n\ndef test_app():\n    assert app.A == 'a'\n"


@pytest.fixture(scope="module")
def unmeasured(tmp_path_factory):
    """The issue's case: `ruff check . | tail -1` prints "All checks passed!" once Green
    fixed every warning, which has no number."""
    base = tmp_path_factory.mktemp("narrow-truth")
    repo = make_repo(
        base / "target",
        {"app.py": "A = f'a'\nB = f'b'\n", "tests/test_app.py": TESTS},
    )
    workflow = Workflow(base / "work")
    spec = no_key_sweep(
        repo,
        mode="narrow",
        max_cycles=1,
        goal={
            "metric": "lint warnings",
            "command": "python -m ruff check --no-cache . | tail -1",
            "target": "<= 0",
        },
        angles=[{"name": "lint", "hypothesis": "ruff fixes them."}],
    )
    workflow.run("n", spec)
    return workflow


def test_a_reverted_cycle_claims_no_fix(unmeasured):
    decision = unmeasured.decision("n", 1)
    assert decision["narrow"]["value"] is None and decision["narrow"]["reverted"]
    assert decision["narrow"]["kept_fixes"] == 0 and decision["fixed"] == []


def test_done_says_which_command_printed_what_and_what_to_change(unmeasured):
    done = (unmeasured.session("n") / "done").read_text()
    assert "python -m ruff check --no-cache . | tail -1" in done
    assert "All checks passed!" in done
    assert "print a number whatever the outcome" in done and "len(json.load" in done


def test_status_and_session_md_say_it_too(unmeasured):
    status = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "status", "n"],
        cwd=unmeasured.workdir,
        env=unmeasured.env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Cycle 1 could not be judged" in status and "All checks passed!" in status
    summary = (unmeasured.session("n") / "session.md").read_text()
    assert "## Not measured" in summary and "All checks passed!" in summary


def test_scope_include_bounds_what_red_reports(tmp_path):
    repo = make_repo(
        tmp_path / "target",
        {
            "app.py": "A = f'a'\n",
            "vendor/lib.py": "B = f'b'\n",
            "tests/test_app.py": TESTS,
        },
    )
    workflow = Workflow(tmp_path / "work")
    spec = no_key_sweep(repo, teams=["red", "green"], scope={"include": ["app.py", "tests"]})
    workflow.run("s", spec)
    red = (workflow.session("s") / "cycles" / "001" / "red-findings.md").read_text()
    assert "app.py:1" in red and "vendor/" not in red
    decision = workflow.decision("s", 1)
    assert [f["key"].split(" (")[-1] for f in decision["fixed"]] == ["app.py:1)"]


def test_the_counting_command_narrow_suggests_is_the_one_plan_suggests():
    from autoresearch.modes.narrow import progress
    from autoresearch.session import plan

    assert progress.COUNTING_COMMAND == plan.PY_LINT

"""A whole sweep session with `backend: claude`, through Snakemake and the real SDK,
against the scripted fake Messages API: commits, files, and what each request carried."""

from __future__ import annotations

import json

import pytest
from conftest import Workflow, calc_repo, git
from fake_anthropic import FakeAnthropic, message, text_block, tool_call

RED_FREE_TEXT = "RED-NOTES: overall the design is poor and I read every file twice."
NARRATIVE = "I noticed this while tracing mean() through the callers."
HINT = "You should add a guard that raises ValueError."
GUARDED = (
    "def add(a, b):\n    return a + b\n\n\ndef mean(values):\n    if not values:\n"
    '        raise ValueError("mean of no values")\n    return sum(values) / len(values)\n'
)
BROKEN = GUARDED.replace("return a + b", "return a * b")


def finding(severity, title, issue, impact="Callers get wrong results."):
    return tool_call(
        "report_finding",
        {
            "severity": severity,
            "title": title,
            "location": "calc.py:5",
            "issue": issue,
            "impact": impact,
        },
    )


def script_session(fake):
    fake.push(
        # Red: three findings, then free text that must never reach another team.
        finding(
            "high",
            "mean crashes on an empty list",
            f"mean([]) raises ZeroDivisionError. {NARRATIVE} {HINT}",
        ),
        finding("medium", "add is unchecked", "add accepts operands of any type."),
        finding("low", "no module docstring", "calc.py has no docstring."),
        message([text_block(RED_FREE_TEXT)]),
        # Green: fix F-001 (kept), break the tests with F-002 (restored), skip F-003.
        tool_call("write_file", {"path": "calc.py", "content": GUARDED}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "guard mean against []"}),
        tool_call("write_file", {"path": "calc.py", "content": BROKEN}),
        tool_call("finish_fix", {"finding_id": "F-002", "summary": "tighten add"}),
        tool_call("skip_finding", {"finding_id": "F-003", "reason": "cosmetic"}),
        # Refactor: one change to one file, then done.
        tool_call(
            "edit_file",
            {
                "path": "calc.py",
                "old_str": "def add(a, b):",
                "new_str": "def add(a, b):  # two numbers",
            },
        ),
        tool_call("finish_refactor", {"summary": "name add's operands"}),
        message([text_block("Done.")]),
    )


def run_session(workflow, target, fake):
    workflow.extra_env = {"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "sk-test-fake"}
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "agent": {
            "backend": "claude",
            "model": "claude-haiku-4-5",
            "max_tokens": 1024,
            "request_timeout_s": 10,
            "max_retries": 1,
        },
    }
    workflow.run("c", spec)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One scripted claude session, read by every test below (each asserts one behaviour of
    the same run: its commits, what each request carried, its usage): the workflow and the
    fake server with every request body it took."""
    base = tmp_path_factory.mktemp("claude")
    workflow = Workflow(base / "work")
    with FakeAnthropic() as fake:
        script_session(fake)
        run_session(workflow, calc_repo(base / "target"), fake)
        yield workflow, fake


def team_of(body: dict) -> str:
    names = {t["name"] for t in body.get("tools", [])}
    for team, tool in (
        ("red", "report_finding"),
        ("green", "finish_fix"),
        ("refactor", "finish_refactor"),
    ):
        if tool in names:
            return team
    return "?"


def test_claude_sweep_commits_restores_skips_and_refactors(session):
    workflow, _ = session
    worktree = workflow.session("c") / "worktree"
    subjects = git(worktree, "log", "--format=%s").splitlines()
    assert subjects[:2] == ["refactor: name add's operands", "fix: [F-001] guard mean against []"]
    assert "return a + b" in (worktree / "calc.py").read_text()
    patch = (workflow.session("c") / "cycles/001/green-patch.md").read_text()
    # Taken out by the batch gate's bisection, naming the test it broke.
    assert "[F-002] not kept: the stage's end test run" in patch
    assert "tests/test_calc.py::test_add" in patch
    assert "[F-003] cosmetic" in patch
    refactor = (workflow.session("c") / "cycles/001/refactor-patch.md").read_text()
    assert refactor.splitlines()[2] == "## Changes: 1"
    decision = workflow.decision("c", 1)
    assert decision["tests_pass"] and decision["reverted"] == []
    red_md = (workflow.session("c") / "cycles/001/red-findings.md").read_text()
    assert RED_FREE_TEXT in red_md  # kept in Red's own file, for people


def test_claude_requests_keep_the_clean_room(session):
    _, fake = session
    bodies = fake.bodies
    by_team: dict[str, list[str]] = {}
    for body in bodies:
        by_team.setdefault(team_of(body), []).append(json.dumps(body))
    assert set(by_team) == {"red", "green", "refactor"}
    for team in ("green", "refactor"):
        for text in by_team[team]:
            for removed in ("RED-NOTES", "I noticed", "tracing mean", "should add a guard"):
                assert removed not in text, (team, removed)
    assert any("mean([]) raises ZeroDivisionError" in t for t in by_team["green"])
    for text in by_team["refactor"]:
        assert "calc.py" in text
        for leaked in (
            "F-00",
            "mean crashes",
            "ZeroDivisionError",
            "add is unchecked",
            "docstring",
        ):
            assert leaked not in text, leaked


def test_claude_usage_reaches_results_and_ledger(session):
    workflow, _ = session
    rows = (workflow.session("c") / "results.tsv").read_text().splitlines()[1:]
    tokens = {r.split("\t")[1]: int(r.split("\t")[8]) for r in rows}
    assert tokens["red"] > 0 and tokens["green"] > 0 and tokens["refactor"] > 0
    usage = (workflow.session("c") / "usage.tsv").read_text()
    assert "claude-haiku-4-5" in usage

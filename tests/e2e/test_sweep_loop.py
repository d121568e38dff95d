"""The sweep loop across cycles: what later Red briefs say, stop rules, revert order."""

from __future__ import annotations

from conftest import CALC, CALC_TESTS, git, make_repo, script_spec

FINDING = {
    "severity": "high",
    "title": "mean crashes on empty input",
    "location": "calc.py:5",
    "issue": "mean([]) divides by zero.",
    "impact": "ZeroDivisionError for callers.",
}
GUARDED = CALC.replace(
    "    return sum(values)", "    if not values:\n        return 0.0\n    return sum(values)"
)


def run(workflow, target, script, **extra):
    transcript = workflow.workdir / "t.jsonl"
    workflow.run("s", script_spec(target, workflow.script(script), transcript, **extra))
    return workflow.transcript(transcript)


def test_later_red_is_told_what_was_tried_and_where_to_look(workflow, target):
    script = {
        "red": {1: [{"tool": "report_finding", "args": FINDING}]},
        "green": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": GUARDED}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "guard"}},
            ]
        },
    }
    briefs = run(workflow, target, script, max_cycles=2, teams=["red", "green"])
    red2 = [b for b in briefs if b["team"] == "red"][1]
    text = red2["system"] + red2["task"]
    assert "F-001 mean crashes on empty input (calc.py:5) (fixed)" in text
    assert "calc.py" in red2["data"].get("adjacent_files", [])
    # Only the category that found something last cycle is kept.
    assert red2["data"]["categories"] == ["bugs"]


def test_finding_ids_continue_across_cycles(workflow, target):
    script = {"red": {"*": [{"tool": "report_finding", "args": FINDING}]}}
    run(workflow, target, script, max_cycles=2, teams=["red", "green"])
    second = (workflow.session("s") / "cycles/002/red-findings.md").read_text()
    assert "[F-002]" in second


def test_stops_at_max_cycles(workflow, target):
    run(workflow, target, {"red": {"*": []}}, max_cycles=1, stop_below=None)
    assert workflow.decision("s", 1)["reason"] == "max_cycles reached (1)"
    assert "stopped: max_cycles reached (1)" in (workflow.session("s") / "done").read_text()


def test_stops_after_two_cycles_without_refactor_changes(workflow, target):
    run(workflow, target, {"red": {"*": []}}, max_cycles=5, stop_below=None)
    assert not workflow.decision("s", 1)["stop"]
    assert workflow.decision("s", 2)["reason"] == (
        "two consecutive cycles in which Refactor changed nothing"
    )
    assert not (workflow.session("s") / "cycles/003").exists()


def test_without_refactor_stops_after_two_cycles_of_skips(workflow, target):
    script = {"red": {"*": [{"tool": "report_finding", "args": FINDING}]}}
    run(workflow, target, script, max_cycles=5, teams=["red", "green"])
    assert workflow.decision("s", 2)["reason"] == (
        "two consecutive cycles in which Green skipped every finding"
    )


def test_teams_without_refactor_skip_the_rule(workflow, target):
    run(workflow, target, {"red": {"*": []}}, max_cycles=1, teams=["red", "green"])
    cycle = workflow.session("s") / "cycles/001"
    assert not (cycle / "refactor-patch.md").exists()
    rows = (workflow.session("s") / "results.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[1] for r in rows] == ["red", "green"]


# A suite that passes normally but fails on evaluate's uncached run (--cache-clear)
# whenever calc.py carries a marker: a fault only the full verification can catch.
FLAKY_CONFTEST = """\
import pathlib
import sys


def pytest_sessionstart(session):
    if "--cache-clear" in sys.argv and "MARKER" in pathlib.Path("calc.py").read_text():
        raise SystemExit("uncached run fails")
"""


def test_broken_cycle_reverts_refactor_then_green_newest_first(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "t",
        {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "conftest.py": FLAKY_CONFTEST},
    )
    marked = GUARDED + "# MARKER\n"
    script = {
        "red": {1: [{"tool": "report_finding", "args": FINDING}]},
        "green": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": marked}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "guard"}},
            ]
        },
        "refactor": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": marked + "# r1\n"}},
                {"tool": "finish_refactor", "args": {"summary": "r1"}},
                {
                    "tool": "write_file",
                    "args": {"path": "calc.py", "content": marked + "# r1\n# r2\n"},
                },
                {"tool": "finish_refactor", "args": {"summary": "r2"}},
            ]
        },
    }
    run(workflow, repo, script, max_cycles=2)
    decision = workflow.decision("s", 1)
    assert [r["subject"] for r in decision["reverted"]] == [
        "refactor: r2",
        "refactor: r1",
        "fix: [F-001] guard",
    ]
    assert decision["tests_pass"] and decision["fixed"] == []
    assert "MARKER" not in (workflow.session("s") / "worktree/calc.py").read_text()
    log = git(workflow.session("s") / "worktree", "log", "--format=%s").splitlines()
    assert log[0].startswith('Revert "fix: [F-001] guard"')


def test_unrecoverable_break_stops_the_session(workflow, tmp_path):
    # The uncached run fails whatever the code: reverts cannot bring the tests back.
    always = FLAKY_CONFTEST.replace(' and "MARKER" in pathlib.Path("calc.py").read_text()', "")
    repo = make_repo(
        tmp_path / "t",
        {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "conftest.py": always, "marker": ""},
    )
    script = {
        "red": {1: [{"tool": "report_finding", "args": FINDING}]},
        "green": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": GUARDED}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "g"}},
            ]
        },
    }
    # The baseline (also uncached) fails, so tests "were not passing before": no revert.
    run(workflow, repo, script, max_cycles=3, teams=["red", "green"])
    decision = workflow.decision("s", 1)
    assert decision["reverted"] == [] and not decision["broken"]

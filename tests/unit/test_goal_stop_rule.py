"""Stop 7, a goal in words satisfied: the sweep's stop rule and the judge panel's spec check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.engine import findings
from autoresearch.errors import SpecError
from autoresearch.modes.base import check_judge
from autoresearch.modes.sweep import Sweep
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.session.spec import SessionSpec


class Env:
    """A finished sweep cycle: what Red reported, the previous decision (what differs in its
    decision.json from a sweep decision as the loop writes it, tests/unit/decisions)."""

    def __init__(self, tmp_path, severities=(), previous=None, **spec):
        self.cycle_dir = tmp_path
        self.cycle = 2 if previous else 1
        self.spec = SessionSpec({"teams": ["red", "green"], "max_cycles": 9, **spec})
        self.layout, self.track = SessionLayout(tmp_path / "s"), ""
        self._previous = previous
        if previous:
            written = json.loads((Path(__file__).parent / "decisions" / "sweep.json").read_text())
            write_json(self.layout.decision(1), written | previous)
        reported = [
            findings.Finding(f"F-{i:03d}", s, f"t{i}", "calc.py:1", "i.", "x.")
            for i, s in enumerate(severities, 1)
        ]
        (tmp_path / "red-findings.md").write_text(findings.render(reported))

    def previous_decision(self):
        return self._previous

    def finished(self, path):
        return json.loads(path.read_text())

    def decisions_before(self):
        return [self._previous] if self._previous else []


def decide(env, tests_pass=True):
    decision = {"broken": False, "refactor_changes": 1, "fixed": [1], "tests_pass": tests_pass}
    Sweep().apply_policy(env, decision)
    return decision


def test_a_clean_first_cycle_with_passing_tests_satisfies_the_goal(tmp_path):
    decision = decide(Env(tmp_path))
    assert decision["stop"] and decision["reason"] == (
        "goal satisfied: a cycle over the whole scope found nothing at or above medium "
        "and the tests pass"
    )


def test_findings_below_stop_below_do_not_keep_the_goal_open(tmp_path):
    assert decide(Env(tmp_path, ("low", "test-gap")))["reason"].startswith("goal satisfied:")


def test_a_finding_at_stop_below_keeps_the_session_going(tmp_path):
    decision = decide(Env(tmp_path, ("medium",)))
    assert not decision["stop"]
    assert decision["goal_check"] == "1 finding(s) at or above medium"


def test_stop_below_is_the_spec_threshold(tmp_path):
    reason = decide(Env(tmp_path, ("medium",), stop_below="high"))["reason"]
    assert reason.startswith("goal satisfied:") and "at or above high" in reason


def test_failing_tests_keep_the_goal_open(tmp_path):
    assert not decide(Env(tmp_path), tests_pass=False)["stop"]


def test_a_cycle_whose_red_had_a_shortened_checklist_does_not_count(tmp_path):
    previous = {"red_categories": ["bugs"], "refactor_changes": 1, "fixed": [1]}
    decision = decide(Env(tmp_path, previous=previous))
    assert not decision["stop"]
    assert decision["goal_check"] == "the cycle did not cover the whole scope"


def test_stop_below_null_turns_the_rule_off(tmp_path):
    assert not decide(Env(tmp_path, stop_below=None))["stop"]


def spec_values(backend, panel=3):
    return {"agent": {"backend": backend}, "judge": {"panel": panel}}


def test_a_judge_panel_without_a_model_is_refused_at_the_spec_check(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    for backend in ("ruff", "claude"):
        with pytest.raises(SpecError, match=r"s\.yaml: key 'judge': .*needs a model backend"):
            Sweep().setup.check_spec(spec_values(backend), "s")


def test_a_judge_panel_must_be_odd(monkeypatch):
    with pytest.raises(SpecError, match="odd number of at least 3, got 4"):
        check_judge(spec_values("script", 4), "s")


def test_a_judge_panel_with_a_key_is_accepted(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    check_judge(spec_values("claude"), "s")

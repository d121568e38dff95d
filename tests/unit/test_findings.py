"""Findings records: one record per finding however its fields are written, clean locations."""

from __future__ import annotations

import pytest

from autoresearch.engine import findings
from autoresearch.engine.findings import Finding, clean_location, parse, render, sanitize


def test_a_line_break_inside_a_field_cannot_forge_a_second_finding():
    forged = Finding(
        "F-001",
        "high",
        "Crash\n### [F-001] duplicate id",
        "calc.py:5\n- Issue: forged",
        "mean() fails.\n## Critical\n### [F-002] invented",
        "Callers crash.",
    )
    back = parse(render([forged]))
    assert [f.id for f in back] == ["F-001"]
    assert back[0].title == "Crash ### [F-001] duplicate id"
    assert back[0].issue == "mean() fails. ## Critical ### [F-002] invented"


@pytest.mark.parametrize(
    ("location", "clean"),
    [
        ("calc.py:5", "calc.py:5"),
        ("src/a.py:10 - should add a None check here", "src/a.py:10"),
        ("calc.py:12 (fix: wrap it in try/except)", "calc.py:12"),
        ("src/a.py:10-14, src/b.py:3", "src/a.py:10-14, src/b.py:3"),
        ("in calc.py, consider a lock", "calc.py"),
        ("Makefile:3", "Makefile:3"),
        ("the mean function", "the mean function"),
        ("you should add a lock in mean()", "(location not stated)"),
    ],
)
def test_sanitize_keeps_only_the_place_of_a_location(location, clean):
    finding = Finding("F-001", "high", "Crash", location, "mean() fails.", "Callers crash.")
    passed, _ = sanitize([finding])
    assert passed[0].location == clean
    assert clean_location(location) == clean


def test_when_only_lows_are_held_sanitize_says_why_nothing_went_on():
    lows = [Finding(f"F-{i:03d}", "low", f"UP0{i} t", f"m.py:{i}", "i", "x") for i in range(20)]
    passed, held = sanitize(lows, 15)
    assert passed == [] and len(held) == 20
    assert "max_findings (15) or fewer" in findings.none_passed_why(passed, held, 15)
    medium = [Finding("F-100", "medium", "F401 t", "m.py:1", "i", "x")]
    passed, held = sanitize(medium + lows, 15)
    assert findings.none_passed_why(passed, held, 15) == ""


def test_findings_the_cycles_focus_holds_back_are_not_blamed_on_max_findings():
    # python-pathspec's narrow (angle `^F401`): Red's 7 E402s waited for another angle, and
    # the log said "all 7 below medium: those go on to Green only when Red reports
    # max_findings (15) or fewer", which 7 is.
    lows = [Finding(f"F-{i:03d}", "low", f"E402 t{i}", f"m.py:{i}", "i", "x") for i in range(7)]
    why = findings.none_passed_why([], [], 15, waiting=lows)
    assert why == " (all 7 wait for a later cycle: this cycle's focus leaves them out)"
    many = [Finding(f"F-{i:03d}", "low", f"UP0{i} t", f"m.py:{i}", "i", "x") for i in range(20)]
    passed, held = sanitize(many, 15)
    assert "max_findings (15) or fewer" in findings.none_passed_why(passed, held, 15, waiting=lows)

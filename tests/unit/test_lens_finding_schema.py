"""Lens findings are checked by code: bad locations, values outside the schema and duplicates are
dropped with their reason; identities are stable; the fail_on gate and audit comparison."""

from __future__ import annotations

import hashlib

import pytest

from autoresearch.checks import finding_schema as fs
from autoresearch.checks.finding_schema import (
    DEBUG,
    FIX,
    PREDICT,
    SCENARIO,
    SECURITY,
    check,
    compare,
    drop_counts,
    finding_hash,
    gate,
    split_location,
)


@pytest.fixture
def worktree(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "views.py").write_text("import os\n\n\ndef run(cmd):\n    os.system(cmd)\n")
    (tmp_path / "README.md").write_text("one line without a newline at the end")
    return tmp_path


def security_finding(**overrides):
    finding = {
        "title": "Shell injection in run",
        "owasp": "A03",
        "stride": "T",
        "cwe": "CWE-78",
        "location": "app/views.py:5",
        "scenario": "a request parameter reaches os.system",
        "evidence": "os.system(cmd)",
        "confidence": "confirmed",
        "severity": "critical",
        "mitigation": "pass an argument list to subprocess.run",
    }
    finding.update(overrides)
    return finding


def test_check_accepts_a_complete_security_finding(worktree):
    accepted, dropped = check([security_finding()], SECURITY, worktree)
    assert dropped == []
    assert [(a.file, a.line) for a in accepted] == [("app/views.py", 5)]


def test_check_drops_a_finding_whose_file_does_not_exist(worktree):
    _, dropped = check([security_finding(location="app/models.py:3")], SECURITY, worktree)
    assert dropped[0].reason == "location does not exist: no file app/models.py"
    assert dropped[0].kind == "location"


def test_check_drops_a_finding_whose_line_is_past_the_end_of_the_file(worktree):
    _, dropped = check([security_finding(location="app/views.py:6")], SECURITY, worktree)
    assert dropped[0].reason == "location does not exist: app/views.py has 5 lines, not line 6"


def test_check_counts_the_last_line_of_a_file_without_a_final_newline(worktree):
    accepted, _ = check([security_finding(location="README.md:1")], SECURITY, worktree)
    assert len(accepted) == 1


@pytest.mark.parametrize(
    "location", ["../outside.py:1", "/etc/passwd:1", ".git/config:1", "app/views.py", "line 5"]
)
def test_check_drops_a_location_outside_the_worktree_or_without_a_line(worktree, location):
    (worktree.parent / "outside.py").write_text("x = 1\n")
    (worktree / ".git").mkdir()
    (worktree / ".git" / "config").write_text("[core]\n")
    _, dropped = check([security_finding(location=location)], SECURITY, worktree)
    assert dropped[0].kind == "location"
    assert dropped[0].reason.startswith("location does not exist")


def test_check_drops_a_finding_with_a_severity_outside_the_schema(worktree):
    _, dropped = check([security_finding(severity="urgent")], SECURITY, worktree)
    assert dropped[0].reason.startswith("severity 'urgent' not allowed")
    assert dropped[0].kind == "not-allowed"


def test_check_drops_a_finding_with_a_missing_required_field(worktree):
    finding = security_finding()
    del finding["mitigation"]
    _, dropped = check([finding, security_finding(evidence="  ")], SECURITY, worktree)
    assert [d.reason for d in dropped] == ["missing field 'mitigation'", "missing field 'evidence'"]


def test_check_drops_a_non_object(worktree):
    _, dropped = check(["just text"], SECURITY, worktree)
    assert dropped[0].kind == "shape"


def test_check_normalizes_owasp_stride_and_cwe_spellings(worktree):
    finding = security_finding(owasp="a03:2021-Injection", stride="Tampering", cwe="78")
    accepted, _ = check([finding], SECURITY, worktree)
    assert (accepted[0].finding["owasp"], accepted[0].finding["stride"]) == ("A03", "T")
    assert accepted[0].finding["cwe"] == "CWE-78"


def test_check_drops_an_unknown_owasp_id(worktree):
    _, dropped = check([security_finding(owasp="A11")], SECURITY, worktree)
    assert dropped[0].reason.startswith("owasp 'A11' not allowed")


def test_check_drops_a_repeat_within_one_batch_as_a_duplicate(worktree):
    first = security_finding()
    again = security_finding(title="  shell INJECTION in run!", location="./app/views.py:5")
    accepted, dropped = check([first, again], SECURITY, worktree)
    assert len(accepted) == 1
    assert dropped[0].reason == f"duplicate of {accepted[0].hash}"
    assert dropped[0].kind == "duplicate"


def test_check_drops_a_finding_seen_in_an_earlier_iteration_or_run(worktree):
    earlier, _ = check([security_finding()], SECURITY, worktree)
    accepted, dropped = check([security_finding()], SECURITY, worktree, {earlier[0].hash})
    assert accepted == []
    assert dropped[0].kind == "duplicate"


def test_check_keeps_the_same_title_at_another_line_as_a_variant(worktree):
    earlier, _ = check([security_finding()], SECURITY, worktree)
    accepted, dropped = check(
        [security_finding(location="app/views.py:4")],
        SECURITY,
        worktree,
        {earlier[0].hash},
        seen_titles={earlier[0].title_key},
    )
    assert dropped == []
    assert accepted[0].novelty == "variant"


def test_check_drops_a_finding_outside_the_scope(worktree):
    _, dropped = check([security_finding()], SECURITY, worktree, scope=["lib/*.py"])
    assert dropped[0].kind == "scope"
    accepted, _ = check([security_finding()], SECURITY, worktree, scope=["app/*.py"])
    assert len(accepted) == 1


def test_finding_hash_is_the_same_across_runs_and_spellings():
    # The documented formula, not Python's per-process salted hash(): stable across runs.
    key = "a03|app/views.py:5|shell injection in run"
    expected = hashlib.sha256(key.encode()).hexdigest()[:12]
    assert finding_hash("A03", "app/views.py:5", "Shell injection in run") == expected
    assert finding_hash("a03", "./app/views.py:5-7", "shell injection, in run") == finding_hash(
        "A03", "app/views.py:5", "Shell injection in run"
    )


def test_finding_hash_differs_by_category_location_and_title():
    base = finding_hash("A03", "a.py:1", "t")
    assert len({base, finding_hash("A01", "a.py:1", "t"), finding_hash("A03", "a.py:2", "t")}) == 3
    assert finding_hash("A03", "a.py:1", "u") != base


def test_split_location_reads_ranges_and_columns():
    assert split_location("src/a.py:12") == ("src/a.py", 12)
    assert split_location("`src/a.py:12-20`") == ("src/a.py", 12)
    assert split_location("src/a.py:12:5") == ("src/a.py", 12)
    assert split_location("src/a.py") == (None, None)


def test_scenario_findings_need_no_location_but_a_given_one_must_exist(worktree):
    situation = {
        "title": "Two users save the same record",
        "dimension": "concurrency",
        "actors": "two editors",
        "precondition": "both opened the record",
        "trigger": "both press save",
        "flow": "second write lands on the first",
        "expected": "the second save is refused",
        "what_can_go_wrong": "lost update",
        "severity": "high",
    }
    accepted, _ = check([situation], SCENARIO, worktree)
    assert len(accepted) == 1
    _, dropped = check([situation | {"location": "app/nothing.py:1"}], SCENARIO, worktree)
    assert dropped[0].kind == "location"


def test_scenario_dimension_must_be_one_of_the_twelve(worktree):
    situation = {"title": "t", "dimension": "vibes", "actors": "a", "precondition": "p"}
    situation |= {"trigger": "t", "flow": "f", "expected": "e", "what_can_go_wrong": "w"}
    _, dropped = check([situation | {"severity": "low"}], SCENARIO, worktree)
    assert dropped[0].reason.startswith("dimension 'vibes' not allowed")


def test_debug_verdict_accepts_new_lead_spelled_with_a_space(worktree):
    finding = {
        "title": "run passes user input to a shell",
        "category": "security",
        "location": "app/views.py:5",
        "hypothesis": "I think run is injectable because it calls os.system; test by ';'",
        "evidence": "os.system(cmd)",
        "verdict": "New Lead",
        "severity": "high",
    }
    accepted, _ = check([finding], DEBUG, worktree)
    assert accepted[0].finding["verdict"] == "new-lead"


def test_debug_and_predict_severities_exclude_info(worktree):
    predict = {
        "title": "t",
        "persona": "security",
        "category": "security",
        "location": "app/views.py:5",
        "evidence": "e",
        "severity": "info",
        "confidence": "high",
    }
    _, dropped = check([predict], PREDICT, worktree)
    assert dropped[0].kind == "not-allowed"


def test_fix_findings_carry_an_error_category(worktree):
    error = {"title": "F401 `os` imported but unused", "category": "lint"}
    error["location"] = "app/views.py:1"
    accepted, _ = check([error], FIX, worktree)
    assert accepted[0].finding["category"] == "lint"


def test_drop_counts_groups_the_reasons_by_kind(worktree):
    batch = [security_finding(severity="x"), security_finding(location="no.py:1"), "text"]
    _, dropped = check(batch, SECURITY, worktree)
    assert drop_counts(dropped) == {"not-allowed": 1, "location": 1, "shape": 1}


@pytest.mark.parametrize(
    "fail_on,verdict",
    [("critical", "PASSED"), ("high", "FAILED"), ("medium", "FAILED"), ("none", "PASSED")],
)
def test_gate_fails_when_a_finding_is_at_or_above_fail_on(fail_on, verdict):
    assert gate(["high", "low", "info"], fail_on) == verdict


def test_gate_refuses_an_unknown_threshold():
    with pytest.raises(ValueError, match="threshold 'severe' not allowed"):
        gate(["high"], "severe")


def test_compare_labels_new_recurring_and_fixed():
    assert compare({"a", "b"}, {"b", "c"}) == {"a": "new", "b": "recurring", "c": "fixed"}


@pytest.mark.parametrize(
    "tool,schema",
    [
        ("report_vulnerability", fs.SECURITY),
        ("report_bug", fs.DEBUG),
        ("report_situation", fs.SCENARIO),
        ("report_prediction", fs.PREDICT),
    ],
)
def test_a_lens_report_tool_takes_the_fields_of_its_finding_schema(tool, schema):
    """The tool spec is made from the schema: a field or allowed value the check knows is
    what the agent is told, in the schema's order; the harness's own fields are not asked."""
    from autoresearch.agents.tools import TOOL_SPECS

    said = {k: v["description"] for k, v in TOOL_SPECS[tool][1]["properties"].items()}
    assert list(said) == [f.name for f in schema.fields if f.asked]
    for f in schema.fields:
        if f.allowed and not f.says:
            assert said[f.name] == " | ".join(f.allowed)
    assert "persona" not in said

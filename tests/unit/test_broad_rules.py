"""Broad mode's rules without Snakemake: hypothesis sets, hypotheses.md, the spec check,
per-track stop rules, the winner, sequential tracks and status lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoresearch.modes.broad import Broad
from autoresearch.modes.broad.comparison import rank_key
from autoresearch.modes.broad.hypotheses import (
    Hypothesis,
    HypothesisError,
    parse_markdown,
    render_markdown,
    validate,
)
from autoresearch.session.spec import SessionSpec, SpecError

GIVEN = [
    {"id": "h1", "category": "obvious", "name": "guard", "statement": "Guard the inputs."},
    {"id": "h2", "category": "bold", "name": "drop", "statement": "Drop the helpers."},
    {"id": "h3", "category": "creative", "name": "markers", "statement": "Use markers."},
]


def hyp(hid: str, category: str) -> Hypothesis:
    return Hypothesis(hid, category, f"name {hid}", f"statement {hid}.")


def test_validate_accepts_three_required_categories():
    items = [hyp("h1", "obvious"), hyp("h2", "bold"), hyp("h3", "creative")]
    assert validate(items) == (items, [])


@pytest.mark.parametrize(
    "items, message",
    [
        ([hyp("h1", "obvious"), hyp("h2", "bold")], "only 2 hypotheses"),
        ([hyp("h1", "obvious"), hyp("h2", "bold"), hyp("h3", "adjacent")], "no creative"),
        ([hyp("h1", "obvious"), hyp("h2", "obvious"), hyp("h3", "wildcard")], "no bold and no"),
        ([hyp("h1", "obvious"), hyp("h1", "bold"), hyp("h3", "creative")], "used twice"),
        ([hyp("h1", "obvious"), hyp("h2", "bold"), hyp("h3", "silly")], "category 'silly'"),
        ([hyp("x1", "obvious"), hyp("h2", "bold"), hyp("h3", "creative")], "'x1'"),
    ],
)
def test_validate_rejects(items, message):
    with pytest.raises(HypothesisError, match=message):
        validate(items)


def test_validate_prunes_to_five_keeping_required_categories():
    items = [
        hyp("h1", "obvious"),
        hyp("h2", "adjacent"),
        hyp("h3", "wildcard"),
        hyp("h4", "adjacent"),
        hyp("h5", "obvious"),
        hyp("h6", "bold"),
        hyp("h7", "creative"),
    ]
    kept, notes = validate(items)
    assert [i.id for i in kept] == ["h1", "h2", "h3", "h6", "h7"]
    assert len(notes) == 2 and "h4" in notes[0] and "h5" in notes[1]


def test_validate_prunes_in_proposal_order():
    items = [
        hyp(f"h{n}", c)
        for n, c in enumerate(["obvious", "bold", "creative", "adjacent", "wildcard", "bold"], 1)
    ]
    kept, _ = validate(items)
    assert [i.id for i in kept] == ["h1", "h2", "h3", "h4", "h5"]


def test_markdown_round_trip():
    items = [hyp("h1", "obvious"), hyp("h2", "bold"), hyp("h3", "creative")]
    text = render_markdown("s", "Be fast.", items, "test", [])
    assert parse_markdown(text, "x.md") == items


def test_markdown_bad_heading_names_the_line():
    with pytest.raises(HypothesisError, match=r"x.md:3: expected"):
        parse_markdown("# H\n\n## h1 obvious name\nstatement\n", "x.md")


def base_values(**extra) -> dict:
    return {"mode": "broad", "agent": {"backend": "script"}, **extra}


def test_check_spec_needs_aspiration_or_hypotheses():
    with pytest.raises(SpecError, match="key 'aspiration'.*key 'hypotheses'"):
        Broad().setup.check_spec(base_values(), "s")
    Broad().setup.check_spec(base_values(aspiration="Be fast."), "s")
    Broad().setup.check_spec(base_values(hypotheses=GIVEN), "s")


def test_check_spec_validates_given_hypotheses():
    with pytest.raises(SpecError, match=r"s.yaml: key 'hypotheses': only 2"):
        Broad().setup.check_spec(base_values(hypotheses=GIVEN[:2]), "s")
    with pytest.raises(SpecError, match=r"hypotheses\[0\]: statement not set"):
        Broad().setup.check_spec(
            base_values(hypotheses=[{"id": "h1", "category": "bold", "name": "x"}]), "s"
        )


def test_check_spec_ruff_cannot_be_strategist():
    values = base_values(aspiration="Be fast.")
    values["agent"]["backend"] = "ruff"
    with pytest.raises(SpecError, match="cannot propose hypotheses"):
        Broad().setup.check_spec(values, "s")


class FakeEnv:
    """A track's cycle; `prev`: what differs in the previous cycle's decision.json from a
    broad decision as the loop writes it (tests/unit/decisions/broad.json)."""

    def __init__(self, tmp_path: Path, cycle: int, prev: dict | None, max_cycles=None):
        from autoresearch.session.files import write_json
        from autoresearch.session.layout import SessionLayout

        self.layout = SessionLayout(tmp_path)
        self.spec = SessionSpec({"max_cycles": max_cycles})
        self.cycle, self.track = cycle, "h1"
        if prev is not None:
            written = json.loads((Path(__file__).parent / "decisions" / "broad.json").read_text())
            write_json(self.layout.decision(cycle - 1, "h1"), written | prev)

    def finished(self, path: Path):
        return json.loads(path.read_text())


def decision(**extra) -> dict:
    d = {
        "fixed": [{"id": "F-001"}],
        "broken": False,
        "session_stop": None,
        "findings": 1,
        "skipped": [],
        "refactor_changes": 0,
        "commits_total": 1,
        "reverted": [],
        "cycle": 1,
    }
    d.update(extra)
    return d


@pytest.mark.parametrize(
    "cycle, prev, d, max_cycles, status, reason",
    [
        (1, None, decision(), None, "in-progress", None),
        (5, {"fixed": [1]}, decision(), None, "complete", "max_cycles reached (5 per track)"),
        (2, {"fixed": [1]}, decision(), 2, "complete", "max_cycles reached (2 per track)"),
        (2, {"fixed": []}, decision(fixed=[]), None, "complete", "two consecutive cycles"),
        (2, {"fixed": [1]}, decision(fixed=[]), None, "in-progress", None),
        (1, None, decision(broken=True), None, "aborted", "tests broke"),
        (1, None, decision(session_stop="budget spent"), None, "aborted", "budget spent"),
    ],
)
def test_track_stop_rules(tmp_path, cycle, prev, d, max_cycles, status, reason):
    Broad().apply_policy(FakeEnv(tmp_path, cycle, prev, max_cycles), d)
    assert d["track_status"] == status
    assert d["stop"] is (reason is not None)
    assert (d["reason"] or "").startswith(reason or "")


def result(hid: str, category: str, fixes: int, lines: int, ok: bool = True) -> dict:
    return {
        "id": hid,
        "category": category,
        "fixes_kept": fixes,
        "diff_lines": lines,
        "tests_pass": ok,
    }


def test_winner_most_fixes_then_less_obvious_then_smaller_diff():
    tracks = [
        result("h1", "obvious", 2, 5),
        result("h2", "bold", 2, 50),
        result("h3", "creative", 3, 90, ok=False),
        result("h4", "adjacent", 2, 1),
    ]
    assert [t["id"] for t in sorted(tracks, key=rank_key)] == ["h2", "h4", "h1", "h3"]
    tracks.append(result("h5", "creative", 2, 10))
    assert sorted(tracks, key=rank_key)[0]["id"] == "h5"


def fake_session(tmp_path: Path, **spec) -> Path:
    from autoresearch.session.layout import SessionLayout

    session = tmp_path / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "session.yaml").write_text(json.dumps({"mode": "broad", "teams": ["red"], **spec}))
    approved = {"aspiration": "x", "hypotheses": GIVEN, "approval": "auto", "pruned": []}
    (session / "hypotheses.json").write_text(json.dumps(approved))
    (session / "hypotheses.md").write_text(
        render_markdown("s", "x", [Hypothesis(**h) for h in GIVEN], "test", [])
    )
    return SessionLayout(session).root


def test_tracks_start_together_unless_parallel_is_false(tmp_path, monkeypatch):
    from scripts import broad as broad_rules

    monkeypatch.chdir(tmp_path)
    fake_session(tmp_path)
    assert broad_rules.red_inputs("s", "h2", 1) == [
        "sessions/s/session.yaml",
        "sessions/s/tracks/h2/track.json",
    ]
    (tmp_path / "sessions/s/session.yaml").write_text(
        json.dumps({"mode": "broad", "teams": ["red"], "parallel": False})
    )
    assert broad_rules.red_inputs("s", "h2", 1)[-1] == "sessions/s/tracks/h1/result.json"
    assert broad_rules.red_inputs("s", "h1", 1) == [
        "sessions/s/session.yaml",
        "sessions/s/tracks/h1/track.json",
    ]
    assert broad_rules.red_inputs("s", "h2", 2)[-1] == "sessions/s/cycles/h2/001/decision.json"


def test_status_lines_show_tracks_and_pending_approval(tmp_path, monkeypatch):
    from autoresearch.session.layout import SessionLayout

    monkeypatch.chdir(tmp_path)
    layout = SessionLayout(fake_session(tmp_path))
    lines = Broad().views.status_lines(layout, SessionSpec({"approve": "auto"}))
    assert any("| h1 | obvious | guard |" in line and "not-started" in line for line in lines)
    (layout.root / "hypotheses.json").unlink()
    lines = Broad().views.status_lines(layout, SessionSpec({"approve": "manual"}))
    assert any("awaiting approval" in line for line in lines)
    assert lines[-1].startswith("waiting for approval: edit sessions/s/hypotheses.md")
    assert "create sessions/s/approved" in lines[-1]


def full_result(hid: str, category: str, fixes: int, lines: int, tree: str) -> dict:
    """A track's result.json as end_track writes it, enough for comparison.md."""
    return result(hid, category, fixes, lines) | {
        "name": f"name {hid}",
        "statement": f"statement {hid}.",
        "branch": f"autoresearch/broad/s/{hid}",
        "status": "complete",
        "reason": "cap reached",
        "cycles": 1,
        "commits": fixes,
        "files_changed": ["calc.py"],
        "refactor_changes": 0,
        "reverted": 0,
        "skipped": 0,
        "findings": fixes,
        "fixed": [],
        "test_summary": "2 passed",
        "tree": tree,
    }


def comparison_text(tracks: list[dict]) -> tuple[dict, str]:
    from autoresearch.modes.broad.comparison import ranking, render_comparison

    data = ranking(tracks, "/repo")
    ranked = [data["tracks"][hid] for hid in data["ranking"]]
    return data, render_comparison("s", "x", "abc", "/repo", ranked, data)


def test_comparison_calls_a_tie_break_a_tie_and_names_the_criterion():
    data, text = comparison_text(
        [full_result("h1", "obvious", 2, 5, "t1"), full_result("h2", "bold", 2, 9, "t2")]
    )
    assert data["decided_by"]["tie"] is True
    assert "Chosen by: tie on fixes kept, decided by category (h2 over h1)." in text


def test_comparison_says_a_real_lead_is_no_tie():
    data, text = comparison_text(
        [full_result("h1", "obvious", 3, 5, "t1"), full_result("h2", "bold", 2, 9, "t2")]
    )
    assert data["decided_by"] == {
        "criterion": "fixes kept",
        "tie": False,
        "text": "decided by fixes kept (h1 over h2)",
    }
    assert "tie" not in text.split("## Winner")[1].split("## Merge")[0]


def test_comparison_decided_by_proposal_order_names_every_tied_criterion():
    _, text = comparison_text(
        [full_result("h1", "bold", 2, 5, "t1"), full_result("h2", "bold", 2, 5, "t2")]
    )
    expected = "tie on fixes kept, category and diff size, decided by proposal order (h1 over h2)"
    assert expected in text


def test_comparison_reports_tracks_that_ended_on_the_same_tree():
    data, text = comparison_text(
        [
            full_result("h1", "obvious", 2, 5, "same"),
            full_result("h2", "bold", 2, 5, "same"),
            full_result("h3", "creative", 1, 5, "other"),
        ]
    )
    assert data["same_trees"] == [["h2", "h1"]]
    assert "h2 and h1 ended on the same tree" in text
    assert "h3 ended on the same tree" not in text

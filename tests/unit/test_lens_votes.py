"""The predict vote: merging, labels for a scripted vote table, priority, groupthink and the
devil's-advocate rule."""

from __future__ import annotations

import pytest

from autoresearch.checks.votes import (
    DEVILS_ADVOCATE,
    Position,
    Proposal,
    check_devils_advocate,
    devils_advocate_action,
    groupthink,
    hypothesis_queue,
    label,
    merge,
    positions,
    priority,
    tally,
)

PERSONAS = ["architecture", "security", "performance", "reliability", DEVILS_ADVOCATE]
CONFIRM, DISPUTE, ABSTAIN = Position("confirm"), Position("dispute"), Position("abstain")


def proposal(persona, title="Unbounded cache", location="app/cache.py:10", **kw):
    return Proposal(
        persona, title, location, kw.get("severity", "high"), kw.get("confidence", "medium")
    )


def test_merge_joins_the_same_place_and_title_from_several_personas():
    merged = merge(
        [
            proposal("architecture", severity="medium", confidence="low"),
            proposal("performance", title="unbounded  CACHE.", location="./app/cache.py:10"),
            proposal("security", title="Unbounded cache", location="app/cache.py:11"),
        ]
    )
    assert len(merged) == 2
    first = merged[0]
    assert first.raised_by == ("architecture", "performance")
    assert (first.severity, first.confidence) == ("high", "medium")


# A scripted vote table for five personas: (confirmations, disputes) -> label.
VOTE_TABLE = [
    (5, 0, "confirmed"),
    (3, 2, "confirmed"),
    (2, 0, "probable"),
    (2, 2, "probable"),
    (2, 3, "discarded"),
    (1, 0, "minority"),
    (1, 2, "minority"),
    (1, 3, "discarded"),
    (0, 0, "discarded"),
]


@pytest.mark.parametrize("confirmations,disputes,expected", VOTE_TABLE)
def test_label_of_a_five_persona_vote(confirmations, disputes, expected):
    assert label(confirmations, disputes, 5) == expected


@pytest.mark.parametrize(
    "confirmations,personas,expected",
    [(2, 3, "confirmed"), (1, 3, "minority"), (2, 4, "probable"), (4, 8, "probable")],
)
def test_label_scales_with_the_number_of_personas(confirmations, personas, expected):
    assert label(confirmations, 0, personas) == expected


def test_tally_labels_each_finding_from_the_last_stated_positions():
    merged = merge([proposal("security"), proposal("architecture", title="God object")])
    cache, god = merged[0].id, merged[1].id
    round_1 = {
        "architecture": {cache: CONFIRM, god: CONFIRM},
        "security": {cache: CONFIRM, god: DISPUTE},
        "performance": {cache: CONFIRM, god: DISPUTE},
        "reliability": {cache: DISPUTE, god: DISPUTE},
        DEVILS_ADVOCATE: {cache: DISPUTE, god: ABSTAIN},
    }
    round_2 = {"reliability": {cache: Position("revise", "medium")}}
    votes = {v.finding.title: v for v in tally(merged, PERSONAS, [round_1, round_2])}
    assert (votes["Unbounded cache"].confirmations, votes["Unbounded cache"].label) == (
        4,
        "confirmed",
    )
    assert votes["God object"].label == "discarded"
    assert votes["Unbounded cache"].severity == "high"


def test_tally_severity_is_the_median_of_the_confirmers_views():
    merged = merge([proposal("security", severity="critical")])
    fid = merged[0].id
    revised = {
        "architecture": {fid: Position("revise", "low")},
        "performance": {fid: Position("revise", "medium")},
    }
    (vote,) = tally(merged, PERSONAS, [revised])
    assert vote.severity == "medium"


def test_tally_ranks_by_priority():
    merged = merge(
        [
            proposal("security", title="a", severity="low", confidence="low"),
            proposal("security", title="b", severity="critical", confidence="high"),
        ]
    )
    assert [v.finding.title for v in tally(merged, PERSONAS, [])] == ["b", "a"]


def test_priority_weighs_severity_confidence_and_consensus():
    assert priority("critical", "high", 1.0) == 1.0
    assert priority("info", "low", 0.0) == 0.0
    assert priority("medium", "medium", 0.6) == pytest.approx(0.4 * 0.5 + 0.2 * 0.5 + 0.4 * 0.6)


def test_positions_before_the_debate_are_the_raisers_only():
    merged = merge([proposal("security")])
    state = positions(merged, PERSONAS, [])[merged[0].id]
    assert [p for p, pos in state.items() if pos.agrees] == ["security"]


def test_position_refuses_an_unknown_stance():
    with pytest.raises(ValueError, match="stance 'maybe' not allowed"):
        Position("maybe")


def test_hypothesis_queue_leaves_out_discarded_findings():
    merged = merge([proposal("security", title="kept"), proposal("security", title="dropped")])
    dropped = merged[1].id
    round_1 = {"security": {dropped: DISPUTE}}
    assert [v.finding.title for v in hypothesis_queue(tally(merged, PERSONAS, [round_1]))] == [
        "kept"
    ]


def test_groupthink_warns_when_nearly_every_dissenter_flips_in_one_round():
    merged = merge([proposal("security", title=t) for t in ("a", "b")])
    a, b = (m.id for m in merged)
    round_1 = {p: {a: DISPUTE, b: DISPUTE} for p in PERSONAS if p != "security"}
    round_2 = {p: {a: CONFIRM, b: CONFIRM} for p in PERSONAS if p != "security"}
    assert groupthink(merged, PERSONAS, [round_1, round_2]) == [
        "groupthink in round 2: 8 of 8 disputing positions flipped to agree"
    ]


def test_groupthink_is_quiet_when_dissent_survives():
    merged = merge([proposal("security", title=t) for t in ("a", "b")])
    a, b = (m.id for m in merged)
    round_1 = {p: {a: DISPUTE, b: DISPUTE} for p in PERSONAS if p != "security"}
    round_2 = {p: {a: CONFIRM} for p in ("architecture", "performance", "reliability")}
    assert groupthink(merged, PERSONAS, [round_1, round_2]) == []


def majority_round(advocate_disputes: int):
    """Four findings every other persona confirms; the devil's advocate disputes some of them."""
    fids = ["f1", "f2", "f3", "f4"]
    debate_round = {p: dict.fromkeys(fids, CONFIRM) for p in PERSONAS if p != DEVILS_ADVOCATE}
    debate_round[DEVILS_ADVOCATE] = {
        fid: DISPUTE if i < advocate_disputes else CONFIRM for i, fid in enumerate(fids)
    }
    return debate_round


def test_devils_advocate_disputing_half_the_majority_is_accepted():
    check = check_devils_advocate(majority_round(2))
    assert (check.ok, check.required, len(check.majority)) == (True, 2, 4)
    assert devils_advocate_action(check, attempt=1) == "accept"


def test_devils_advocate_disputing_too_little_is_retried_once():
    check = check_devils_advocate(majority_round(1))
    assert not check.ok
    assert devils_advocate_action(check, attempt=1) == "retry"
    assert devils_advocate_action(check, attempt=2) == "accept-noncompliant"


def test_devils_advocate_has_nothing_to_dispute_without_a_majority():
    debate_round = {"security": {"f1": CONFIRM}, "architecture": {"f1": DISPUTE}}
    debate_round |= {"performance": {"f1": DISPUTE}, DEVILS_ADVOCATE: {}}
    assert check_devils_advocate(debate_round).ok

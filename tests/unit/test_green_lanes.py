"""Which findings parallel Green works on together, and in which lane (green_lanes)."""

from __future__ import annotations

from types import SimpleNamespace

from autoresearch.engine.findings import Finding
from autoresearch.engine.green_lanes import LaneEnv, deal, file_groups, named_files

TRACKED = frozenset({"a.py", "b.py", "c.py", "pkg/d.py"})


def finding(fid: str, location: str, issue: str = "issue", title: str = "") -> Finding:
    return Finding(fid, "medium", title or f"title {fid}", location, issue, "impact")


def ids(groups: list[list[Finding]]) -> list[list[str]]:
    return [[f.id for f in group] for group in groups]


def test_findings_of_one_file_are_one_group_in_finding_order_and_groups_by_first_finding():
    found = [
        finding("F-001", "a.py:3"),
        finding("F-002", "b.py:10"),
        finding("F-003", "a.py:40-42"),
        finding("F-004", "c.py"),
    ]
    assert ids(file_groups(found, TRACKED)) == [["F-001", "F-003"], ["F-002"], ["F-004"]]


def test_a_tracked_file_a_findings_text_names_joins_its_group_to_that_files():
    found = [
        finding("F-001", "a.py:3"),
        finding("F-002", "b.py:10", issue="It calls the helper in pkg/d.py."),
        finding("F-003", "pkg/d.py:1"),
        # A word that is no tracked file names none (`a.pyc`, `x.py`).
        finding("F-004", "c.py:2", issue="Like x.py and a.pyc, it leaks."),
    ]
    assert named_files(found[1], TRACKED) == {"b.py", "pkg/d.py"}
    assert ids(file_groups(found, TRACKED)) == [["F-001"], ["F-002", "F-003"], ["F-004"]]


def test_groups_joined_through_a_chain_of_shared_files_are_one():
    found = [
        finding("F-001", "a.py:1"),
        finding("F-002", "b.py:1"),
        finding("F-003", "c.py:1", title="c.py and b.py disagree"),
        finding("F-004", "a.py:9", issue="and so does c.py"),
    ]
    assert ids(file_groups(found, TRACKED)) == [["F-001", "F-002", "F-003", "F-004"]]


def test_a_finding_naming_no_file_is_a_group_of_its_own():
    found = [finding("F-001", "a.py:1"), finding("F-002", ""), finding("F-003", "")]
    assert ids(file_groups(found, TRACKED)) == [["F-001"], ["F-002"], ["F-003"]]


def test_each_group_goes_to_the_lane_with_the_fewest_findings_so_far():
    groups = [[finding("F-001", "a")] * 3, [finding("F-002", "b")], [finding("F-003", "c")] * 2]
    groups += [[finding("F-004", "d")], [finding("F-005", "e")]]
    assert deal(groups, 2) == ["g1", "g2", "g2", "g1", "g2"]  # loads 3|1, 3|3, 4|3, 4|4
    assert deal(groups, 1) == ["g1"] * 5
    assert deal([], 3) == []


def lanes(tmp_path, **spec) -> list[LaneEnv]:
    spec = SimpleNamespace(**{"agent": {}, "stage_budget_usd": None, "budget_usd": None, **spec})
    layout = SimpleNamespace(root=tmp_path)  # no usage.tsv: nothing spent yet
    shares = [5 / 12, 4 / 12, 3 / 12]
    return [
        LaneEnv(layout=layout, spec=spec, record=None, cycle=1, lane=f"g{i}", share=share)
        for i, share in enumerate(shares, 1)
    ]


def test_the_lanes_limits_are_their_share_of_the_stages_and_never_more_together(tmp_path):
    agent = {"max_turns": 10, "stage_timeout_s": 600}
    limits = [lane.limits() for lane in lanes(tmp_path, agent=agent, stage_budget_usd=1.0)]
    assert [lim.max_turns for lim in limits] == [4, 3, 2]
    assert sum(lim.max_cost_usd for lim in limits) <= 1.0 + 1e-9
    # Time is not shared: the lanes run side by side.
    assert {lim.deadline_s for lim in limits} == {600}


def test_lanes_side_by_side_may_spend_only_their_shares_of_the_sessions_budget(tmp_path):
    limits = [lane.limits() for lane in lanes(tmp_path, budget_usd=0.6)]
    assert [round(lim.max_cost_usd, 6) for lim in limits] == [0.25, 0.2, 0.15]
    both = [lane.limits() for lane in lanes(tmp_path, budget_usd=0.6, stage_budget_usd=0.12)]
    assert [round(lim.max_cost_usd, 6) for lim in both] == [0.05, 0.04, 0.03]


def test_with_turns_per_finding_no_lane_gets_a_share_of_the_stages_turns(tmp_path):
    # Each conversation has its findings' own turns (teams.fix_findings): a lane's share of
    # the stage's max_turns would cut a finding short that a single Green would finish.
    agent = {"max_turns": 10, "max_turns_per_finding": 6, "stage_timeout_s": 600}
    limits = [lane.limits() for lane in lanes(tmp_path, agent=agent, stage_budget_usd=1.0)]
    assert [lim.max_turns for lim in limits] == [10, 10, 10]
    assert sum(lim.max_cost_usd for lim in limits) <= 1.0 + 1e-9  # money is still shared

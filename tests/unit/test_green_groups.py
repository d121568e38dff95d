"""Which findings share a Green conversation (teams.conversation_groups)."""

from __future__ import annotations

from autoresearch.engine.findings import Finding
from autoresearch.engine.teams import conversation_groups


def finding(fid: str, location: str) -> Finding:
    return Finding(fid, "medium", f"title {fid}", location, "issue", "impact")


FOUND = [
    finding("F-001", "a.py:3"),
    finding("F-002", "b.py:10"),
    finding("F-003", "a.py:40-42"),
    finding("F-004", "a.py"),
    finding("F-005", "b.py:1"),
]


def ids(groups: list[list[Finding]]) -> list[list[str]]:
    return [[f.id for f in group] for group in groups]


def test_findings_of_one_file_share_a_conversation_up_to_the_size_in_the_order_first_seen():
    assert ids(conversation_groups(FOUND, 2)) == [
        ["F-001", "F-003"],
        ["F-004"],
        ["F-002", "F-005"],
    ]


def test_size_one_gives_each_finding_its_own_conversation_and_none_keeps_one_for_all():
    assert ids(conversation_groups(FOUND, 1)) == [
        ["F-001"],
        ["F-003"],
        ["F-004"],
        ["F-002"],
        ["F-005"],
    ]
    assert ids(conversation_groups(FOUND, None)) == [[f.id for f in FOUND]]
    assert conversation_groups([], 1) == conversation_groups([], None) == []

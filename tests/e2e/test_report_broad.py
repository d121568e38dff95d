"""The report of the broad demo holds that session's files (see report_pages.py)."""

from __future__ import annotations

import pytest
from report_pages import (
    Demo,
    assert_report_holds_the_session,
    cycle_documents,
    demo_workflow,
    run_demo,
    session_pages,
)


@pytest.fixture(scope="module")
def broad(tmp_path_factory) -> Demo:
    return run_demo(demo_workflow(tmp_path_factory), "demo-broad", max_cycles=1)


def test_broad_demo_report_holds_the_comparison_and_every_tracks_cycles(broad):
    documents = cycle_documents(broad.session)
    tracks = {step.split("-")[0] for step in documents}
    assert tracks == {"h1", "h2", "h3"}
    comparison = broad.path("comparison.md")
    assert set(broad.report.results) == session_pages(broad, list(documents)) | {comparison}
    assert broad.report.files[comparison] == (broad.session / "comparison.md").read_bytes()
    assert_report_holds_the_session(broad, documents)
    page = broad.report.results[broad.path("report", "evaluations", "h2-001.html")]
    assert page["labels"] == {"evaluation": "h2, cycle 001"}


def test_broad_demo_landing_page_states_each_tracks_stop_and_tests(broad):
    text = broad.report.description
    assert "<strong>Mode:</strong> broad" in text
    stopped = text.split("<strong>Stopped:</strong> ", 1)[1].split("</li>", 1)[0]
    assert [part.split(":", 1)[0] for part in stopped.split("; ")] == ["h1", "h2", "h3"]


def test_broad_demo_ranks_by_its_aspiration_metric_and_calls_identical_tips_a_tie(broad):
    text = (broad.session / "comparison.md").read_text()
    assert "## Aspiration metric" in text and "(ruff findings, minimize)" in text
    base = text.split("| base | ", 1)[1].split(" |", 1)[0]
    assert float(base) > 0  # the demo project starts with ruff findings
    chosen = text.split("Chosen by: ", 1)[1].split("\n", 1)[0]
    # The ruff backend's tracks make the same fixes: the metric cannot tell them apart.
    assert chosen.startswith("tie on the aspiration metric"), chosen

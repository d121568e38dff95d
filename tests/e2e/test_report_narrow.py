"""The report of the narrow demo holds that session's files (see report_pages.py)."""

from __future__ import annotations

import json

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
def narrow(tmp_path_factory) -> Demo:
    return run_demo(demo_workflow(tmp_path_factory), "demo-narrow", max_cycles=2)


def test_narrow_demo_report_holds_the_goal_progress_plot_and_its_session(narrow):
    documents = cycle_documents(narrow.session)
    plot = narrow.path("goal-progress.png")
    assert set(narrow.report.results) == session_pages(narrow, list(documents)) | {plot}
    assert narrow.report.files[plot] == (narrow.session / "goal-progress.png").read_bytes()
    assert_report_holds_the_session(narrow, documents)


def test_narrow_demo_landing_page_states_the_goal_metric_before_and_after(narrow):
    baseline = json.loads((narrow.session / "baseline.json").read_text())["value"]
    decisions = sorted((narrow.session / "cycles").glob("*/decision.json"))
    after = json.loads(decisions[-1].read_text())["narrow"]["current"]
    line = f"<strong>Metric:</strong> lint warnings: before {baseline:g}, after {after:g}"
    assert f"{line} (target &lt;= 8)</li>" in narrow.report.description
    assert "<strong>Mode:</strong> narrow" in narrow.report.description

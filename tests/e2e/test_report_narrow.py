"""The narrow demo's session, run once: its report holds the session's files (see
report_pages.py), and finalize splits it into sets each tested and named by the metric."""

from __future__ import annotations

import json

import pytest
from conftest import Workflow
from report_pages import (
    Demo,
    assert_report_holds_the_session,
    cycle_documents,
    demo_workflow,
    run_demo,
    session_pages,
)
from test_finalize import finalize, review_branches

from autoresearch.safety import git as harness_git


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


@pytest.fixture(scope="module")
def finalized(narrow):
    """finalize run on the narrow demo once its report is made (finalize writes only under
    the session's review/ folder, which the report does not hold)."""
    workflow = Workflow(narrow.session.parent.parent)
    target = workflow.workdir / "sessions" / "_examples" / "demo-project"
    before = harness_git.snapshot(target)
    return workflow, target, before, finalize(workflow, narrow.session.name)


def test_finalize_on_a_narrow_session_tests_each_set_and_names_the_metric(finalized):
    wf, target, before, proc = finalized
    name = "demo-narrow"
    assert proc.returncode == 0, proc.stderr + proc.stdout
    record = json.loads((wf.session(name) / "review" / "branches.json").read_text())
    assert len(record["sets"]) >= 2
    assert set(review_branches(target, name)) == {e["branch"] for e in record["sets"]}
    for entry in record["sets"]:
        assert entry["tests_ok"] is True
        md = (wf.session(name) / "review" / f"{entry['number']}.md").read_text()
        assert "Goal of the session: lint warnings <= 8." in md
        assert "measurement: lint warnings:" in md
        assert "- On this branch: 7 passed" in md
    assert harness_git.snapshot(target) == before

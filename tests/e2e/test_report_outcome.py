"""The report's landing page tells how the session ended: the sweep demo, run, reported,
finalized and reported again, its report read as files and opened in headless Chromium
(bench/bench_report_browser.py; those tests skip without a Chromium, and fail without one
where AUTORESEARCH_BROWSER_REQUIRED is set, as .ci/run sets it where it installed one)."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import BIN, ROOT, Workflow, git, missing
from report_pages import (
    DEMO_TIMEOUT,
    Demo,
    Report,
    assert_report_holds_the_session,
    cycle_documents,
    demo_workflow,
    make_report,
    session_pages,
)

from autoresearch.views.session_report import markdown_html

sys.path.insert(0, str(ROOT / "bench"))
import bench_report_browser as browser  # noqa: E402

BROWSER_REQUIRED = "AUTORESEARCH_BROWSER_REQUIRED"
LINK = re.compile(r"results\[&quot;(.+?)&quot;\]")


@dataclass
class Finalized:
    workflow: Workflow
    before: Demo  # the report as the session left it
    after: Demo  # the report once `autoresearch finalize` made its review sets
    page: Path  # the same, as one HTML file, for the browser
    dry_run: str  # `snakemake -n sessions/demo/done` after finalize


@pytest.fixture
def chromium() -> str:
    found = browser.browser()
    if found is None:
        missing("no Chromium (apt-get install chromium)", BROWSER_REQUIRED)
    return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Finalized:
    workflow = demo_workflow(tmp_path_factory)
    spec = yaml.safe_load((ROOT / "config" / "sessions" / "demo.yaml").read_text())
    workflow.run("demo", {**spec, "max_cycles": 2}, timeout=DEMO_TIMEOUT)
    session = workflow.session("demo")
    before = Demo(session, make_report(workflow, "demo"))
    subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "finalize", "demo"],
        cwd=workflow.workdir,
        env=workflow.env(),
        check=True,
        capture_output=True,
        timeout=600,
    )
    dry_run = workflow.run("demo", None, "-n").stdout
    after = Demo(session, make_report(workflow, "demo"))
    page = workflow.workdir / "report.html"
    workflow.run("demo", None, "--report", str(page), timeout=600)
    return Finalized(workflow, before, after, page, dry_run)


# --- the report as the session left it (moved from test_report.py: one demo run serves both)


@pytest.fixture
def sweep(demo) -> Demo:
    return demo.before


def test_sweep_demo_report_holds_session_md_results_every_cycle_and_the_plot(sweep):
    documents = cycle_documents(sweep.session)
    assert len(documents) >= 2
    assert set(sweep.report.results) == session_pages(sweep, list(documents))
    assert_report_holds_the_session(sweep, documents)
    assert sweep.report.files[sweep.path("report", "cycles.png")].startswith(b"\x89PNG")


def test_report_lists_a_sessions_files_under_its_name_with_captions(sweep):
    for path, entry in sweep.report.results.items():
        assert entry["caption"].strip(), path
    session = sweep.report.results[sweep.path("report", "session.html")]
    assert "sessions/demo/session.md" in session["caption"]
    assert sweep.report.results[sweep.path("report", "evaluations", "001.html")]["labels"] == {
        "evaluation": "cycle 001"
    }


def test_report_opens_with_the_workflow_description(sweep):
    assert "agents find problems in a target git repository" in sweep.report.description
    assert "<strong>evaluations</strong>" in sweep.report.description


def test_report_shows_each_rules_run_block_and_its_job_function(sweep):
    code = sweep.report.code_of("red")
    assert code.startswith("scripts.cycle.red(wildcards, input, output, log)")
    assert "# scripts/cycle.py" in code and "def red(wildcards" in code
    assert "def session_report(wildcards" in sweep.report.code_of("session_report")


def done_line(demo: Demo, key: str) -> str:
    """A line of the session's `done` file: `stopped: ...`, `fixes kept: ...`."""
    text = (demo.session / "done").read_text()
    return re.search(rf"^{key}: (.*)$", text, re.M).group(1)


def links(report: Report) -> list[str]:
    return LINK.findall(report.description)


def test_the_landing_page_states_how_the_session_ended(demo):
    text = demo.before.report.description
    kept = done_line(demo.before, "fixes kept")
    stopped = done_line(demo.before, "stopped")
    for line in (
        "<h2>Session demo: the outcome</h2>",
        "<strong>Mode:</strong> sweep",
        f"<strong>Stopped:</strong> {html.escape(stopped)}, after 2 cycles",
        f"<strong>Kept:</strong> {kept} fixes kept over 2 cycles",
        "<strong>Tests:</strong> before: 7 passed; after: pass (7 passed)",
        "<strong>Metric:</strong> none",
        "<strong>Cost:</strong> nothing: no model was called",  # keyless: never "$0"
        "none yet: <code>autoresearch finalize demo</code>",
    ):
        assert line in text
    assert text.index("the outcome") < text.index("agents find problems")  # the outcome first


def test_each_outcome_link_names_a_page_of_the_report(demo):
    for state in (demo.before, demo.after):
        named = links(state.report)
        assert named and set(named) <= set(state.report.results)
    evaluations = [demo.before.path("report", "evaluations", f"{n}.html") for n in ("001", "002")]
    assert links(demo.before.report) == evaluations


def test_finalize_adds_its_review_sets_to_the_report_and_the_session_stays_done(demo):
    assert "Nothing to be done" in demo.dry_run
    review = demo.after.session / "review"
    numbers = sorted(int(p.stem) for p in review.glob("*.md"))
    assert numbers
    pages = [demo.after.path("report", "outcome", f"review-{n}.html") for n in numbers]
    assert links(demo.after.report)[-len(pages) :] == pages
    for n, path in zip(numbers, pages, strict=True):
        assert demo.after.report.results[path]["labels"] == {"review set": str(n)}
        heading = markdown_html((review / f"{n}.md").read_text().splitlines()[0])
        assert heading in demo.after.report.files[path].decode()
    assert "autoresearch finalize demo</code> makes them" not in demo.after.report.description


def test_a_cycles_page_holds_the_diff_of_each_fix_it_kept(demo):
    target = Path(yaml.safe_load((demo.before.session / "setup.json").read_text())["target"])
    decision = demo.workflow.decision("demo", 1)
    assert decision["fixed"]
    page = demo.before.report.files[demo.before.path("report", "evaluations", "001.html")]
    text = page.decode()
    for fix in decision["fixed"]:
        assert f"<code>{fix['commit'][:12]}</code>" in text
        diff = git(target, "show", "--format=", fix["commit"])
        removed = [line for line in diff.splitlines() if line.startswith("-") and line[1:2] != "-"]
        assert removed and all(html.escape(line) in text for line in removed)


def test_the_report_in_a_browser_shows_the_outcome_loads_every_image_and_opens_every_link(
    demo, chromium
):
    seen = browser.view(demo.page, chromium)
    assert seen.problems() == []
    (text, in_view), *_ = seen.outcome
    assert in_view and "Mode: sweep" in text and "Cost: nothing: no model was called" in text
    assert seen.images[demo.after.path("report", "cycles.png")][0] > 0
    assert [path for _, path, _ in seen.opened] == links(demo.after.report)


def test_the_browser_check_sees_a_broken_image_a_hidden_outcome_and_a_dead_link(tmp_path, chromium):
    page = tmp_path / "report.html"
    page.write_text(
        '<html><body><div class="autoresearch-outcome" style="margin-top: 5000px">'
        "Mode: sweep <a href=\"javascript:void(results['x'])\">cycle 001</a></div>"
        '<script>var results = {"a.png": {"mime_type": "image/png", '
        '"data_uri": "data:image/png;base64,AAAA"}};</script></body></html>'
    )
    problems = browser.view(page, chromium).problems()
    assert "image does not load: a.png" in problems
    assert "outcome out of view: Mode: sweep cycle 001" in problems
    assert any(p.startswith("link does not open its page: cycle 001") for p in problems)


@pytest.mark.parametrize("required", ["", "1"])
def test_without_chromium_the_browser_tests_skip_unless_a_browser_is_required(tmp_path, required):
    # This file's browser check, run where no Chromium is on the PATH: a skip passes CI
    # unseen, so where .ci/run installed one (and set the variable) its absence fails.
    env = {**os.environ, "PATH": BIN, BROWSER_REQUIRED: required}
    env.pop("PYTEST_XDIST_WORKER", None)
    test = (
        f"{__file__}::test_the_browser_check_sees_a_broken_image_a_hidden_outcome_and_a_dead_link"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsf", test]
        + [f"--basetemp={tmp_path / 'inner'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if required:
        assert run.returncode == 1, run.stdout  # an error in the test's set-up
        assert "1 error" in run.stdout and "skipped" not in run.stdout
        assert f"no Chromium (apt-get install chromium); {BROWSER_REQUIRED} is set" in run.stdout
    else:
        assert run.returncode == 0, run.stdout
        assert "1 skipped" in run.stdout and "no Chromium (apt-get install chromium)" in run.stdout

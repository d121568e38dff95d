"""The report a user opens: `snakemake --report` of the sweep demo holds that session's files
(the narrow and broad demos: test_report_narrow.py, test_report_broad.py), and an experiment
session's report holds its own."""

from __future__ import annotations

import pytest
from conftest import Workflow, make_repo
from report_pages import (
    Demo,
    assert_report_holds_the_session,
    cycle_documents,
    demo_workflow,
    make_report,
    run_demo,
    session_pages,
)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Demo:
    return run_demo(demo_workflow(tmp_path_factory), "demo")


# --- each demo -------------------------------------------------------------------------


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


# --- an experiment session (no bundled demo yet) ------------------------------------------

PROGRAM = """# Fewer steps

```yaml
target_file: fast.py
eval_command: python measure.py
metric_key: ops
direction: minimize
max_experiments: 2
experiment_timeout: 30
```
"""
MEASURE = "import json\nimport fast\n\nprint(json.dumps({'ops': fast.steps()}))\n"


def experiment_change(n: int, hypothesis: str) -> list[dict]:
    content = f"def steps():\n    return {n}\n"
    return [
        {"tool": "write_file", "args": {"path": "fast.py", "content": content}},
        {
            "tool": "finish_experiment",
            "args": {"hypothesis": hypothesis, "change_summary": f"steps() returns {n}"},
        },
    ]


def test_experiment_session_report_holds_its_report_plot_and_every_iteration(tmp_path):
    target = make_repo(
        tmp_path / "target",
        {
            "fast.py": "def steps():\n    return 1000\n",
            "measure.py": MEASURE,
            "tests/test_fast.py": "from fast import steps\n\n\ndef test_steps():\n"
            "    assert steps() > 0\n",
            "program.md": PROGRAM,
        },
    )
    workflow = Workflow(tmp_path / "work")
    script = {"experiment": {1: experiment_change(800, "Halve"), 2: experiment_change(900, "Add")}}
    spec = {
        "mode": "experiment",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "experiment": {"program": "program.md", "cooldown_s": 0},
        "agent": {
            "backend": "script",
            "script": str(workflow.script(script)),
            "transcript": str(workflow.workdir / "transcript.jsonl"),
        },
    }
    workflow.run("e", spec)
    demo = Demo(workflow.session("e"), make_report(workflow, "e"))
    documents = {
        f"{n:03d}": demo.session / "iterations" / f"{n:03d}" / "evaluation.md" for n in (1, 2)
    }
    own = {demo.path("report.md"), demo.path("progress.png")}
    assert set(demo.report.results) == session_pages(demo, list(documents)) | own
    assert_report_holds_the_session(demo, documents)
    results = demo.report.files[demo.path("report", "results.html")].decode()
    assert "1 changes kept over 2 cycle(s)" in results
    # The landing page: the metric at the baseline and the best kept, in its direction.
    assert "<strong>Metric:</strong> ops: before 1000, after 800 (minimize)" in (
        demo.report.description
    )
    assert "<strong>Kept:</strong> 1 changes kept over 2 cycles" in demo.report.description

"""The report a user opens: an experiment session's report holds its own files (the sweep
demo's: test_report_outcome.py, which runs that demo once for the landing page too; the
narrow and broad demos: test_report_narrow.py, test_report_broad.py)."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import ROOT, Workflow, make_repo
from report_pages import (
    Demo,
    assert_report_holds_the_session,
    make_report,
    session_pages,
)

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


def fake_pandas(folder: Path, workflow: Workflow) -> Path:
    """A `pandas` the workflow's processes can import, which says where it was imported
    from in the file returned (enough of it for Snakemake's params record to go on)."""
    (folder / "pandas").mkdir(parents=True)
    said = folder / "imported"
    (folder / "pandas" / "__init__.py").write_text(
        "import traceback\n"
        f"open({str(said)!r}, 'a').write(''.join(traceback.format_stack()))\n"
        "class DataFrame: pass\nclass Series: pass\nclass Index: pass\n"
    )
    workflow.extra_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(folder)])
    return said


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
    # pandas importable, as in many a user's environment: no part of a session may import
    # it (Snakemake does, to record a job's params: the setup has none). Its `--report`
    # does, once a report, whatever the rules.
    imported = fake_pandas(tmp_path / "fake", workflow)
    workflow.run("e", spec)
    assert not imported.exists(), imported.read_text()
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

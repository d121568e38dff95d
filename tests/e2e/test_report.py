"""The report a user opens: `snakemake --report` of each bundled demo holds that session's files.

Each demo runs once for the module (its spec from config/sessions/; narrow and broad with
fewer cycles than `make demo` runs);
its report is made as a .zip, unpacked, and compared with the session's files on disk.
"""

from __future__ import annotations

import html
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Workflow, make_repo

DEMO_TIMEOUT = 1800  # a whole demo session on a loaded 2-core machine


@dataclass
class Report:
    """An unpacked `snakemake --report` zip: what it lists and the bytes of each file."""

    results: dict[str, dict]  # registered path -> the report's entry (name, labels, caption)
    files: dict[str, bytes]  # registered path -> the file's bytes in the zip
    rules: dict[str, dict]  # rule name -> its panel (input, output, code)
    description: str  # the workflow-level description, as HTML

    def code_of(self, rule: str) -> str:
        """A rule's code panel as plain text (the report highlights it)."""
        code = self.rules[rule]["code"]
        cells = re.findall(r'<td class="code">(.*?)</td>', code, re.S) or [code]
        return html.unescape(re.sub(r"<[^>]+>", "", cells[0]))


def script_var(page: str, name: str):
    """A `var <name> = <json>` of the report page's <script id="<name>"> element."""
    start = page.index(f'<script id="{name}">')
    return json.loads(re.search(rf"var {name} = (.*);\n", page[start:]).group(1))


def make_report(workflow: Workflow, name: str) -> Report:
    out = workflow.workdir / f"{name}-report.zip"
    workflow.run(name, None, "--report", str(out), timeout=600)
    with zipfile.ZipFile(out) as archive:
        folder = out.stem
        page = archive.read(f"{folder}/report.html").decode()
        results = script_var(page, "results")
        files = {
            path: archive.read(f"{folder}/{entry['data_uri']}") for path, entry in results.items()
        }
    return Report(
        results=results,
        files=files,
        rules=script_var(page, "rules"),
        description=json.loads(re.search(r"var workflow_desc = (.*);\n", page).group(1)),
    )


@dataclass
class Demo:
    session: Path
    report: Report

    def path(self, *parts: str) -> str:
        """A session file as the report lists it (relative to the working directory)."""
        return "/".join(("sessions", self.session.name, *parts))


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Workflow:
    """One working directory for the demos: their example target is made once."""
    workflow = Workflow(tmp_path_factory.mktemp("demos") / "work")
    (workflow.workdir / "examples").symlink_to(ROOT / "examples")
    return workflow


def run_demo(workflow: Workflow, name: str, **shorter) -> Demo:
    """The demo from its spec in config/sessions/, with `shorter` overriding keys (fewer
    cycles: what the report holds does not depend on how many there were)."""
    spec = yaml.safe_load((ROOT / "config" / "sessions" / f"{name}.yaml").read_text())
    workflow.run(name, {**spec, **shorter}, timeout=DEMO_TIMEOUT)
    return Demo(workflow.session(name), make_report(workflow, name))


@pytest.fixture(scope="module")
def sweep(demos) -> Demo:
    return run_demo(demos, "demo")


@pytest.fixture(scope="module")
def narrow(demos) -> Demo:
    return run_demo(demos, "demo-narrow", max_cycles=2)


@pytest.fixture(scope="module")
def broad(demos) -> Demo:
    return run_demo(demos, "demo-broad", max_cycles=1)


def session_pages(demo: Demo, steps: list[str]) -> set[str]:
    """The pages the session_report rule makes for every session."""
    pages = {demo.path("report", name) for name in ("session.html", "results.html", "cycles.png")}
    return pages | {demo.path("report", "evaluations", f"{step}.html") for step in steps}


def assert_files_are_the_sessions(demo: Demo) -> None:
    """Every file of the report is byte for byte the session's own."""
    for path, data in demo.report.files.items():
        assert data == (demo.session.parent.parent / path).read_bytes(), path


def assert_summary_is_session_md(demo: Demo) -> None:
    page = demo.report.files[demo.path("report", "session.html")].decode()
    text = (demo.session / "session.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings
    for heading in headings:
        assert f"<h2>{html.escape(heading, quote=False)}</h2>" in page
    assert html.escape(text.splitlines()[0].lstrip("# "), quote=False) in page


def assert_results_hold_results_tsv(demo: Demo) -> None:
    page = demo.report.files[demo.path("report", "results.html")].decode()
    rows = (demo.session / "results.tsv").read_text().splitlines()[1:]
    assert rows
    for row in rows:
        description = row.split("\t")[4]
        assert f"<td>{html.escape(description, quote=False)}</td>" in page


def assert_each_evaluation_is_its_steps(demo: Demo, documents: dict[str, Path]) -> None:
    """Each evaluation page holds its step's document (its heading and its decision)."""
    for step, document in documents.items():
        page = demo.report.files[demo.path("report", "evaluations", f"{step}.html")].decode()
        lines = document.read_text().splitlines()
        assert f"<h1>{html.escape(lines[0].lstrip('# '), quote=False)}</h1>" in page
        assert html.escape(lines[-1], quote=False) in page  # the decision, last


def cycle_documents(session: Path, name: str = "eval-results.md") -> dict[str, Path]:
    """Step name -> its evaluation document, for every finished cycle (or track cycle)."""
    found = {}
    for decision in sorted((session / "cycles").glob("**/decision.json")):
        step = decision.parent
        track = step.parent.name if step.parent.name.startswith("h") else ""
        found[f"{track}-{step.name}" if track else step.name] = step / name
    return found


# --- each demo -------------------------------------------------------------------------


def test_sweep_demo_report_holds_session_md_results_every_cycle_and_the_plot(sweep):
    documents = cycle_documents(sweep.session)
    assert len(documents) >= 2
    assert set(sweep.report.results) == session_pages(sweep, list(documents))
    assert_files_are_the_sessions(sweep)
    assert_summary_is_session_md(sweep)
    assert_results_hold_results_tsv(sweep)
    assert_each_evaluation_is_its_steps(sweep, documents)
    assert sweep.report.files[sweep.path("report", "cycles.png")].startswith(b"\x89PNG")


def test_narrow_demo_report_holds_the_goal_progress_plot_and_its_session(narrow):
    documents = cycle_documents(narrow.session)
    plot = narrow.path("goal-progress.png")
    assert set(narrow.report.results) == session_pages(narrow, list(documents)) | {plot}
    assert narrow.report.files[plot] == (narrow.session / "goal-progress.png").read_bytes()
    assert_files_are_the_sessions(narrow)
    assert_summary_is_session_md(narrow)
    assert_results_hold_results_tsv(narrow)
    assert_each_evaluation_is_its_steps(narrow, documents)


def test_broad_demo_report_holds_the_comparison_and_every_tracks_cycles(broad):
    documents = cycle_documents(broad.session)
    tracks = {step.split("-")[0] for step in documents}
    assert tracks == {"h1", "h2", "h3"}
    comparison = broad.path("comparison.md")
    assert set(broad.report.results) == session_pages(broad, list(documents)) | {comparison}
    assert broad.report.files[comparison] == (broad.session / "comparison.md").read_bytes()
    assert_files_are_the_sessions(broad)
    assert_summary_is_session_md(broad)
    assert_results_hold_results_tsv(broad)
    assert_each_evaluation_is_its_steps(broad, documents)
    page = broad.report.results[broad.path("report", "evaluations", "h2-001.html")]
    assert page["labels"] == {"evaluation": "h2, cycle 001"}


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
    assert code.startswith("scripts.cycle.red(wildcards, output, log)")
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
        "experiment": {"program": "program.md"},
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
    assert_files_are_the_sessions(demo)
    assert_summary_is_session_md(demo)
    assert_results_hold_results_tsv(demo)
    assert_each_evaluation_is_its_steps(demo, documents)
    results = demo.report.files[demo.path("report", "results.html")].decode()
    assert "1 changes kept over 2 cycle(s)" in results

"""What the report tests share: a bundled demo run from its spec, its `snakemake --report` as
a .zip, unpacked, and checks that each page holds the session's own files.

Each demo runs once per test file (test_report*.py, one demo each, so they run side by side);
narrow and broad with fewer cycles than `make demo` runs: what the report holds does not
depend on how many cycles ran.
"""

from __future__ import annotations

import html
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from conftest import ROOT, Workflow

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


def demo_workflow(tmp_path_factory) -> Workflow:
    """One working directory for a test file's demos: their example target is made once."""
    workflow = Workflow(tmp_path_factory.mktemp("demos") / "work")
    (workflow.workdir / "examples").symlink_to(ROOT / "examples")
    return workflow


def run_demo(workflow: Workflow, name: str, **shorter) -> Demo:
    """The demo from its spec in config/sessions/, with `shorter` overriding keys (fewer
    cycles: what the report holds does not depend on how many there were)."""
    spec = yaml.safe_load((ROOT / "config" / "sessions" / f"{name}.yaml").read_text())
    workflow.run(name, {**spec, **shorter}, timeout=DEMO_TIMEOUT)
    return Demo(workflow.session(name), make_report(workflow, name))


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


def assert_report_holds_the_session(demo: Demo, documents: dict[str, Path]) -> None:
    """The checks every session's report passes: its files byte for byte, session.md,
    results.tsv and each step's evaluation."""
    assert_files_are_the_sessions(demo)
    assert_summary_is_session_md(demo)
    assert_results_hold_results_tsv(demo)
    assert_each_evaluation_is_its_steps(demo, documents)

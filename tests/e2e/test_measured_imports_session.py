"""What a Python measurement imports is protected from inside its process (imports.py):
a module it tried to import and did not find, and a file that would shadow a module it
imports from outside the worktree, may not be created in narrow mode; setup says which
and why."""

from __future__ import annotations

import json

import pytest
from conftest import git, make_repo, script_spec

from autoresearch.measure import measured
from autoresearch.safety import git as ar_git

SRC = "def work():\n    return [3, 3, 3]\n"
# The measurement falls back when an optional module is missing, and takes a median.
MEASURE = """\
import statistics

from src import work

try:
    from fastconf import SCALE
except ImportError:
    SCALE = 1

print(statistics.median(work()) * SCALE)
"""
TESTS = "from src import work\n\n\ndef test_work():\n    assert work()\n"


def run_narrow(workflow, tmp_path, path: str, content: str):
    repo = make_repo(
        tmp_path / "t", {"src.py": SRC, "bench/measure.py": MEASURE, "tests/test_src.py": TESTS}
    )
    finding = {
        "severity": "high",
        "title": "work is slow",
        "location": "src.py:1",
        "issue": "work returns too much.",
        "impact": "The metric is high.",
    }
    script = {
        "red": {1: [{"tool": "report_finding", "args": finding}]},
        "green": {
            1: [
                {"tool": "write_file", "args": {"path": path, "content": content}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "faster"}},
            ]
        },
    }
    transcript = workflow.workdir / "transcript.jsonl"
    spec = script_spec(repo, workflow.script(script), transcript, mode="narrow", max_cycles=1)
    spec["goal"] = {
        "metric": "work",
        "command": "PYTHONPATH=. python bench/measure.py",
        "target": "<= 0",
    }
    spec["angles"] = [{"name": "work", "hypothesis": "work can be less."}]
    workflow.run("n", spec)
    return repo, workflow.session("n")


@pytest.mark.parametrize(
    "path,content",
    [
        ("fastconf.py", "SCALE = 0\n"),  # the fallback's module, made to exist
        ("bench/fastconf.py", "SCALE = 0\n"),
        ("bench/statistics.py", "def median(values):\n    return 0\n"),  # beside the script
    ],
)
def test_a_module_the_measurement_imports_cannot_be_made_or_shadowed(
    workflow, tmp_path, path, content
):
    repo, session = run_narrow(workflow, tmp_path, path, content)
    worktree = (session / "worktree").resolve()
    assert ar_git.head(worktree) == git(repo, "rev-parse", "main")
    assert not (worktree / path).exists()
    assert not workflow.decision("n", 1)["narrow"]["met"]
    baseline = json.loads((session / "baseline.json").read_text())
    assert measured.anchored(path) in baseline["protected"]
    setup = json.loads((session / "setup.json").read_text())
    sources = {p["path"]: p["source"] for p in setup["measured"]["protected"]}
    assert "measurement" in sources[path] and (
        "did not find" in sources[path] or "shadow" in sources[path]
    )

"""Every run of a measurement starts from a pristine tree: a change that caches its result
in a git-ignored file (or an untracked one) cannot make repeats 2..n cheap. An honest rerun
of the cached change costs as much as the first run, so it is no gain."""

from __future__ import annotations

import json

from conftest import make_repo
from test_experiment import TESTS, spec_for

MEASURE = "import json\nimport fast\n\nprint(json.dumps({'ops': fast.steps()}))\n"
FAST = "def steps():\n    return 1000\n"
# The first run does the work and leaves its answer where git does not look; every later
# run reads it and reports almost no work.
CACHING = """\
import pathlib

CACHE = pathlib.Path("build/steps.txt")


def steps():
    if CACHE.exists():
        return 1
    CACHE.parent.mkdir(exist_ok=True)
    CACHE.write_text("1000")
    return 1000
"""


def test_a_result_cached_in_an_ignored_file_gains_nothing_over_repeats(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "target",
        {
            "fast.py": FAST,
            "measure.py": MEASURE,
            "tests/test_fast.py": TESTS,
            ".gitignore": "build/\n",
        },
    )
    script = {
        "experiment": {
            1: [
                {"tool": "write_file", "args": {"path": "fast.py", "content": CACHING}},
                {
                    "tool": "finish_experiment",
                    "args": {"hypothesis": "Remember the answer", "change_summary": "cache"},
                },
            ]
        }
    }
    spec = spec_for(
        repo,
        workflow,
        script,
        goal="fewer steps",
        scope=["fast.py"],
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        repeats=3,
        max_iterations=1,
    )
    workflow.run("c", spec)
    session = workflow.session("c")
    said = json.loads((session / "iterations/001/decision.json").read_text())
    assert said["samples"] == [1000, 1000, 1000], said
    assert said["status"] != "kept" and said["end_commit"] == said["start_commit"]

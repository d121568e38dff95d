"""Broad mode with an aspiration metric: measured on the base and on each track's tip,
protected from the agents, ranking the tracks ahead of fixes kept, a failed measurement
reported as such."""

from __future__ import annotations

import json

import pytest
from conftest import Workflow, git, make_repo
from test_broad import finding, fix

CALC = """\
def add(a, b):
    # TODO: check types
    return a + b


def mean(values):
    # TODO: faster
    return sum(values) / len(values)
"""
TESTS = """\
from calc import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2
"""
# The aspiration in one number: fewer TODOs. It cannot read a tree marked NOMETRIC.
MEASURE = """\
import pathlib
import sys

text = pathlib.Path("calc.py").read_text()
if "NOMETRIC" in text:
    sys.exit("cannot measure this tree")
notes = pathlib.Path("resolved.txt")  # git-ignored: only a run can leave it behind
resolved = notes.read_text().count("RESOLVED") if notes.exists() else 0
print(text.count("TODO") - resolved)
"""
REWRITE = 'import pathlib\n\npathlib.Path("measure.py").write_text("print(-100)\\n")\n'
# A committed conftest whose test runs leave a git-ignored file the measurement would read.
LEFTOVER = 'import pathlib\n\npathlib.Path("resolved.txt").write_text("RESOLVED\\n" * 5)\n'
FILES = {
    "calc.py": CALC,
    "tests/test_calc.py": TESTS,
    "measure.py": MEASURE,
    ".gitignore": "resolved.txt\n",
}
HYPOTHESES = [
    {"id": "h1", "category": "obvious", "name": "guard", "statement": "Guard the inputs."},
    {"id": "h2", "category": "bold", "name": "resolve", "statement": "Resolve the TODOs."},
    {"id": "h3", "category": "creative", "name": "mark", "statement": "Mark the code."},
]
METRIC = {"label": "TODOs", "command": "python measure.py", "direction": "minimize"}


def edit(old: str, new: str) -> dict:
    return {"tool": "edit_file", "args": {"path": "calc.py", "old_str": old, "new_str": new}}


# h1 keeps two fixes that leave the TODOs; h2 keeps one that resolves a TODO; h3 keeps two,
# tries to rewrite the measurement (refused), and leaves a tree the metric cannot read.
SCRIPT = {
    "red": {
        f"{hid}/{n}": [finding(f"{hid} issue {n}", "calc.py:1", f"{hid} needs work {n}.")]
        for hid in ("h1", "h2", "h3")
        for n in (1, 2)
    },
    "green": {
        "h1/1": [
            edit(
                "    return sum(values)",
                "    if not values:\n        raise ValueError\n    return sum(values)",
            ),
            fix("F-001", "guard empty mean"),
        ],
        "h1/2": [
            {"tool": "write_file", "args": {"path": "tests/conftest.py", "content": LEFTOVER}},
            edit("def add(a, b):", "def add(a, b):  # adds"),
            fix("F-002", "note add"),
        ],
        "h2/1": [edit("    # TODO: faster\n", "    # fast enough\n"), fix("F-001", "resolve")],
        "h2/2": [{"tool": "skip_finding", "args": {"finding_id": "F-002", "reason": "no"}}],
        "h3/1": [
            {"tool": "write_file", "args": {"path": "measure.py", "content": "print(0)\n"}},
            edit("def mean(values):", "def mean(values):  # NOMETRIC"),
            fix("F-001", "mark mean"),
        ],
        "h3/2": [
            # A test run that rewrites the measurement: it must never reach a tip.
            {"tool": "write_file", "args": {"path": "tests/conftest.py", "content": REWRITE}},
            edit("def add(a, b):", "def add(a, b):  # h3"),
            fix("F-002", "mark add"),
        ],
    },
}


def spec(wf: Workflow, target, **extra) -> dict:
    values = {
        "mode": "broad",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "aspiration": "Fewer loose ends in calc.",
        "aspiration_metric": METRIC,
        "hypotheses": HYPOTHESES,
        "max_cycles": 2,
        # The tracks' conftests are committed on purpose (what runs after them is under
        # test here): the tamper screen, which refuses a new one and one naming the
        # measurement, lets them through.
        "allow_tamper_flags": ["startup", "evaluator"],
        "agent": {
            "backend": "script",
            "script": str(wf.script(SCRIPT)),
            "transcript": str(wf.workdir / "transcript.jsonl"),
        },
    }
    return values | extra


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("broad-metric")
    target = make_repo(base / "target", FILES)
    wf = Workflow(base / "work")
    wf.run("m", spec(wf, target), cores=2)
    return wf, target


def test_the_base_is_measured_at_setup_and_the_measurement_protected(run):
    wf, _ = run
    baseline = json.loads((wf.session("m") / "baseline.json").read_text())
    assert baseline["value"] == 2 and baseline["direction"] == "minimize"
    assert "./measure.py" in baseline["protected"]
    # No track changed the measurement, though h3 tried.
    for hid in ("h1", "h2", "h3"):
        worktree = wf.session("m") / "tracks" / hid / "worktree"
        assert git(worktree, "show", "HEAD:measure.py") + "\n" == MEASURE
    refused = (wf.session("m") / "logs/green/h3/001.log").read_text()
    assert "protected" in refused
    # h3's second fix came with a conftest whose test run rewrote measure.py: taken out.
    gate = (wf.session("m") / "logs/green/h3/002.log").read_text()
    assert "protected file measure.py changed by the test run" in gate
    assert "conftest" not in git(wf.session("m") / "tracks/h3/worktree", "ls-files")


def test_each_tip_is_measured_and_a_failure_is_no_number(run):
    wf, _ = run
    results = {
        hid: json.loads((wf.session("m") / "tracks" / hid / "result.json").read_text())
        for hid in ("h1", "h2", "h3")
    }
    # h1's last test run left resolved.txt behind (5 fewer by its count): its tip is
    # measured on a pristine checkout, where no such file exists.
    assert "tests/conftest.py" in git(wf.session("m") / "tracks/h1/worktree", "ls-files")
    assert results["h1"]["aspiration_metric"]["value"] == 2
    assert results["h2"]["aspiration_metric"]["value"] == 1
    assert results["h3"]["aspiration_metric"]["value"] is None
    assert "cannot measure this tree" in results["h3"]["aspiration_metric"]["error"]


def test_the_metric_ranks_the_tracks_and_comparison_md_says_it_decided(run):
    wf, _ = run
    data = json.loads((wf.session("m") / "comparison.json").read_text())
    # h2 kept one fix against h1's two: the metric decides, not the count; h3 last.
    assert data["ranking"] == ["h2", "h1", "h3"]
    assert data["winner"]["id"] == "h2"
    assert data["decided_by"]["tie"] is False
    text = (wf.session("m") / "comparison.md").read_text()
    assert "Chosen by: decided by the aspiration metric (h2 over h1: 1 against 2)." in text
    assert "| base | 2 | |" in text and "| h2 | 1 | -1 |" in text
    assert "| h3 | measurement failed (" in text


def test_a_base_that_cannot_be_measured_stops_setup_naming_the_key(tmp_path):
    target = make_repo(tmp_path / "target", FILES)
    before = git(target, "branch", "--list")
    wf = Workflow(tmp_path / "work")
    bad = spec(wf, target, aspiration_metric=METRIC | {"command": "echo boom >&2; exit 3"})
    proc = wf.run("x", bad, check=False)
    assert proc.returncode != 0
    assert "key 'aspiration_metric.command': the measurement of the base commit failed" in (
        proc.stderr
    )
    assert not (wf.session("x") / "session.yaml").exists()
    assert git(target, "branch", "--list") == before

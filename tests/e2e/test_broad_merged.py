"""`autoresearch finalize` on a broad session offers a merged branch: the winner plus the
other tracks' review sets that apply cleanly on it and keep its tests; the rest is listed
with the reason.

h1 wins on fixes kept (3): it guards `mean` on its return line, adds a test that pins
LIMIT, and notes `scale`. h2 adds util.py (independent: merged) and rewrites the same
return line of `mean` (does not apply on the winner). h3 raises LIMIT, which passes alone
and breaks h1's new test on the merged branch.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import Workflow, git, make_repo
from test_broad import finding

CALC = """\
LIMIT = 10


def add(a, b):
    return a + b


def mean(values):
    return sum(values) / len(values)




def scale(values, k):
    return [v * k for v in values]
"""
TESTS = """\
from calc import add, mean, scale


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_scale():
    assert scale([1, 2], 3) == [3, 6]
"""
LIMIT_TEST = "import calc\n\n\ndef test_limit():\n    assert calc.LIMIT == 10\n"
UTIL = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
RETURN = "    return sum(values) / len(values)"
HYPOTHESES = [
    {"id": "h1", "category": "obvious", "name": "guard", "statement": "Guard the inputs."},
    {"id": "h2", "category": "bold", "name": "helpers", "statement": "Add helpers."},
    {"id": "h3", "category": "creative", "name": "limits", "statement": "Raise the limits."},
]


def edit(path: str, old: str, new: str) -> dict:
    return {"tool": "edit_file", "args": {"path": path, "old_str": old, "new_str": new}}


def write(path: str, content: str) -> dict:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def fix(fid: str, summary: str) -> dict:
    return {"tool": "finish_fix", "args": {"finding_id": fid, "summary": summary}}


SCRIPT = {
    "red": {
        f"{hid}/1": [
            finding(f"{hid} issue {n}", "calc.py:1", f"{hid} thing {n}.") for n in (1, 2, 3)
        ]
        for hid in ("h1", "h2", "h3")
    },
    "green": {
        "h1/1": [
            edit("calc.py", RETURN, f"{RETURN} if values else 0.0"),
            fix("F-001", "guard empty mean"),
            write("tests/test_limit.py", LIMIT_TEST),
            fix("F-002", "pin the limit"),
            edit("calc.py", "def scale(values, k):", "def scale(values, k):  # copies"),
            fix("F-003", "note scale"),
        ],
        "h2/1": [
            write("util.py", UTIL),
            fix("F-001", "add clamp"),
            edit("calc.py", RETURN, "    return sum(values) / max(len(values), 1)"),
            fix("F-002", "never divide by zero"),
        ],
        "h3/1": [edit("calc.py", "LIMIT = 10", "LIMIT = 20"), fix("F-001", "raise the limit")],
    },
}


@pytest.fixture(scope="module")
def finalized(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("broad-merged")
    target = make_repo(tmp / "target", {"calc.py": CALC, "tests/test_calc.py": TESTS})
    wf = Workflow(tmp / "work")
    spec = {
        "mode": "broad",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "aspiration": "Make calc dependable.",
        "hypotheses": HYPOTHESES,
        "max_cycles": 1,
        "teams": ["red", "green"],
        "test_gate": "per_fix",
        "agent": {"backend": "script", "script": str(wf.script(SCRIPT))},
    }
    wf.run("b", spec, cores=2)
    proc = finalize(wf, "b")
    return wf, target, proc


def finalize(wf: Workflow, name: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "finalize", name, *extra],
        cwd=wf.workdir,
        env=wf.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


MERGED = "autoresearch/b/review/merged"


def test_the_merged_branch_is_the_winner_plus_the_independent_win(finalized):
    wf, target, proc = finalized
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((wf.session("b") / "comparison.json").read_text())["winner"]["id"] == "h1"
    winner_tip = git(target, "rev-parse", "autoresearch/broad/b/h1")
    assert git(target, "merge-base", MERGED, winner_tip) == winner_tip  # built on the winner
    added = git(target, "log", "--format=%s", f"{winner_tip}..{MERGED}").splitlines()
    assert added == ["fix: add clamp"]
    assert git(target, "show", f"{MERGED}:util.py") + "\n" == UTIL
    assert "LIMIT = 10" in git(target, "show", f"{MERGED}:calc.py")
    assert MERGED in proc.stdout and "review/merged.md" in proc.stdout
    assert f"gh pr create --head {MERGED}" in proc.stdout


def test_merged_md_lists_what_was_left_out_and_why(finalized):
    wf, _, _ = finalized
    text = (wf.session("b") / "review" / "merged.md").read_text()
    added = text.split("## Added")[1].split("## Left out")[0]
    left = text.split("## Left out")[1].split("## Tests")[0]
    assert "(track h2): add clamp: added" in added
    assert "(track h2): never divide by zero: does not apply cleanly" in left
    assert "(track h3): raise the limit: breaks the tests" in left
    assert "test_limit" in left  # judged by test identity: the test that broke is named
    assert "h1 issue" not in text  # nothing of Red's reports


def test_the_merged_branch_is_recorded_and_a_rerun_replaces_it(finalized):
    wf, target, _ = finalized
    record = json.loads((wf.session("b") / "review" / "branches.json").read_text())
    assert record["merged"]["branch"] == MERGED
    tip = git(target, "rev-parse", MERGED)
    assert record["merged"]["tip"] == tip
    again = finalize(wf, "b")
    assert again.returncode == 0, again.stdout + again.stderr
    branches = git(target, "branch", "--list", "autoresearch/b/review/merged*").split()
    assert branches == [MERGED]  # replaced, not merged-2
    assert git(target, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(target, "status", "--porcelain") == ""

"""A no-key sweep of a library that does not use ruff's formatter and lints with flake8: what
it keeps is what its maintainer would merge as is (issue 37's boltons and cachetools)."""

from __future__ import annotations

import json

import pytest
from conftest import Workflow, git, make_repo, no_key_sweep

# Hand-wrapped, single-quoted: `ruff format` would rewrite most of it.
HAND = """import os
import sys

NUMBERS = [1, 2, 3,
           4, 5]


def name():
    return 'x' + sys.platform
"""
# boltons' ecoutils: two feature probes whose failure is the flag.
PROBES = """try:
    import readline
except Exception:
    HAVE_READLINE = False
else:
    HAVE_READLINE = True

try:
    import threading
    HAVE_THREADING = True
except Exception:
    HAVE_THREADING = False
"""
# As ruff format writes it: a fix here may be followed by the formatter.
FORMATTED = 'def f():\n    import json\n\n    return "a"\n'
SHIM = "X = f'shim'\n"  # F541, which the target's flake8 section ignores
TESTS = (
    "import formatted\nimport hand\nimport probes\nimport shim\n\n\n"
    "def test_all():\n    assert hand.name() and formatted.f() == 'a' and shim.X\n"
    "    assert probes.HAVE_THREADING\n"
)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    base = tmp_path_factory.mktemp("style")
    repo = make_repo(
        base / "target",
        {
            "hand.py": HAND,
            "probes.py": PROBES,
            "formatted.py": FORMATTED,
            "shim.py": SHIM,
            "tests/test_all.py": TESTS,
            "setup.cfg": "[flake8]\nmax-line-length = 100\nextend-ignore =\n    F541\n",
        },
    )
    workflow = Workflow(base / "work")
    spec = no_key_sweep(repo, max_cycles=2, teams=["red", "green", "refactor"])
    workflow.run("s", spec)
    return workflow.session("s")


def changed_lines(worktree, sha: str, path: str) -> int:
    stat = git(worktree, "show", "--numstat", "--format=", sha, "--", path).split()
    return int(stat[0]) + int(stat[1]) if stat else 0


def commits(worktree, path: str) -> list[str]:
    return git(worktree, "log", "--format=%H", "main..HEAD", "--", path).split()


def test_a_fix_in_a_file_the_target_never_formatted_is_the_one_line_alone(sweep):
    worktree = sweep / "worktree"
    [sha] = commits(worktree, "hand.py")
    assert git(worktree, "log", "-1", "--format=%s", sha).startswith("fix: ")
    assert changed_lines(worktree, sha, "hand.py") == 1
    assert (worktree / "hand.py").read_text() == HAND.replace("import os\n", "")


def test_feature_probes_stay_and_the_skip_says_why(sweep):
    assert commits(sweep / "worktree", "probes.py") == []
    green = (sweep / "cycles" / "001" / "green-patch.md").read_text()
    assert green.count("feature probe") >= 2


def test_a_file_already_formatted_is_formatted_again_after_its_fix(sweep):
    worktree = sweep / "worktree"
    subjects = [
        git(worktree, "log", "-1", "--format=%s", c) for c in commits(worktree, "formatted.py")
    ]
    assert (
        subjects[-1].startswith("fix: ")
        and subjects[0] == "refactor: format formatted.py with ruff format"
    )
    assert (worktree / "formatted.py").read_text() == 'def f():\n    return "a"\n'


def test_a_rule_the_target_flake8_ignores_is_neither_found_nor_fixed(sweep):
    assert commits(sweep / "worktree", "shim.py") == []
    assert "F541" not in (sweep / "cycles" / "001" / "red-findings.md").read_text()
    lint = json.loads((sweep / "setup.json").read_text())["lint_config"]
    assert lint["flake8"]["source"] == "setup.cfg [flake8]"
    assert lint["flake8"]["extend_ignore"] == ["F541"] and lint["ruff"].startswith("none")


def test_a_model_fix_that_reformats_the_whole_file_is_not_kept(tmp_path):
    import subprocess
    import sys

    from conftest import script_spec

    hand = "import os\n\n" + "".join(
        f"def f{n}(x, y={{'a': [1,\n                2]}}):\n    return x + y['a'][0] + {n}\n\n\n"
        for n in range(12)
    )
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "-"],
        input=hand.replace("import os\n\n", ""),
        capture_output=True,
        text=True,
    ).stdout
    finding = {
        "severity": "medium",
        "title": "unused import os",
        "location": "app.py:1",
        "issue": "os is imported and never used.",
        "impact": "Misleads readers.",
    }
    repo = make_repo(
        tmp_path / "target",
        {
            "app.py": hand,
            "tests/test_app.py": "import app\n\n\ndef test_f():\n    assert app.f1(1)\n",
        },
    )
    fix = [
        {"tool": "write_file", "args": {"path": "app.py", "content": formatted}},
        {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "drop os"}},
    ]
    script = {"red": {1: [{"tool": "report_finding", "args": finding}]}, "green": {1: fix}}
    workflow = Workflow(tmp_path / "work")
    transcript = workflow.workdir / "t.jsonl"
    spec = script_spec(repo, workflow.script(script), transcript, max_cycles=1)
    workflow.run("s", spec | {"teams": ["red", "green"]})
    decision = workflow.decision("s", 1)
    assert decision["fixed"] == []
    [skipped] = decision["skipped"]
    assert "rewrites" in skipped["reason"] and "reformat" in skipped["reason"]
    assert git(workflow.session("s") / "worktree", "log", "--format=%s", "main..HEAD") == ""


def test_a_refactor_with_nothing_it_may_format_does_not_stop_a_sweep_that_still_fixes(tmp_path):
    # One fix a cycle (max_findings 1) in a file the target never formatted: Refactor may
    # touch nothing, so its "no change" in cycles 1 and 2 is no reason to stop.
    repo = make_repo(
        tmp_path / "target",
        {
            "hand.py": "import os\nimport sys\n\nNUMBERS = [1, 2,\n           3]\n",
            "tests/test_hand.py": "import hand\n\n\ndef test_numbers():\n    assert hand.NUMBERS\n",
        },
    )
    workflow = Workflow(tmp_path / "work")
    spec = no_key_sweep(repo, max_cycles=3, max_findings=1, teams=["red", "green", "refactor"])
    workflow.run("s", spec)
    first, second = workflow.decision("s", 1), workflow.decision("s", 2)
    assert [len(d["fixed"]) for d in (first, second)] == [1, 1]
    assert not second["stop"]
    assert first["refactor_idle"] and second["refactor_idle"]
    third = workflow.decision("s", 3)
    assert third["fixed"] == [] and third["stop"]

"""The fix lens through Snakemake: keep a change only when the error count fell."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import Workflow, git, make_repo

from autoresearch.modes.fix.count import error_id
from autoresearch.modes.lens.error_counts import Error

APP = """\
def f():
    return 1  # TODO alpha


def g():
    return 2  # TODO beta
"""
TESTS = "from app import f, g\n\n\ndef test_app():\n    assert f() == 1\n    assert g() == 2\n"
# Each `TODO <word>` is one lint error, named by its word.
TODO_COUNT = {
    "command": "grep -Hn TODO app.py || true",
    "parser": r"regex:^(?P<file>[^:]+):(?P<line>\d+):.*TODO (?P<code>\w+)",
    "tool": "todo",
}


def eid(word: str) -> str:
    return error_id(Error("todo", "lint", word, "app.py", None, ""))


def change(word: str, content: str, summary: str = "fix") -> list[dict]:
    return [
        {"tool": "write_file", "args": {"path": "app.py", "content": content}},
        {"tool": "finish_fix", "args": {"finding_id": eid(word), "summary": summary}},
    ]


NO_ALPHA = APP.replace("  # TODO alpha", "")
SCRIPT = {
    "fix": {
        # 1: alpha fixed: 2 -> 1, kept.
        1: change("alpha", NO_ALPHA),
        # 2: beta only renamed: the count stays at 1 with another error: moved.
        2: change("beta", NO_ALPHA.replace("TODO beta", "TODO gamma")),
        # 3: beta removed, but a suppression marker added: refused on the diff.
        3: change("beta", NO_ALPHA.replace("  # TODO beta", "  # noqa: E501")),
        # 4: beta removed and g() broken: the count fell but the guard fails; third failure.
        4: change("beta", NO_ALPHA.replace("    return 2  # TODO beta", "    return 3")),
    }
}


def fix_spec(repo, workflow, script, **fix):
    return {
        "mode": "fix",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        "fix": {"errors": [TODO_COUNT], "guard": "python -m pytest -q", **fix},
        "agent": {
            "backend": "script",
            "script": str(workflow.script(script)),
            "transcript": str(workflow.workdir / "t.jsonl"),
        },
    }


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """One scripted session shared by the tests that only read it."""
    base = tmp_path_factory.mktemp("fix")
    workflow = Workflow(base / "work")
    repo = make_repo(base / "target", {"app.py": APP, "tests/test_app.py": TESTS})
    workflow.run("f", fix_spec(repo, workflow, SCRIPT))
    session = workflow.session("f")
    decisions = [
        json.loads((session / "fixes" / f"{n:03d}" / "decision.json").read_text())
        for n in range(1, 5)
    ]
    return workflow, session, decisions


def test_a_change_is_kept_only_when_the_count_fell(history):
    _, session, decisions = history
    assert [d["status"] for d in decisions] == [
        "kept",
        "reverted",
        "rejected: suppression",
        "guard_failed",
    ]
    subjects = git(session / "worktree", "log", "--format=%s").splitlines()
    assert subjects[0] == "fix: lint — app.py:2"
    assert len(subjects) == 2  # the kept fix and the initial commit


def test_an_error_that_only_moved_is_reverted(history):
    _, _, decisions = history
    assert decisions[1]["verdict"] == "the count stayed at 1: the error only moved"
    assert decisions[1]["end_commit"] == decisions[1]["start_commit"]


def test_a_suppression_in_the_diff_is_rejected_and_named(history):
    _, session, decisions = history
    assert any("new noqa" in v for v in decisions[2]["violations"])
    assert "new noqa" in (session / "fixes/003/evaluation.md").read_text()


def test_a_failing_guard_reverts_a_change_that_lowered_the_count(history):
    _, _, decisions = history
    assert decisions[3]["before"] == 1 and decisions[3]["guard"]["ok"] is False
    assert "guard `python -m pytest -q` failed" in decisions[3]["verdict"]


def test_each_retry_is_told_what_the_earlier_attempts_ran_into(history):
    workflow, _, _ = history
    briefs = [b for b in workflow.transcript(workflow.workdir / "t.jsonl") if b["team"] == "fix"]
    last = briefs[3]["task"]
    assert "iteration 2: reverted — the count stayed at 1: the error only moved" in last
    assert "iteration 3: rejected: suppression" in last


def test_after_three_failed_attempts_the_error_is_blocked_and_the_session_stops(history):
    _, session, decisions = history
    assert decisions[3]["reason"] == "every remaining error is blocked (1 left; see blocked.md)"
    blocked = (session / "blocked.md").read_text()
    assert f"[{eid('beta')}] lint beta app.py:6" in blocked and "Failed attempts: 3" in blocked
    assert not (session / "fixes/005").exists()


def test_the_outputs_show_before_and_after_per_category(history):
    _, session, _ = history
    summary = (session / "summary.md").read_text()
    assert "| lint | 2 | 1 |" in summary
    rows = (session / "fix-results.tsv").read_text().splitlines()
    assert rows[0].startswith("run_id\titeration") and len(rows) == 5
    done = (session / "done").read_text()
    assert (
        "errors: 2 → 1" in done and "fixes kept: 1" in done and "blocked: 1 of those left" in done
    )


def test_verify_holds_done_to_what_the_records_render(history):
    workflow, session, _ = history
    verify = [sys.executable, "-m", "autoresearch.cli", "verify", "f"]
    run = dict(cwd=workflow.workdir, env=workflow.env(), capture_output=True, text=True)
    ok = subprocess.run(verify, **run, timeout=300)
    assert ok.returncode == 0 and ok.stdout.startswith("verified: 4 cycles, 1 commit"), ok.stdout
    assert "not checked: done" not in ok.stdout
    done = session / "done"
    honest = done.read_text()
    try:
        done.write_text(honest.replace("fixes kept: 1", "fixes kept: 2"))
        proc = subprocess.run(verify, **run, timeout=300)
    finally:
        done.write_text(honest)
    assert proc.returncode == 1
    assert proc.stdout.startswith(
        "sessions/f/done: is not what its records render: line 5 reads 'fixes kept: 2', "
        "they render 'fixes kept: 1'"
    ), proc.stdout


CALC_LINT = "import os\nimport sys\n\n\ndef add(a, b):\n    return a + b\n"
CALC_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


def test_the_ruff_backend_drives_lint_errors_to_zero(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "lint",
        {
            "calc.py": CALC_LINT,
            "tests/test_calc.py": CALC_TEST,
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',  # a Python stack
        },
    )
    spec = {
        "mode": "fix",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        "agent": {"backend": "ruff"},
    }
    workflow.run("r", spec)
    session = workflow.session("r")
    done = (session / "done").read_text()
    assert "stopped: zero errors" in done and "errors: 2 → 0" in done and "gate: PASSED" in done
    worktree = session / "worktree"
    assert "import" not in (worktree / "calc.py").read_text()
    assert git(worktree, "log", "--format=%s", "-1") == "fix: lint — calc.py:1"


def test_the_ruff_backend_blocks_an_error_at_its_first_failed_attempt(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "lint",
        {
            # sys is unused here but the tests reach it through calc by a name built at run
            # time (a plain `from calc import sys` keeps the ruff backend off it): its fix
            # fails the guard.
            "calc.py": CALC_LINT.replace("\n\n\n", "\n\nl = 1\n\n\n", 1),
            "tests/test_calc.py": CALC_TEST.replace("import add", "import add\nimport calc")
            + '\n\ndef test_sys():\n    assert getattr(calc, "sy" + "s").version\n',
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
        },
    )
    spec = {
        "mode": "fix",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        "agent": {"backend": "ruff"},
    }
    workflow.run("r", spec)
    session = workflow.session("r")
    decisions = [json.loads(p.read_text()) for p in sorted(session.glob("fixes/*/decision.json"))]
    # A retry would start from the same commit and make the same change: one try each.
    assert [(d["error"]["message"], d["status"]) for d in decisions] == [
        ("`os` imported but unused", "kept"),
        ("`sys` imported but unused", "reverted"),  # a test fails: the count rose
        ("Ambiguous variable name: `l`", "skipped"),  # E741: ruff has no fix
    ]
    blocked = (session / "blocked.md").read_text()
    assert "ruff has no automatic fix for E741" in blocked and "`sys` imported" in blocked
    assert "every remaining error is blocked" in (session / "done").read_text()


HANDOFF = {
    "lens": "debug",
    "findings": [
        {
            "id": "B-001",
            "title": "f returns 1 where callers need 2",
            "severity": "high",
            "verdict": "confirmed",
            "file": "app.py",
            "line": 2,
            "regression_test": "from app import f\n\n\ndef test_f():\n    assert f() == 2\n",
        },
        {
            "id": "V-001",
            "title": "g leaks the beta marker",
            "severity": "medium",
            "file": "app.py",
            "line": 6,
            "evidence": "return 2  # TODO beta",
        },
        {"id": "B-002", "title": "a hunch", "severity": "low", "verdict": "new-lead"},
        {"id": "V-002", "title": "nothing to check", "severity": "low", "file": "app.py"},
    ],
}


def test_handed_findings_are_fixed_until_their_reproduction_passes(workflow, tmp_path):
    # A test that ran and passed: a suite that runs no test is no baseline.
    tests = {"test_smoke.py": "def test_smoke():\n    assert True\n"}
    repo = make_repo(tmp_path / "handed", {"app.py": APP, **tests})
    source = workflow.session("dbg")
    source.mkdir(parents=True)
    (source / "handoff.json").write_text(json.dumps(HANDOFF))
    fixed_f = APP.replace("return 1", "return 2")
    script = {
        "fix": {
            1: [
                {"tool": "write_file", "args": {"path": "app.py", "content": fixed_f}},
                {"tool": "finish_fix", "args": {"finding_id": bug_id("B-001"), "summary": "2"}},
            ],
            2: [
                {"tool": "write_file", "args": {"path": "app.py",
                                                "content": fixed_f.replace("  # TODO beta", "")}},
                {"tool": "finish_fix", "args": {"finding_id": bug_id("V-001"), "summary": "x"}},
            ],
        }
    }  # fmt: skip
    spec = fix_spec(repo, workflow, script, **{"from": "dbg", "guard": None})
    del spec["fix"]["errors"]
    workflow.run("h", spec)
    session = workflow.session("h")
    done = (session / "done").read_text()
    assert "stopped: zero errors" in done and "errors: 2 → 0" in done
    setup = json.loads((session / "lens-setup.json").read_text())
    assert [b["id"] for b in setup["handed"]] == ["B-001", "V-001"]
    assert setup["unmeasured"] == [
        "V-002 nothing to check: no reproduction and no quoted code to check"
    ]
    worktree = session / "worktree"
    assert git(worktree, "status", "--porcelain") == ""
    # B-001's reproduction is kept as a regression test; V-001 had only quoted code.
    assert git(worktree, "log", "--format=%s", "-3").splitlines() == [
        "test: regression tests for B-001",
        "fix: bug — app.py:6",
        "fix: bug — app.py:2",
    ]


def bug_id(finding_id: str) -> str:
    title = next(f["title"] for f in HANDOFF["findings"] if f["id"] == finding_id)
    return error_id(Error("handoff", "bug", finding_id, "app.py", None, title))


def test_an_error_command_that_cannot_run_stops_setup_naming_its_key(workflow, tmp_path):
    repo = make_repo(tmp_path / "t", {"app.py": APP, "tests/test_app.py": TESTS})
    no_ruff = {"command": "python -c 'import no_such_linter'", "parser": "ruff"}
    spec = fix_spec(repo, workflow, SCRIPT, errors=[no_ruff])
    proc = workflow.run("nr", spec, check=False)
    assert proc.returncode != 0
    assert "key 'fix.errors.0.command'" in proc.stderr and "no_such_linter" in proc.stderr
    assert not (workflow.session("nr") / "lens-setup.json").exists()
    assert git(repo, "branch", "--list", "autoresearch/*") == ""  # setup was undone

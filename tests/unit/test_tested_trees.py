"""No tree is tested twice in a session, and a recorded run never stands for a tree it did
not test (tested.py): the per-fix gate's run is reused by the stage's final run, and
everything that could make two runs differ makes the suite run again."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch import modes
from autoresearch.engine.stage import StageEnv
from autoresearch.gate import keep as gates
from autoresearch.gate.tested import RunKey, TestRunLog, exact_tree
from autoresearch.gate.testrun import TIMED_OUT
from autoresearch.safety import git as ar_git
from autoresearch.session import spec
from autoresearch.session.record import SetupRecord

# The suite passes when value.txt says "ok"; test_local passes only with an ignored file.
FILES = {
    ".gitignore": "local.cfg\n__pycache__/\n.pytest_cache/\n",
    "value.txt": "ok\n",
    "tests/test_value.py": (
        "from pathlib import Path\n\n\n"
        "def test_value():\n    assert Path('value.txt').read_text() == 'ok\\n'\n"
    ),
    "bench.py": "print('protected')\n",
}
BASELINE = {"outcome": "passed", "passed": 1, "failed": 0, "passing_ids": []}


class Session:
    def __init__(self, tmp_path: Path, **spec_values):
        repo = make_repo(tmp_path / "target", FILES)
        self.layout = modes.get("sweep").layout(tmp_path / "sessions" / "s")
        self.layout.root.mkdir(parents=True)
        self.wt = tmp_path / "wt"
        ar_git.open_worktree(repo, self.wt, "autoresearch/s", ar_git.head(repo))
        self.layout.worktree().symlink_to(self.wt)
        self.base = ar_git.head(self.wt)
        values = {
            "mode": "sweep",
            "test_timeout_s": 120,
            "commands": {"sandbox": "none"},
            "protected": ["bench.py"],
            **spec_values,
        }
        record = SetupRecord(
            "s", "sweep", "0", str(repo), "Python", "python -m pytest -q", None,
            "autoresearch/s", self.base, BASELINE, "", None, "",
        )  # fmt: skip
        self.env = StageEnv(self.layout, spec.SessionSpec(values), record, 1)
        self.runs: list[str] = []  # the tree each real run of the suite found
        real = self.env.run_tests

        def counted(**options):
            self.runs.append(git(self.wt, "write-tree"))
            return real(**options)

        self.env.run_tests = counted

    def write(self, name: str, text: str) -> None:
        (self.wt / name).parent.mkdir(parents=True, exist_ok=True)
        (self.wt / name).write_text(text)

    def stage(self, name: str, text: str) -> None:
        """An agent's change, staged as the gate finds it (Protection.keep_written)."""
        self.write(name, text)
        git(self.wt, "add", "--", name)

    def commit(self) -> str:
        git(self.wt, "commit", "-q", "--no-verify", "-m", "change")
        return ar_git.head(self.wt)

    def gate(self) -> gates.TestGate:
        return gates.TestGate(self.env, self.env.reference_tests())

    def recorded(self) -> list[dict]:
        path = self.layout.test_runs
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return Session(tmp_path)


def test_the_per_fix_gates_run_is_reused_by_the_final_run_of_the_same_tree(session):
    session.stage("extra.py", "X = 1\n")
    assert session.gate().check().ok
    session.commit()
    final = session.env.measure_tests(uncached=True, reuse=True)
    assert final.ok
    assert len(session.runs) == 1  # the gate's run stood for the committed tree
    [entry] = session.recorded()
    assert entry["tree"] == git(session.wt, "rev-parse", "HEAD^{tree}")


def test_a_tree_the_gate_tested_is_not_tested_again_by_the_gate(session):
    # The agent offers the very same change twice (the first time refused by a protected
    # write elsewhere, say): its tree was tested already.
    session.stage("extra.py", "X = 1\n")
    session.gate().check()
    git(session.wt, "reset", "-q", "--hard")
    session.stage("extra.py", "X = 1\n")
    session.gate().check()
    assert len(session.runs) == 1


def test_the_gate_runs_without_ignored_files_so_a_pass_that_needs_one_is_refused(session):
    # A test of the change reads local.cfg, which git ignores: it would never be committed,
    # so it must not make the gate's run pass (nor stand for the tree).
    session.stage(
        "tests/test_local.py",
        "from pathlib import Path\n\n\ndef test_local():\n    assert Path('local.cfg').exists()\n",
    )
    session.write("local.cfg", "present\n")
    verdict = session.gate().check()
    assert not verdict.ok
    assert not (session.wt / "local.cfg").exists()


def test_a_file_committed_after_the_gates_run_makes_the_final_run_test_the_new_tree(session):
    session.stage("extra.py", "X = 1\n")
    session.gate().check()
    gate_tree = session.runs[0]
    session.stage("late.py", "Y = 2\n")  # added after the run, then committed with it
    session.commit()
    session.env.measure_tests(uncached=True, reuse=True)
    trees = [e["tree"] for e in session.recorded()]
    assert len(session.runs) == 2
    assert trees == [gate_tree, git(session.wt, "rev-parse", "HEAD^{tree}")]
    assert trees[0] != trees[1]


def test_a_protected_file_restored_before_the_run_files_the_run_under_the_tree_that_ran(
    session,
):
    # A commit that changed bench.py (as no harness commit can): measuring restores the
    # base's bench.py, so what runs is not the commit's tree, and is not filed under it.
    session.write("bench.py", "print('rewritten')\n")
    git(session.wt, "add", "-A")
    changed = session.commit()
    session.env.measure_tests(uncached=True, reuse=True)
    [entry] = session.recorded()
    assert entry["tree"] != git(session.wt, "rev-parse", f"{changed}^{{tree}}")
    assert entry["tree"] == git(session.wt, "rev-parse", f"{session.base}^{{tree}}")


def test_a_run_that_timed_out_is_run_again(session):
    first = session.env.measure_tests(uncached=True, reuse=True)
    key = RunKey(**{k: v for k, v in session.recorded()[0].items() if k != "run"})
    log = TestRunLog(session.layout.test_runs, session.layout.journal_lock)
    session.layout.test_runs.unlink()
    log.add(key, replace(first, outcome=TIMED_OUT, cause="timed out"))
    again = session.env.measure_tests(uncached=True, reuse=True)
    assert len(session.runs) == 2
    assert again.ok


def test_a_run_under_another_timeout_is_not_reused(session):
    session.env.measure_tests(uncached=True, reuse=True)
    session.env.spec["test_timeout_s"] = 5
    session.env.measure_tests(uncached=True, reuse=True)
    assert len(session.runs) == 2


def test_a_run_of_another_command_filed_under_this_key_is_not_reused(session):
    first = session.env.measure_tests(uncached=True, reuse=True)
    key = RunKey(**{k: v for k, v in session.recorded()[0].items() if k != "run"})
    session.layout.test_runs.unlink()
    TestRunLog(session.layout.test_runs, session.layout.journal_lock).add(
        key, replace(first, command="true")
    )
    session.env.measure_tests(uncached=True, reuse=True)
    assert len(session.runs) == 2


def test_a_run_with_other_secrets_or_jail_settings_is_not_reused(session):
    session.env.measure_tests(uncached=True, reuse=True)
    session.env.spec["secrets"] = ["TOKEN"]
    session.env.measure_tests(uncached=True, reuse=True)
    assert len(session.runs) == 2


def hide_change(s: Session) -> None:
    git(s.wt, "update-index", "--assume-unchanged", "value.txt")
    s.write("value.txt", "no\n")


@pytest.mark.parametrize(
    ("what", "make"),
    [
        ("an untracked file", lambda s: s.write("new.py", "")),
        ("an ignored file", lambda s: s.write("local.cfg", "x\n")),
        ("an unstaged change", lambda s: s.write("value.txt", "no\n")),
        ("a protected file changed, staged", lambda s: s.stage("bench.py", "print(1)\n")),
        ("a change git is told not to look at", hide_change),
    ],
)
def test_a_worktree_holding_anything_besides_a_tree_has_no_exact_tree(session, what, make):
    make(session)
    assert exact_tree(session.wt, session.env.protection) is None, what


def test_a_staged_change_is_part_of_the_exact_tree(session):
    session.stage("extra.py", "X = 1\n")
    tree = exact_tree(session.wt, session.env.protection)
    session.commit()
    assert tree == git(session.wt, "rev-parse", "HEAD^{tree}")

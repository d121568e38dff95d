"""The per-fix gate holds each change to the tree the last kept change left, not only to
where the cycle started: a test a change added this cycle may not be lost or weakened by the
next (a later change of a real Go library's session deleted a test an earlier one added, and
was kept)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch import modes
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.stage import StageEnv
from autoresearch.gate import keep as gates
from autoresearch.gate.testrun import TestRun
from autoresearch.safety import git as ar_git
from autoresearch.session import spec
from autoresearch.session.record import SetupRecord

FILES = {
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
    "value.py": 'VALUE = "ok"\n',
    "tests/test_value.py": (
        "from value import VALUE\n\n\ndef test_value():\n    assert VALUE == 'ok'\n"
    ),
}
BASELINE = {"outcome": "passed", "passed": 1, "failed": 0, "passing_ids": []}
NEW_TEST = "from value import VALUE\n\n\ndef test_upper():\n    assert VALUE.upper() == 'OK'\n"


class Session:
    def __init__(self, tmp_path: Path, **spec_values):
        repo = make_repo(tmp_path / "target", FILES)
        layout = modes.get("sweep").layout(tmp_path / "sessions" / "s")
        layout.root.mkdir(parents=True)
        self.wt = tmp_path / "wt"
        ar_git.open_worktree(repo, self.wt, "autoresearch/s", ar_git.head(repo))
        layout.worktree().symlink_to(self.wt)
        self.start = ar_git.head(self.wt)
        values = {
            "mode": "sweep",
            "test_timeout_s": 120,
            "commands": {"sandbox": "none"},
            **spec_values,
        }
        record = SetupRecord(
            "s", "sweep", "0", str(repo), "Python", "python -m pytest -q", None,
            "autoresearch/s", self.start, BASELINE, "", None, "",
        )  # fmt: skip
        self.env = StageEnv(layout, spec.SessionSpec(values), record, 1)
        self.gate = gates.TestGate(self.env, self.env.reference_tests())

    def hand_in(self, files: dict[str, str]) -> gates.Handed:
        """One change an agent writes with its tools, handed in as Green's finish_fix does."""
        toolbox = Toolbox("green", self.wt, **self.env.toolbox_options())
        for path, content in files.items():
            toolbox.call("write_file", {"path": path, "content": content})
        return gates.hand_in(self.env, self.gate, toolbox.written, "fix: change")


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return Session(tmp_path)


def test_a_test_the_last_kept_change_added_may_not_be_dropped_by_the_next(session):
    first = session.hand_in({"tests/test_upper.py": NEW_TEST, "value.py": 'VALUE = "ok"  # x\n'})
    assert first.sha
    dropped = session.hand_in({"tests/test_upper.py": "# nothing to test\n"})
    assert not dropped.sha and not dropped.passed
    assert "test_upper" in session.gate.refused()
    assert ar_git.head(session.wt) == first.sha  # the branch holds the test


def test_the_next_change_is_held_to_the_tree_the_last_one_left(session):
    first = session.hand_in({"tests/test_upper.py": NEW_TEST})
    assert session.env.reference_commit() == first.sha
    assert "tests/test_upper.py::test_upper" in session.gate.reference.passing_ids
    # And what the next change may do, it still may: a change to the code only is kept.
    assert session.hand_in({"value.py": 'VALUE = "ok"  # kept\n'}).sha


def test_a_change_refused_moves_nothing(session):
    before = session.env.reference_commit()
    handed = session.hand_in({"value.py": 'VALUE = "broken"\n'})
    assert not handed.sha
    assert session.env.reference_commit() == before == session.start


def test_with_allow_test_edits_the_next_change_may_edit_a_test_the_last_one_added(tmp_path):
    s = Session(tmp_path, allow_test_edits=True)
    assert s.hand_in({"tests/test_upper.py": NEW_TEST}).sha
    edited = NEW_TEST.replace("VALUE.upper() == 'OK'", "VALUE.upper().lower() == 'ok'")
    assert s.hand_in({"tests/test_upper.py": edited}).sha


def test_a_run_that_never_reached_its_tests_holds_nothing(session):
    not_run = TestRun.from_record({"outcome": "timed_out", "passed": 0, "failed": 0})
    session.gate.hold_to(not_run, session.start)
    assert session.env.reference_commit() == session.start
    assert session.gate.reference.outcome == "passed"


def test_git_history_keeps_the_tests_each_kept_change_added(session):
    session.hand_in({"tests/test_upper.py": NEW_TEST})
    session.hand_in({"tests/test_upper.py": ""})
    assert "test_upper" in git(session.wt, "show", "HEAD:tests/test_upper.py")

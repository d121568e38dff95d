"""A batch gate's bisection step runs only the tests that failed at the stage's end, through
pytest's `--lf` (StageEnv.measure_only): what it runs, and when the stack cannot tell."""

from __future__ import annotations

import pytest
from conftest import git
from test_tested_trees import Session

from autoresearch.stack import last_failed_command

SECOND = "def test_other():\n    assert True\n"


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = Session(tmp_path)
    s.write("tests/test_other.py", SECOND)
    git(s.wt, "add", "-A")
    s.commit()
    return s


def test_only_the_suspects_run_and_the_run_is_filed_under_no_tree(session):
    run = session.env.measure_only(frozenset({"tests/test_other.py::test_other"}))
    assert run is not None and run.ok
    assert run.passing_ids == {"tests/test_other.py::test_other"}  # test_value did not run
    assert "--lf" in run.ran
    assert session.recorded() == []  # not a run of the suite: it stands for no tree


def test_a_committed_pytest_cache_is_never_written_through(session, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (session.wt / ".pytest_cache").symlink_to(outside)
    git(session.wt, "add", "-f", ".pytest_cache")
    session.commit()
    assert session.env.measure_only(frozenset({"tests/test_other.py::test_other"})) is None
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        "make test",
        "python -m pytest -q -p no:cacheprovider",
        "pytest --lf",  # the command picks tests by the cache itself
        "pytest --cache-clear",
    ],
)
def test_a_command_whose_tests_cannot_be_picked_by_the_cache_gets_none(command):
    assert last_failed_command(command) is None


def test_pytest_gets_lf_with_nothing_run_when_nothing_is_listed():
    assert last_failed_command("python -m pytest -q tests") == (
        "python -m pytest --lf --lfnf=none -q tests"
    )

"""A session that cannot be resumed as things stand is refused before any stage, saying how
to recover: asked of `done`'s input function (scripts.session.done_inputs) on a session laid
out as setup leaves it, without Snakemake. tests/e2e/test_bad_input.py runs that wiring once
(the exit, the one line, no stage run)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, calc_repo, git

import scripts.session
from autoresearch import __version__
from autoresearch.errors import SessionError
from autoresearch.session import spec
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord

BRANCH = "autoresearch/improve"


class PastTheChecks(Exception):
    """`done` asked for its loop's checkpoints: the session may be resumed."""


class Checkpoints:
    """The setup checkpoint has run; any other is where the checks are passed."""

    session = SimpleNamespace(get=lambda **wildcards: None)

    def __getattr__(self, name: str):
        raise PastTheChecks(name)


CHECKPOINTS = Checkpoints()


@pytest.fixture
def set_up(tmp_path, monkeypatch):
    """Session `s` as setup leaves it: frozen spec, setup.json, its branch and a worktree in
    the store that sessions/s/worktree links to."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    target = calc_repo(tmp_path / "target")
    base = git(target, "rev-parse", "HEAD")
    store = tmp_path / "store" / "s"
    git(target, "worktree", "add", "-q", "-b", BRANCH, str(store))
    work = tmp_path / "work"
    layout = SessionLayout(work / "sessions" / "s")
    layout.root.mkdir(parents=True)
    layout.worktree().symlink_to(store)
    values = {"mode": "sweep", "target": str(target), "agent": {"backend": "ruff"}}
    spec.freeze(spec.load("s", ROOT, values), layout.spec)
    SetupRecord(
        name="s",
        mode="sweep",
        version=__version__,
        target=str(target),
        stack="python",
        test_command="python -m pytest -q",
        linter_command=None,
        branch=BRANCH,
        base_commit=base,
        baseline={},
        date="2026-12-01",
        config_file=None,
        conventions="",
    ).save(layout)
    return SimpleNamespace(work=work, layout=layout, target=target, base=base, store=store)


def refusal(work: Path) -> str:
    with contextlib.chdir(work), pytest.raises(SessionError) as caught:
        scripts.session.done_inputs("s", CHECKPOINTS, {})
    return str(caught.value)


def test_a_session_as_setup_left_it_resumes(set_up):
    with contextlib.chdir(set_up.work), pytest.raises(PastTheChecks):
        scripts.session.done_inputs("s", CHECKPOINTS, {})


def test_a_deleted_worktree_is_named_with_the_command_that_recreates_it(set_up):
    git(set_up.target, "worktree", "remove", "--force", str(set_up.store))
    said = refusal(set_up.work)
    assert "sessions/s/worktree is gone" in said
    assert f"git -C {set_up.target} worktree add {set_up.store} {BRANCH}" in said


def test_a_deleted_branch_is_named_with_the_commit_to_recreate_it_from(set_up):
    git(set_up.target, "worktree", "remove", "--force", str(set_up.store))
    git(set_up.target, "branch", "-D", BRANCH)
    said = refusal(set_up.work)
    assert f"branch {BRANCH} is gone" in said
    assert f"git -C {set_up.target} branch {BRANCH} {set_up.base[:12]}" in said


def test_a_session_made_by_a_newer_version_is_refused(set_up):
    setup = set_up.layout.setup
    setup.write_text(setup.read_text().replace(f'"{__version__}"', '"9.0.0"'))
    said = refusal(set_up.work)
    assert "made by autoresearch 9.0.0" in said and "upgrade autoresearch" in said

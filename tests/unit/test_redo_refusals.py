"""`autoresearch redo` refuses, naming why, what it cannot redo faithfully."""

from __future__ import annotations

import pytest

from autoresearch.session import redo
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord


def a_session(tmp_path, mode: str) -> SessionLayout:
    layout = SessionLayout(tmp_path / "sessions" / "s")
    layout.root.mkdir(parents=True)
    SetupRecord(
        name="s",
        mode=mode,
        version="0",
        target=str(tmp_path / "repo"),
        stack=None,
        test_command="pytest",
        linter_command=None,
        branch="autoresearch/s",
        base_commit="0" * 40,
        baseline={},
        date="2026-11-30",
        config_file=None,
        conventions="",
    ).save(layout)
    return layout


@pytest.mark.parametrize("lens", ["security", "fix", "predict"])
def test_a_lens_session_is_refused_rather_than_redone_wrongly(tmp_path, lens):
    layout = a_session(tmp_path, lens)
    with pytest.raises(redo.RedoError, match=f"a {lens} session cannot be redone stage by stage"):
        redo.plan(layout.root, redo.Step(1, "red", ""))
    assert sorted(p.name for p in layout.root.iterdir()) == ["setup.json"]  # nothing moved


def test_a_stage_the_mode_does_not_have_is_named_with_the_modes_stages(tmp_path):
    layout = a_session(tmp_path, "sweep")
    with pytest.raises(redo.RedoError, match="red, sanitize, green, refactor, evaluate"):
        redo.plan(layout.root, redo.Step(1, "propose", ""))

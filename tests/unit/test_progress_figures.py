"""Every mode's `progress` is one record with the figures `autoresearch status` reads: when
it was a dict, a mode that left a key out made status crash with a KeyError (the lenses,
fix, learn and ship lacked "started")."""

from __future__ import annotations

import pytest

from autoresearch import modes
from autoresearch.modes import MODES
from autoresearch.modes.base import Progress


@pytest.mark.parametrize("name", list(MODES))
def test_every_modes_progress_says_whether_its_loop_started(name, tmp_path):
    mode = modes.get(name)
    layout = mode.layout(tmp_path / "s")
    layout.root.mkdir(parents=True)
    figures = mode.views.progress(layout)
    assert isinstance(figures, Progress)
    assert figures.started is False

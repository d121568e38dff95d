"""Every mode's `progress` gives the figures `autoresearch status` reads: a mode that left
one out made status crash with a KeyError (the lenses, fix, learn and ship lacked
"started")."""

from __future__ import annotations

import pytest

from autoresearch import modes
from autoresearch.modes import MODES


@pytest.mark.parametrize("name", list(MODES))
def test_every_modes_progress_says_whether_its_loop_started(name, tmp_path):
    mode = modes.get(name)
    layout = mode.layout(tmp_path / "s")
    layout.root.mkdir(parents=True)
    figures = mode.progress(layout)
    assert figures["started"] is False
    assert {"cycles", "commits", "fixes", "tests", "open_issues"} <= figures.keys()

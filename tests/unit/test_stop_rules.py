"""The stop cascade every cycle goes through, without Snakemake."""

from __future__ import annotations

import json
from pathlib import Path

from autoresearch.modes.sweep import Sweep
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.session.spec import SessionSpec

# A sweep decision.json as the loop writes it.
WRITTEN = json.loads((Path(__file__).parent / "decisions" / "sweep.json").read_text())


def test_ten_cycle_cap_when_nothing_else_is_set(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    for n in (8, 9):
        write_json(layout.decision(n), WRITTEN | {"cycle": n, "refactor_changes": 1})

    class Env:
        spec = SessionSpec(
            {"teams": ["red", "green", "refactor"], "max_cycles": None, "stop_below": None}
        )
        cycle = 10
        track = ""

        def __init__(self) -> None:
            self.layout = layout

        def finished(self, path):
            return json.loads(path.read_text())

    decision = {"broken": False, "refactor_changes": 1, "fixed": [1]}
    Sweep().apply_policy(Env(), decision)
    assert decision["stop"] and "cap of 10 cycles" in decision["reason"]
    Env.cycle = 9
    decision = {"broken": False, "refactor_changes": 1, "fixed": [1]}
    Sweep().apply_policy(Env(), decision)
    assert not decision["stop"]

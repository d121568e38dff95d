"""A job reads a finished file of its session once: the previous decision and an earlier
stage's record are parsed on first use and kept by that job's StageEnv alone."""

from __future__ import annotations

import json

from autoresearch import modes
from autoresearch.engine.stage import StageEnv
from autoresearch.session import spec
from autoresearch.session.record import SetupRecord


def env_of(tmp_path, cycle: int) -> StageEnv:
    layout = modes.get("sweep").layout(tmp_path / "s")
    record = SetupRecord(
        "s", "sweep", "0.1.0", "/t", None, "true", None, "b", "c", {}, "", None, ""
    )
    return StageEnv(layout, spec.SessionSpec({"mode": "sweep"}), record, cycle)


def write(path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_a_job_parses_the_previous_decision_once_and_hands_out_copies(tmp_path):
    env = env_of(tmp_path, 2)
    path = env.layout.decision(1)
    write(path, {"cycle": 1, "end_commit": "a", "fixed": []})
    first = env.previous_decision()
    first["fixed"].append("changed by a caller")
    write(path, {"cycle": 1, "end_commit": "b", "fixed": []})  # not read again in this job
    assert env.previous_decision() == {"cycle": 1, "end_commit": "a", "fixed": []}
    assert env.cycle_start() == "a"
    # Another job (another StageEnv) reads the file for itself: nothing is shared.
    assert env_of(tmp_path, 2).previous_decision()["end_commit"] == "b"


def test_a_job_parses_an_earlier_stages_record_once(tmp_path):
    env = env_of(tmp_path, 1)
    path = env.cycle_dir / "green.json"
    write(path, {"fixed": [{"id": "F-001"}]})
    env.stage_record("green")["fixed"].clear()
    path.write_text("not json any more")
    assert env.stage_record("green") == {"fixed": [{"id": "F-001"}]}

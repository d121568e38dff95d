"""The records sweep, narrow and broad cycles end with: each decision.json's keys are one
typed record, held to it when written and read back into it (a session started on the
previous release resumes: tests/unit/decisions holds decision.json files as it wrote them)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from autoresearch import modes
from autoresearch.engine import loop
from autoresearch.engine.cycle_step import CycleStep
from autoresearch.engine.stage import StageEnv
from autoresearch.errors import SessionError
from autoresearch.modes.broad.step import TrackStep
from autoresearch.modes.narrow.step import GoalStep, NarrowStep
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal

WRITTEN = Path(__file__).parent / "decisions"
RECORDS = {"sweep": CycleStep, "narrow": NarrowStep, "broad": TrackStep}


def written(mode: str) -> dict:
    """A decision.json of `mode` as the loop wrote it before its keys had a record."""
    return json.loads((WRITTEN / f"{mode}.json").read_text())


def test_sweep_narrow_and_broad_name_their_record():
    assert {name: modes.get(name).decision_extra for name in RECORDS} == RECORDS


@pytest.mark.parametrize("mode", sorted(RECORDS))
def test_a_decision_written_before_the_records_reads_back_into_its_record(tmp_path, mode):
    path = tmp_path / "decision.json"
    path.write_text((WRITTEN / f"{mode}.json").read_text())
    decision = loop.read_decision(path, modes.get(mode).decision_extra)
    assert isinstance(decision.extra, RECORDS[mode])
    assert decision.extra.fixed == written(mode)["fixed"]
    again = tmp_path / "again.json"
    loop.write_decision(again, decision)
    assert again.read_bytes() == path.read_bytes()  # the same file, key for key


def test_the_narrow_goal_record_is_typed_too(tmp_path):
    path = tmp_path / "decision.json"
    write_json(path, written("narrow"))
    goal = loop.read_decision(path, modes.get("narrow").decision_extra).extra.narrow
    assert isinstance(goal, GoalStep)
    assert (goal.angle, goal.value, goal.current, goal.reverted) == ("first", 4.0, 3.0, True)


def test_the_broad_track_keys_are_typed(tmp_path):
    path = tmp_path / "decision.json"
    write_json(path, written("broad"))
    step = loop.read_decision(path, modes.get("broad").decision_extra).extra
    assert step.track_status == "aborted" and step.observations.startswith("Hypothesis h3")
    assert step.first_test_verdict  # a key only a cycle that reverted has


@pytest.mark.parametrize("mode", sorted(RECORDS))
@pytest.mark.parametrize("key", ["fixed", "open", "commits_total", "session_stop"])
def test_a_cycle_decision_missing_a_key_is_not_written(tmp_path, mode, key):
    path = tmp_path / "cycles" / "004" / "decision.json"
    record = written(mode)
    del record[key]
    with pytest.raises(SessionError) as err:
        loop.write_decision(path, record, extra=RECORDS[mode])
    assert str(err.value) == f"{path}: key '{key}' missing (a {RECORDS[mode].__name__})"
    assert not path.parent.exists()


@pytest.mark.parametrize("mode", sorted(RECORDS))
def test_a_cycle_decision_with_a_key_its_record_lacks_is_not_written(tmp_path, mode):
    # A misspelt key would be written, and every reader of the real one would miss it.
    path = tmp_path / "cycles" / "004" / "decision.json"
    record = written(mode) | {"refactor_change": 0}
    with pytest.raises(SessionError, match=r"004/decision\.json: key 'refactor_change' is not"):
        loop.write_decision(path, record, extra=RECORDS[mode])
    assert not path.parent.exists()


@pytest.mark.parametrize("mode, key", [("narrow", "narrow"), ("broad", "track_status")])
def test_a_cycle_without_its_modes_own_key_is_not_written(tmp_path, mode, key):
    # Sweep's record would take it: narrow's and broad's must have what they add.
    path = tmp_path / "decision.json"
    record = written(mode)
    del record[key]
    with pytest.raises(SessionError, match=f"key '{key}' missing"):
        loop.write_decision(path, record, extra=RECORDS[mode])
    assert not path.exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda goal: goal.pop("next_angle"), "key 'narrow.next_angle' missing (a GoalStep)"),
        (lambda goal: goal.update(curent=3.0), "key 'narrow.curent' is not one of a GoalStep's"),
    ],
)
def test_a_narrow_goal_record_missing_or_with_a_stray_key_is_not_written(tmp_path, change, message):
    path = tmp_path / "narrow" / "decision.json"
    record = written("narrow")
    change(record["narrow"])
    with pytest.raises(SessionError) as err:
        loop.write_decision(path, record, extra=NarrowStep)
    assert str(err.value) == f"{path}: {message}"
    assert not path.parent.exists()


def test_a_narrow_goal_record_that_is_no_mapping_is_not_written(tmp_path):
    path = tmp_path / "decision.json"
    with pytest.raises(SessionError, match=r"decision\.json: key 'narrow' must be a mapping"):
        loop.write_decision(path, written("narrow") | {"narrow": None}, extra=NarrowStep)
    assert not path.exists()


def test_a_resumed_narrow_session_reads_where_its_angles_stand(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    write_json(layout.decision(2), written("narrow"))
    env = StageEnv(layout=layout, spec=None, record=None, cycle=3)  # type: ignore[arg-type]
    goal = modes.get("narrow").previous_goal(env)
    assert (goal.next_angle, goal.regressions, goal.exhausted) == ("first", 2, [])


def test_a_resumed_broad_track_reads_its_decisions_into_its_record(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    write_json(layout.decision(1, "h3"), written("broad"))
    (read,) = journal.load_decisions(layout, "h3", TrackStep)
    assert isinstance(read.extra, TrackStep) and read.extra.track_status == "aborted"
    # The index keeps the test run's counts only; the record reads it all the same.
    (again,) = journal.load_decisions(layout, "h3", TrackStep)
    assert again.extra == read.extra and "tail" not in again.tests


class Cycle:
    """A cycle mode as loop.decide sees it: its record, the stop rules already spoken in
    the judge's record, and session.md written where the mode writes it."""

    def __init__(self, extra, summary: Path) -> None:
        self.decision_extra, self.summary = extra, summary
        self.views = self  # its session.md too

    def apply_policy(self, env, decision) -> None:
        pass

    def write_summary(self, env, pending=None) -> None:
        self.summary.write_text(f"cycle {pending['cycle']}\n")

    def log_line(self, env, decision) -> str:
        return ""

    def decision_writer(self, env):
        return None


@pytest.mark.parametrize("mode", sorted(RECORDS))
def test_a_cycle_its_record_refuses_leaves_no_results_row_or_summary(tmp_path, mode):
    # The results row and session.md come before decision.json: a cycle decision refused
    # at the end would leave a row and a summary of a cycle that was never decided.
    out, results, summary = tmp_path / "004" / "decision.json", [], tmp_path / "session.md"
    record = written(mode)
    del record["skipped"]
    judged = loop.Judged(record, lambda d: results.append(d["cycle"]))
    with pytest.raises(SessionError, match=r"004/decision\.json: key 'skipped' missing"):
        loop.decide(SimpleNamespace(log=print), Cycle(RECORDS[mode], summary), lambda: judged, out)
    assert results == [] and not summary.exists() and not out.exists()
    judged = loop.Judged(written(mode), lambda d: results.append(d["cycle"]))
    loop.decide(SimpleNamespace(log=print), Cycle(RECORDS[mode], summary), lambda: judged, out)
    assert results == [written(mode)["cycle"]] and summary.exists() and out.exists()

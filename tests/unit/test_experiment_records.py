"""The record an experiment iteration ends with: decision.json's keys are one typed record
(ExperimentStep), held to it when written and read back into it. tests/unit/decisions holds
one decision.json of each path as the release before the record wrote it, so a session
started on it resumes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from autoresearch import modes
from autoresearch.engine import loop
from autoresearch.engine.loop import Status
from autoresearch.errors import SessionError
from autoresearch.modes.experiment.step import ExperimentStep

WRITTEN = Path(__file__).parent / "decisions"
PATHS = ["kept", "discarded", "crash", "guard_failed", "batch", "sequential", "holdout_disagrees"]


def written(path: str) -> dict:
    """An experiment's decision.json of `path` as the loop wrote it before the record."""
    return json.loads((WRITTEN / f"experiment-{path}.json").read_text())


def test_experiment_names_its_record():
    assert modes.get("experiment").decision_extra is ExperimentStep


@pytest.mark.parametrize("path", PATHS)
def test_an_iteration_written_before_the_record_reads_back_into_it(tmp_path, path):
    out = tmp_path / "decision.json"
    out.write_text((WRITTEN / f"experiment-{path}.json").read_text())
    decision = loop.read_decision(out, modes.get("experiment").decision_extra)
    assert isinstance(decision.extra, ExperimentStep)
    assert decision.extra.best == written(path)["best"]
    again = tmp_path / "again.json"
    loop.write_decision(again, decision)
    assert again.read_bytes() == out.read_bytes()  # the same file, key for key


@pytest.mark.parametrize(
    "path, status",
    [
        ("kept", Status.KEPT),
        ("discarded", Status.DISCARDED),
        ("crash", Status.CRASH),
        ("guard_failed", Status.GUARD_FAILED),
        ("holdout_disagrees", Status.HOLDOUT_DISAGREES),
    ],
)
def test_each_path_reads_as_its_status_and_keeps_its_own_keys(tmp_path, path, status):
    decision = loop.Decision.from_json(written(path), "decision.json", ExperimentStep)
    assert decision.status is status and decision.extra.iteration == decision.cycle
    own = {
        "kept": lambda s: s.files_changed == s.files and s.guard is None,
        "discarded": lambda s: s.files_changed == [] and not s.improved,
        "crash": lambda s: "timed out" in s.error and s.metric_value is None,
        "guard_failed": lambda s: s.guard["ok"] is False and s.guard_ok is False,
        "holdout_disagrees": lambda s: s.holdout["agrees"] is False and s.improved,
    }
    assert own[path](decision.extra)


def test_a_batch_keeps_its_candidates_as_the_records_they_are():
    step = loop.Decision.from_json(written("batch"), "decision.json", ExperimentStep).extra
    assert step.candidate == "c1" and step.patch.endswith("c1/proposal.patch")
    assert [(c["candidate"], c["status"]) for c in step.candidates] == [
        ("c1", "kept"),
        ("c2", "syntax_error"),
        ("c3", "guard_failed"),
    ]


def test_the_sequential_figures_are_typed_and_a_null_one_is_written_back(tmp_path):
    record = written("sequential")
    step = loop.Decision.from_json(record, "decision.json", ExperimentStep).extra
    assert step.pairs == step.sequential["samples"] and step.effect == step.sequential["effect"]
    assert step.incumbent_samples and step.machine
    # No interval yet and an incumbent mean of 0: the keys are there, as null.
    out = tmp_path / "decision.json"
    loop.write_decision(out, record | {"ci": None, "relative_effect": None}, extra=ExperimentStep)
    again = json.loads(out.read_text())
    assert list(again) == list(record) and again["ci"] is again["relative_effect"] is None


@pytest.mark.parametrize("key", ["iteration", "verdict", "best", "session_stop", "flags"])
def test_an_iteration_missing_a_key_is_not_written(tmp_path, key):
    out = tmp_path / "iterations" / "004" / "decision.json"
    record = written("kept")
    del record[key]
    with pytest.raises(SessionError) as err:
        loop.write_decision(out, record, extra=ExperimentStep)
    assert str(err.value) == f"{out}: key '{key}' missing (a ExperimentStep)"
    assert not out.parent.exists()


@pytest.mark.parametrize("path", ["kept", "batch"])
def test_an_iteration_with_a_key_its_record_lacks_is_not_written(tmp_path, path):
    # A misspelt key would be written, and every reader of the real one would miss it.
    out = tmp_path / "iterations" / "004" / "decision.json"
    record = written(path) | {"verdcit": "better"}
    with pytest.raises(SessionError) as err:
        loop.write_decision(out, record, extra=ExperimentStep)
    assert str(err.value) == f"{out}: key 'verdcit' is not one of a ExperimentStep's"
    assert not out.parent.exists()


class Iteration:
    """The experiment mode as loop.decide sees it: its record, the stop rules already
    spoken in the judge's record, and session.md written where the mode writes it."""

    decision_extra = ExperimentStep

    def __init__(self, summary: Path) -> None:
        self.summary = summary
        self.views = self  # its session.md too

    def apply_policy(self, env, decision) -> None:
        pass

    def write_summary(self, env, pending=None) -> None:
        self.summary.write_text(f"iteration {pending['iteration']}\n")

    def log_line(self, env, decision) -> str:
        return ""

    def decision_writer(self, env):
        return None


def test_an_iteration_its_record_refuses_leaves_no_results_row_or_summary(tmp_path):
    out, rows, summary = tmp_path / "004" / "decision.json", [], tmp_path / "session.md"
    record = written("discarded")
    del record["best_value"]
    judged = loop.Judged(record, lambda d: rows.append(d["iteration"]))
    with pytest.raises(SessionError, match=r"004/decision\.json: key 'best_value' missing"):
        loop.decide(SimpleNamespace(log=print), Iteration(summary), lambda: judged, out)
    assert rows == [] and not summary.exists() and not out.exists()
    judged = loop.Judged(written("discarded"), lambda d: rows.append(d["iteration"]))
    loop.decide(SimpleNamespace(log=print), Iteration(summary), lambda: judged, out)
    assert rows == [2] and summary.exists() and out.exists()

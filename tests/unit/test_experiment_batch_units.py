"""Experiment batches, retries and missions without Snakemake: the pure rules, the spec
keys, the claims between siblings, the logs and the run mirror."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from autoresearch.agents import prompts
from autoresearch.agents.backends.base import StageLimits
from autoresearch.engine.stage import StageEnv
from autoresearch.modes.experiment import candidates, log, runs
from autoresearch.modes.experiment.policy import (
    CRASH,
    DISCARDED,
    GUARD_FAILED,
    KEPT,
    NO_CHANGE,
    SYNTAX_ERROR,
    pick,
    ref,
    representative,
    retry_offers,
)
from autoresearch.modes.experiment.program import MISSION_DEFAULTS, from_frozen, resolve
from autoresearch.session.layout import SessionLayout
from autoresearch.session.spec import SpecError

ROOT = Path(__file__).resolve().parents[2]


def cand(name: str, status: str, value: float | None = None, **kw) -> dict:
    return {"candidate": name, "status": status, "metric_value": value, "iteration": 1} | kw


# --- picking the batch's winner ------------------------------------------------------


def test_pick_keeps_the_best_of_the_candidates_that_beat_the_incumbent():
    batch = [cand("c1", KEPT, 8), cand("c2", KEPT, 7), cand("c3", DISCARDED, 5)]
    assert pick(batch, "minimize")["candidate"] == "c2"
    assert pick(batch, "maximize")["candidate"] == "c1"


def test_pick_breaks_a_tie_by_the_lowest_candidate_and_keeps_none_without_a_winner():
    assert pick([cand("c1", KEPT, 7), cand("c2", KEPT, 7)], "minimize")["candidate"] == "c1"
    assert pick([cand("c1", DISCARDED, 1), cand("c2", CRASH)], "minimize") is None


def test_a_batch_without_a_keep_is_summarised_by_its_most_informative_candidate():
    batch = [
        cand("c1", NO_CHANGE),
        cand("c2", CRASH),
        cand("c3", GUARD_FAILED, 1),
        cand("c4", DISCARDED, 9),
        cand("c5", DISCARDED, 8),
        cand("c6", SYNTAX_ERROR),
    ]
    assert representative(batch, "minimize")["candidate"] == "c5"
    assert representative(batch[:3], "minimize")["candidate"] == "c3"
    assert representative([batch[0], batch[5], batch[1]], "minimize")["candidate"] == "c2"


def test_an_experiment_is_named_by_its_iteration_or_its_candidate():
    assert ref({"iteration": 4}) == 4
    assert ref({"iteration": 4, "candidate": "c2"}) == "4/c2"


# --- retries -----------------------------------------------------------------------------


def exp(iteration, status, files, changed=(), **kw):
    return {
        "iteration": iteration,
        "status": status,
        "files": list(files),
        "files_changed": list(changed),
        "hypothesis": f"idea {iteration}",
    } | kw


def test_a_discard_is_offered_once_a_later_kept_change_touches_its_files():
    history = [
        exp(1, DISCARDED, ["a.py"]),
        exp(2, GUARD_FAILED, ["b.py"]),
        exp(3, KEPT, ["a.py"], ["a.py"]),
    ]
    offers = retry_offers(history)
    assert [(o["experiment"]["iteration"], o["kept"]["iteration"]) for o in offers] == [(1, 3)]


def test_no_retry_for_other_files_a_same_batch_keep_crashes_or_one_already_retried():
    same_batch = [
        exp(1, DISCARDED, ["a.py"], candidate="c1"),
        exp(1, KEPT, ["a.py"], ["a.py"], candidate="c2"),
    ]
    assert retry_offers(same_batch) == []
    crashed = [exp(1, CRASH, ["a.py"]), exp(2, KEPT, ["a.py"], ["a.py"])]
    assert retry_offers(crashed) == []
    retried = [
        exp(1, DISCARDED, ["a.py"]),
        exp(2, KEPT, ["a.py"], ["a.py"]),
        exp(3, DISCARDED, ["a.py"], retry_of=1),
        exp(4, KEPT, ["a.py"], ["a.py"]),
    ]
    assert retry_offers(retried) == []  # #1 had its retry, and a retry is not offered
    other = [exp(1, DISCARDED, ["a.py"]), exp(2, KEPT, ["b.py"], ["b.py"])]
    assert retry_offers(other) == []


def test_the_brief_lists_what_may_be_worth_retrying():
    ctx = prompts.BriefContext(team="experiment", target_path="/t", branch="b")
    why = "may be worth retrying now: it was rejected when the best was ms = 5 (5 is not ...)"
    ctx.experiment = {"goal": "g", "retry": [{"id": "#3", "hypothesis": "Cache it", "why": why}]}
    brief = prompts.build_brief(ctx, None, StageLimits())
    assert "## May be worth retrying now" in brief.task
    assert f'#3 "Cache it": {why}' in brief.task
    assert brief.data["retry"][0]["id"] == "#3"


# --- the spec: parallel, resources, missions ---------------------------------------------

BASE = {"goal": "g", "scope": ["a.py"], "metric": {"command": "m", "direction": "minimize"}}


def spec(**experiment) -> dict:
    return {"experiment": BASE | {"max_iterations": 3} | experiment}


@pytest.mark.parametrize("value", [0, "3", True, 65])
def test_parallel_must_be_a_small_whole_number(tmp_path, value):
    with pytest.raises(SpecError, match="key 'experiment.parallel'"):
        resolve(spec(parallel=value), tmp_path, "s.yaml")


def test_resources_name_where_the_measurement_runs(tmp_path):
    c = resolve(spec(parallel=3, resources={"gpu": 1, "slurm_partition": "a100"}), tmp_path, "s")
    assert (c.parallel, c.resources) == (3, {"gpu": 1, "slurm_partition": "a100"})
    with pytest.raises(SpecError, match=r"resources.mem_mb'.*--set-resources"):
        resolve(spec(resources={"mem_mb": 100}), tmp_path, "s.yaml")
    with pytest.raises(SpecError, match="resources.gpu'"):
        resolve(spec(resources={"gpu": True}), tmp_path, "s.yaml")


def test_the_new_keys_survive_the_frozen_spec(tmp_path):
    c = resolve(spec(parallel=2, resources={"gpu": 1}, output="out"), tmp_path, "s.yaml")
    assert from_frozen(c.to_spec()) == c
    assert from_frozen(spec()["experiment"] | {"max_duration": None}).parallel == 1


def test_the_rules_and_the_schema_know_the_same_measurement_resources():
    import scripts.experiment

    schema = yaml.safe_load((ROOT / "config/schema.yaml").read_text())
    section = schema["properties"]["experiment"]["properties"]["resources"]["properties"]
    assert list(scripts.experiment.MEASURE_RESOURCES) == list(section)


def mission(tmp_path: Path, evaluator: dict | str | None = None, text: str | None = None) -> Path:
    folder = tmp_path / "missions" / "speed"
    folder.mkdir(parents=True)
    (folder / "mission.md").write_text(text or "# Faster parse\n\nProse about parsing.\n")
    if evaluator is not None:
        body = evaluator if isinstance(evaluator, str) else json.dumps(evaluator)
        (folder / "evaluator.json").write_text(body)
    return folder


def test_a_mission_folder_gives_the_command_the_goal_and_runtime_only_stop_rules(tmp_path):
    mission(tmp_path, {"command": "python eval.py", "timeout_s": 60})
    values = {"experiment": {"mission": "missions/speed", "scope": ["a.py"], "max_runtime": "8h"}}
    c = resolve(values, tmp_path, "s.yaml")
    assert (c.command, c.format, c.direction, c.goal) == (
        "python eval.py",
        "evaluator",
        "maximize",
        "Faster parse",
    )
    assert (c.max_duration_s, c.verify_timeout_s) == (8 * 3600, 60)
    assert (c.stuck_limit, c.plateau_limit, c.crash_loop_after) == (None, None, 0)
    assert set(MISSION_DEFAULTS) == {"stuck_after", "plateau_window", "crash_loop_after"}
    assert c.human_files() == ["missions/speed/mission.md", "missions/speed/evaluator.json"]
    assert c.research_file(tmp_path) == tmp_path / "missions/speed/mission.md"
    # The session spec still decides: it may bring a stop rule back.
    values["experiment"]["stuck_after"] = 5
    assert resolve(values, tmp_path, "s.yaml").stuck_limit == 5


@pytest.mark.parametrize(
    "evaluator, message",
    [
        (None, "evaluator.json does not exist"),
        ("{not json", "evaluator.json: not valid JSON"),
        ({"script": "eval.py"}, "evaluator.json: unknown key 'script'"),
        ({"timeout_s": 5}, "evaluator.json: required key 'command' is not set"),
        ({"command": "e", "contract": {"score": "number"}}, "key 'contract' must be an object"),
    ],
)
def test_a_bad_mission_folder_names_the_file_and_key(tmp_path, evaluator, message):
    mission(tmp_path, evaluator)
    values = {"experiment": {"mission": "missions/speed", "scope": ["a.py"], "max_runtime": 60}}
    with pytest.raises(SpecError, match=message):
        resolve(values, tmp_path, "s.yaml")


def test_a_mission_needs_a_runtime_and_excludes_program_md(tmp_path):
    mission(tmp_path, {"command": "e"})
    values = {"experiment": {"mission": "missions/speed", "scope": ["a.py"], "max_iterations": 3}}
    with pytest.raises(SpecError, match="required key 'experiment.max_runtime'"):
        resolve(values, tmp_path, "s.yaml")
    values["experiment"] |= {"max_runtime": 60, "program": "program.md"}
    with pytest.raises(SpecError, match="'experiment.program' and 'experiment.mission'"):
        resolve(values, tmp_path, "s.yaml")


# --- claims between siblings ---------------------------------------------------------------


def candidate_env(root: Path, name: str) -> candidates.CandidateEnv:
    layout = SessionLayout(root, "iterations")
    base = StageEnv(layout=layout, spec=None, record=None, cycle=2)  # type: ignore[arg-type]
    return candidates.candidate_env(base, name)


def test_a_siblings_claimed_hypothesis_is_refused_and_a_rerun_drops_its_own_claim(tmp_path):
    c1, c2 = candidate_env(tmp_path, "c1"), candidate_env(tmp_path, "c2")
    assert c1.cycle_dir == tmp_path / "iterations/002/c1"
    assert c1.worktree == tmp_path / "tracks/c1/worktree"
    assert candidates.claim(c1, "Cache the tokenizer", 0.85) is None
    taken = candidates.claim(c2, "cache the tokenizer!", 0.85)
    assert taken == {"iteration": 2, "candidate": "c1", "hypothesis": "Cache the tokenizer"}
    assert candidates.claim(c2, "Unroll the loop", 0.85) is None
    assert candidates.claim(c1, "Cache the tokenizer again", 0.85) is None  # its own claim
    candidates.release_claim(c1)
    assert candidates.claim(c2, "cache the tokenizer!", 0.85) is None


# --- logs ---------------------------------------------------------------------------------


def test_the_jsonl_log_skips_a_logged_candidate_but_not_its_siblings(tmp_path):
    path = tmp_path / "experiments.jsonl"
    assert log.append_jsonl(path, {"id": 1, "candidate": "c1"})
    assert log.append_jsonl(path, {"id": 1, "candidate": "c2"})
    assert not log.append_jsonl(path, {"id": 1, "candidate": "c1"})
    assert log.append_jsonl(path, {"id": 2})
    assert not log.append_jsonl(path, {"id": 2})
    assert len(path.read_text().splitlines()) == 3


def record(iteration: int, **kw) -> dict:
    base = {
        "iteration": iteration,
        "end_commit": "abc",
        "metric_value": 5.0,
        "baseline_value": 6.0,
        "guard_ok": None,
        "status": KEPT,
        "hypothesis": "h",
        "timestamp": "t",
    }
    return base | kw


def test_the_tsv_gets_a_candidate_column_for_batches_only(tmp_path):
    path = tmp_path / "experiments.tsv"
    log.write_tsv(path, "run", [record(0), record(1)])
    assert path.read_text().splitlines()[0].split("\t")[:3] == ["run_id", "iteration", "commit"]
    batch = record(1, candidates=[record(1, candidate="c1"), record(1, candidate="c2")])
    log.write_tsv(path, "run", [record(0), batch])
    rows = [line.split("\t") for line in path.read_text().splitlines()]
    assert rows[0][:3] == ["run_id", "iteration", "candidate"]
    assert [r[2] for r in rows[1:]] == ["", "c1", "c2"]


# --- the run mirror --------------------------------------------------------------------------


def session_with_run(tmp_path: Path) -> SessionLayout:
    layout = SessionLayout(tmp_path / "sessions" / "s", "iterations")
    (layout.root / "evaluations").mkdir(parents=True)
    (layout.root / "evaluations" / "iteration-0000.json").write_text("{}")
    layout.decision_log.write_text("# Decision log\n")
    return layout


def test_a_run_is_written_without_overwriting_another_runs_folder(tmp_path):
    layout = session_with_run(tmp_path)
    runs_dir = tmp_path / "mission" / "runs"
    other = runs_dir / "s-20260101T000000Z"
    other.mkdir(parents=True)
    (other / "run.json").write_text(json.dumps({"run_id": other.name, "session": "elsewhere"}))
    run = {"run_id": other.name, "session": "s"}
    folder = runs.claim(runs_dir, other.name, "s")
    assert folder.name == f"{other.name}-2"
    runs.sync(layout, folder, run, "# Run\n", {})
    assert json.loads((other / "run.json").read_text())["session"] == "elsewhere"
    assert (folder / "evaluations" / "iteration-0000.json").exists()
    assert (folder / "decision-log.md").read_text() == "# Decision log\n"
    # The same run claimed again (a rerun of setup) gets its own folder back, and a later
    # sync replaces its files: never a second copy.
    layout.decision_log.write_text("# Decision log\nmore\n")
    assert runs.claim(runs_dir, other.name, "s") == folder
    runs.sync(layout, folder, run, "# Run\n", {})
    assert (folder / "decision-log.md").read_text().endswith("more\n")
    assert sorted(p.name for p in runs_dir.iterdir()) == [other.name, folder.name]
    # Another session's folder is never synced into.
    with pytest.raises(RuntimeError, match="not the folder of session s"):
        runs.sync(layout, other, run, "# Run\n", {})


def test_the_measuring_jobs_carry_the_resources_and_decide_only_when_it_measures(
    tmp_path, monkeypatch
):
    import scripts.experiment

    monkeypatch.chdir(tmp_path)
    c = resolve(spec(parallel=3, resources={"gpu": 1}, remeasure_every=2), tmp_path, "s")
    frozen = tmp_path / "sessions" / "x" / "session.yaml"
    frozen.parent.mkdir(parents=True)
    frozen.write_text(yaml.safe_dump({"mode": "experiment", "experiment": c.to_spec()}))

    class Wildcards:
        name, cycle = "x", "003"

    measure = scripts.experiment.measuring_resources("experiment_measure")
    decide = scripts.experiment.measuring_resources("experiment_decide")
    assert measure["gpu"](Wildcards) == 1 and measure["qos"](Wildcards) is None
    assert decide["gpu"](Wildcards) is None  # a batch's decide measures nothing here
    Wildcards.cycle = "004"
    assert decide["gpu"](Wildcards) == 1  # ... but the incumbent, every 2nd iteration

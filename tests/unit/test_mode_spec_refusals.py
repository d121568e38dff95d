"""A mode's spec refused before anything runs: the message names the file and the key.

Each mode checks its own keys in the setup rule's input function (preflight calls
Setup.check_spec), the same wiring for every mode, run once through Snakemake in
tests/e2e/test_bad_input.py; the variants are asked here without a Snakemake start
(tests/refusals.py).
"""

from __future__ import annotations

import json

import pytest
from conftest import git, make_repo
from refusals import refusal

from autoresearch.safety import git as gitops

TESTS = "def test_a():\n    pass\n"


@pytest.fixture
def script(tmp_path) -> str:
    """A replay script for the script backend (its steps are never reached)."""
    path = tmp_path / "script.yaml"
    path.write_text("{}\n")
    return str(path)


def spec(target, script, mode, **extra) -> dict:
    values = {
        "mode": mode,
        "target": str(target),
        "test_command": "python -m pytest -q",
        "agent": {"backend": "script", "script": script},
    }
    return values | extra


# --- narrow: the goal and the angles -----------------------------------------------------

GOOD_GOAL = {"metric": "todo count", "command": "sh count.sh", "target": "<= 1"}
TWO = [
    {"name": "a", "hypothesis": "A.", "priority": 1},
    {"name": "b", "hypothesis": "B.", "priority": 2},
]


@pytest.fixture
def todo_repo(tmp_path):
    files = {
        "src.py": "# TODO 1\n# TODO 2\n# TODO 3\n",
        "count.sh": "grep -c TODO src.py || true\n",
        "tests/test_src.py": TESTS,
    }
    return make_repo(tmp_path / "todo", files)


@pytest.mark.parametrize(
    "goal,angles,key",
    [
        ({k: v for k, v in GOOD_GOAL.items() if k != "metric"}, TWO, "goal.metric"),
        ({k: v for k, v in GOOD_GOAL.items() if k != "command"}, TWO, "goal.command"),
        ({k: v for k, v in GOOD_GOAL.items() if k != "target"}, TWO, "goal.target"),
        (GOOD_GOAL | {"target": "about 3"}, TWO, "goal.target"),
        (GOOD_GOAL | {"target": "!= 3"}, TWO, "goal.target"),
        (GOOD_GOAL | {"format": "xml"}, TWO, "goal.format"),
        (None, TWO, "'goal'"),
        (GOOD_GOAL, [], "'angles'"),
        (
            GOOD_GOAL,
            [{"name": "a", "hypothesis": "A."}, {"name": "b", "hypothesis": "B."}],
            "angles.0.priority",
        ),
        (GOOD_GOAL, [TWO[0], TWO[1] | {"priority": 1}], "priority 1"),
    ],
    ids=[
        "no-metric",
        "no-command",
        "no-target",
        "bad-target",
        "bad-comparator",
        "bad-format",
        "no-goal",
        "no-angles",
        "unranked",
        "duplicate-priority",
    ],
)
def test_a_bad_narrow_goal_or_angle_is_refused_naming_the_key(
    work, todo_repo, script, goal, angles, key
):
    before = gitops.snapshot(todo_repo), git(todo_repo, "branch", "--list")
    values = spec(todo_repo, script, "narrow", goal=goal, angles=angles)
    if goal is None:
        del values["goal"]
    said = refusal(work, values, name="bad")
    # The file the user edits: the goal's keys come from their session spec.
    assert key in said and "config/sessions/bad.yaml" in said
    assert (gitops.snapshot(todo_repo), git(todo_repo, "branch", "--list")) == before


# --- broad ---------------------------------------------------------------------------------


def test_a_bad_approve_value_of_broad_is_refused(work, target, script):
    values = spec(target, script, "broad", aspiration="Make calc dependable.", approve="sometimes")
    said = refusal(work, values)
    assert "key 'approve'" in said and "sometimes" in said


def test_an_incomplete_aspiration_metric_is_refused(work, target, script):
    values = spec(target, script, "broad", aspiration="a", aspiration_metric={"command": "x"})
    said = refusal(work, values)
    assert "aspiration_metric" in said and "direction" in said


# --- experiment: its metric, a mission folder, the holdout ---------------------------------

FAST = "def steps():\n    return 1000\n"
MEASURE = "import json\nimport fast\n\nprint(json.dumps({'ops': fast.steps()}))\n"
MISSION = "# Fewer steps\n\nMake fast.steps() cheaper.\n"


@pytest.fixture
def exp_repo(tmp_path):
    files = {"fast.py": FAST, "measure.py": MEASURE, "tests/test_fast.py": TESTS}
    return make_repo(tmp_path / "exp", files)


def experiment(repo, script, **keys) -> dict:
    return spec(repo, script, "experiment", experiment={"cooldown_s": 0} | keys)


METRIC = {"command": "python measure.py", "key": "ops", "direction": "minimize"}


def test_an_experiment_metric_without_its_command_is_refused(work, exp_repo, script):
    values = experiment(
        exp_repo, script, goal="g", scope=["fast.py"], metric={"direction": "minimize"}
    )
    assert "experiment.metric.command" in refusal(work, values)


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"holdout": ""}, "experiment.holdout"),
        ({"holdout_timeout_s": "soon"}, "experiment.holdout_timeout_s"),
    ],
)
def test_a_bad_holdout_key_is_refused_naming_it(work, exp_repo, script, extra, key):
    keys = {"goal": "g", "scope": ["fast.py"], "metric": METRIC, "holdout": "python x.py"}
    said = refusal(work, experiment(exp_repo, script, **(keys | extra)), name="x")
    assert f"key '{key}'" in said and "x.yaml" in said
    assert "unknown key" not in said  # a key this version knows, and says what is wrong


def mission_repo(tmp_path, files: dict[str, str]):
    return make_repo(tmp_path / "mission", {"fast.py": FAST, "tests/test_fast.py": TESTS, **files})


def test_a_mission_folder_without_evaluator_json_is_refused(work, tmp_path, script):
    repo = mission_repo(tmp_path, {"m/mission.md": MISSION})
    said = refusal(work, experiment(repo, script, mission="m", scope=["fast.py"]))
    assert "key 'experiment.mission'" in said and "evaluator.json does not exist" in said


def test_a_holdout_in_a_missions_evaluator_json_is_named_there(work, tmp_path, script):
    bad = {"timeout_s": 30, "command": "python measure.py", "holdout": 7}
    repo = mission_repo(tmp_path, {"m/mission.md": MISSION, "m/evaluator.json": json.dumps(bad)})
    said = refusal(work, experiment(repo, script, mission="m", scope=["fast.py"]))
    assert "m/evaluator.json: key 'holdout': 7" in said


def test_a_holdout_in_mission_md_which_the_agent_reads_is_refused(work, tmp_path, script):
    told = MISSION + "\n```yaml\nholdout: python private_check.py\n```\n"
    evaluator = json.dumps({"command": "python measure.py"})
    repo = mission_repo(tmp_path, {"m/mission.md": told, "m/evaluator.json": evaluator})
    said = refusal(work, experiment(repo, script, mission="m", scope=["fast.py"]))
    assert "mission.md (```yaml block): key 'holdout': the agent reads this file" in said


# --- the lenses and the test gate ------------------------------------------------------------


def test_the_ruff_backend_cannot_play_debug(work, target):
    values = {"mode": "debug", "target": str(target), "agent": {"backend": "ruff"}}
    assert "the debug lens needs a model" in refusal(work, values)


def test_a_scenario_session_needs_a_seed(work, target):
    values = {"mode": "scenario", "target": str(target), "agent": {"backend": "script"}}
    assert "key 'scenario.seed' is not set" in refusal(work, values)


def test_a_bad_diff_base_of_security_is_refused_naming_the_key(work, target, script):
    values = spec(target, script, "security", security={"critical_assets": ["app"]})
    said = refusal(work, values | {"diff_base": "no-such-ref"})
    assert "key 'diff_base': 'no-such-ref' is not a commit" in said


def test_an_unknown_test_gate_is_refused_naming_the_key(work, target, script):
    said = refusal(work, spec(target, script, "sweep", test_gate="later"))
    assert "key 'test_gate'" in said and "later" in said

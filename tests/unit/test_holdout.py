"""The holdout's parts: hidden from the file tools, its keep rule, the keys, what the agent's
history shows of it (the run through Snakemake: tests/e2e/test_experiment_holdout.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import MappingProxyType

import pytest

from autoresearch.agents.tools import Toolbox
from autoresearch.errors import SpecError
from autoresearch.modes.experiment import guard, holdout, paired
from autoresearch.modes.experiment.program import ExperimentConfig, resolve
from autoresearch.safety import jail

SECRET = "HOLDOUT-SECRET"


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "wt"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


@pytest.fixture
def box(tmp_path):
    root = repo(
        tmp_path,
        {
            "fast.py": "def steps():\n    return 1\n",
            "measure.py": "print(1)\n",
            "secret/check.py": f"# {SECRET}\n",
            "secret/data.json": f'"{SECRET}"\n',
        },
    )
    (root / "peek.py").symlink_to("secret/check.py")  # as the agent's code could leave it
    return Toolbox(
        "experiment", root, include=["*.py", "secret/*"], hidden=["secret/check.py", "secret"]
    )


def said(box: Toolbox, tool: str, **args) -> str:
    return box.call(tool, args).content


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "secret/check.py"}),
        ("read_file", {"path": "./secret//check.py"}),
        ("read_file", {"path": "peek.py"}),
        ("read_file", {"path": "secret/data.json"}),
        ("search", {"pattern": "SECRET", "path": "peek.py"}),
        ("search", {"pattern": "SECRET", "path": "secret/check.py"}),
    ],
)
def test_a_hidden_file_reads_as_a_missing_one_by_any_name(box, tool, args):
    missing = said(box, tool, **(args | {"path": "nothing/here.py"}))
    assert said(box, tool, **args) == missing.replace("nothing/here.py", args["path"])


def test_listing_and_searching_the_tree_never_show_a_hidden_file(box):
    listed = said(box, "list_files")
    assert listed.splitlines() == ["fast.py", "measure.py"]
    assert said(box, "list_files", path="secret") == "(no files)"
    assert said(box, "search", pattern="SECRET") == "(no matches)"
    assert said(box, "search", pattern=".", glob="secret/**") == "(no matches)"


def test_writing_a_hidden_file_is_refused_as_for_a_missing_one(box):
    result = box.call("write_file", {"path": "secret/check.py", "content": "x"})
    assert result.is_error and result.content == "refused: 'secret/check.py' does not exist"
    assert SECRET in (box.sandbox.root / "secret/check.py").read_text()


def test_command_output_shown_to_the_agent_loses_the_hidden_names():
    text = "['fast.py', 'check.py'] import check; secret/check.py: HOLDOUT"
    assert holdout.redact(text, ["secret/check.py"]) == (
        "['fast.py', '[hidden]'] import [hidden]; [hidden]: HOLDOUT"
    )


def test_a_hidden_file_named_by_a_plain_word_hides_its_names_not_the_word():
    # A holdout eval/test.py: a test run's output keeps its every "test"; the file's path,
    # its name, its module and its compiled copy are what go.
    text = (
        "tests/test_fast.py::test_steps PASSED; 3 tests passed (pytest)\n"
        "eval/test.py:4: boom in ./eval/test.py; ['test.py', 'fast.py'];"
        " __pycache__/test.cpython-311.pyc\n"
        "import test; from eval.test import score; from eval import test;"
        " No module named 'eval.test'"
    )
    assert holdout.redact(text, ["eval/test.py"]) == (
        "tests/test_fast.py::test_steps PASSED; 3 tests passed (pytest)\n"
        "[hidden]:4: boom in ./[hidden]; ['[hidden]', 'fast.py'];"
        " __pycache__/[hidden].cpython-311.pyc\n"
        "import [hidden]; from [hidden] import score; from eval import [hidden];"
        " No module named '[hidden]'"
    )


def test_a_longer_file_name_that_holds_a_hidden_one_is_another_file():
    text = "pytest.py my_test.py test.pyx-notes attest.py"
    assert holdout.redact(text, ["eval/test.py"]) == text


def test_a_coined_hidden_name_is_hidden_wherever_it_stands_as_a_word():
    # snake_case, digits, camelCase: a name someone made, never a word of the output.
    text = "private_check() failed; PRIVATE_CHECK=1; private_checker; scoreV2 ok"
    assert holdout.redact(text, ["private_check.py", "eval/scoreV2.py"]) == (
        "[hidden]() failed; [hidden]=1; private_checker; [hidden] ok"
    )


def test_a_hidden_folder_hides_its_path_and_its_listed_name_not_the_word():
    text = "eval/private/x.py; ['private', 'fast.py']; private data; def __init__(self)"
    assert holdout.redact(text, ["eval/private", "eval/__init__.py"]) == (
        "[hidden]/x.py; ['[hidden]', 'fast.py']; private data; def __init__(self)"
    )


# --- the keep rule ----------------------------------------------------------------------


@pytest.mark.skipif(not jail.probe().works, reason="needs bubblewrap")
@pytest.mark.parametrize("default_guard", [False, True])
def test_the_guard_never_reads_the_holdouts_files_whoever_runs_it(tmp_path, default_guard):
    # guard.run is the one way a change's guard runs (plain, paired or a batch's candidate):
    # it hides the holdout's files itself, so no caller can forget to.
    root = repo(tmp_path, {"secret/data.json": f'"{SECRET}"\n'})
    tests = {"stack": None, "allow_test_removal": False} if default_guard else None
    cfg = ExperimentConfig(
        goal="g",
        scope=["fast.py"],
        command="python measure.py",
        direction="minimize",
        guard=f"! grep -rq {SECRET} secret",
        guard_tests=tests,
        holdout="python secret/check.py",
        holdout_files=["secret/data.json"],
    )
    box = jail.build_jail({"sandbox": "bwrap"}, root, hide=[])
    ran = guard.run(cfg, root, None, box, None)
    assert ran["ok"] is True, ran


@pytest.mark.skipif(not jail.probe().works, reason="needs bubblewrap")
def test_a_paired_metric_run_never_reads_the_holdouts_files(tmp_path):
    # The sequential test's runs of either side hide the holdout as the plain metric does.
    root = repo(tmp_path, {"secret/data.json": f'"{SECRET}"\n'})
    cfg = ExperimentConfig(
        goal="g",
        scope=["fast.py"],
        command=f"if grep -rq {SECRET} secret; then echo 2; else echo 1; fi",
        direction="minimize",
        format="last_line",
        holdout="python secret/check.py",
        holdout_files=["secret/data.json"],
    )
    box = jail.build_jail({"sandbox": "bwrap"}, root, hide=[])
    assert paired.metric_run(cfg, root, None, box, None)()[0] == 1.0


def test_one_incumbent_run_allows_no_worsening_at_all():
    worse = holdout.compare(
        {"value": 101, "samples": [101]}, {"value": 100, "samples": [100]}, "minimize"
    )
    assert worse["agrees"] is False and worse["noise"] == 0 and worse["worse_by"] == 1
    same = holdout.compare(
        {"value": 100, "samples": [100]}, {"value": 100, "samples": [100]}, "minimize"
    )
    assert same["agrees"] is True


def test_the_allowed_worsening_is_two_sds_of_the_incumbents_runs_in_the_bad_direction():
    incumbent = {"value": 10.0, "samples": [9.0, 10.0, 11.0]}  # sd 1 -> noise 2
    inside = holdout.compare({"value": 8.1, "samples": [8.1]}, incumbent, "maximize")
    outside = holdout.compare({"value": 7.9, "samples": [7.9]}, incumbent, "maximize")
    assert inside["noise"] == pytest.approx(2.0) and inside["agrees"] is True
    assert outside["agrees"] is False
    # Better in the good direction is always agreement.
    assert holdout.compare({"value": 50.0, "samples": [50.0]}, incumbent, "maximize")["agrees"]


def cfg(**extra) -> ExperimentConfig:
    return ExperimentConfig(
        goal="g", scope=["fast.py"], command="python m.py", direction="minimize", **extra
    )


def test_the_holdout_runs_only_on_a_change_the_metric_keeps_and_a_crash_disagrees():
    best = {"value": 10, "holdout": {"value": 100, "samples": [100.0]}}
    calls = []

    def run():
        calls.append(1)
        return {"error": "measurement command failed\nTraceback"}

    config = cfg(holdout="python h.py")
    rec: dict = {}
    assert holdout.judge(config, rec, best, "discarded", "not better", run) == (
        "discarded",
        "not better",
    )
    assert calls == [] and "holdout" not in rec
    status, verdict = holdout.judge(config, rec, best, "kept", "10 -> 8", run)
    assert status == "holdout_disagrees" and calls == [1]
    assert verdict.startswith("the metric said keep (10 -> 8); the holdout did not")
    assert rec["holdout"]["agrees"] is False


def test_the_agents_history_shows_a_holdout_discard_as_a_plain_discard():
    rec = {
        "status": "holdout_disagrees",
        "verdict": "the metric said keep; the holdout did not: holdout 1 → 2",
        "holdout": {"value": 2},
        "error": None,
        "hypothesis": "h",
    }
    shown = holdout.for_agent(rec, cfg(holdout="python h.py", holdout_files=["h.py"]))
    assert shown == {"status": "discarded", "verdict": "", "error": None, "hypothesis": "h"}
    # As read back from decision.json: a read-only Mapping.
    crashed = MappingProxyType({"status": "crash", "error": "no number in: ['h.py', 'fast.py']"})
    assert holdout.for_agent(crashed, cfg(holdout_files=["h.py"]))["error"] == (
        "no number in: ['[hidden]', 'fast.py']"
    )


def test_the_two_series_side_by_side_and_none_without_a_holdout():
    recs = [
        {"iteration": 0, "metric_value": 10, "status": "baseline", "holdout": {"value": 100}},
        {
            "iteration": 1,
            "metric_value": 8,
            "status": "holdout_disagrees",
            "holdout": {"value": 130},
        },
        {"iteration": 2, "metric_value": None, "status": "crash"},
    ]
    assert holdout.series(recs, "ops") == [
        "| iteration | ops | holdout | status |",
        "|---|---|---|---|",
        "| 0 | 10 | 100 | baseline |",
        "| 1 | 8 | 130 | holdout_disagrees |",
        "| 2 | — | — | crash |",
    ]
    assert holdout.series([{k: v for k, v in r.items() if k != "holdout"} for r in recs], "x") == []


# --- the keys ---------------------------------------------------------------------------


def spec(target: Path, **experiment) -> dict:
    base = {"goal": "g", "scope": ["fast.py"], "max_iterations": 1}
    base["metric"] = {"command": "python m.py", "direction": "minimize"}
    return {"target": str(target), "experiment": base | experiment}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"holdout": "  "}, "s.yaml: key 'experiment.holdout': '  '; write the shell command"),
        ({"holdout": ["a"]}, "s.yaml: key 'experiment.holdout': ['a']"),
        ({"holdout": "x", "holdout_timeout_s": 0}, "key 'experiment.holdout_timeout_s': 0;"),
        ({"holdout_timeout_s": 5}, "key 'experiment.holdout_timeout_s': set only with a holdout"),
    ],
)
def test_a_bad_holdout_key_names_the_file_and_the_key(tmp_path, extra, message):
    with pytest.raises(SpecError) as err:
        resolve(spec(tmp_path, **extra), tmp_path, "s.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_program_md_may_not_name_the_holdout_but_evaluator_json_may(tmp_path):
    (tmp_path / "program.md").write_text("# G\n\n```yaml\nholdout: python h.py\n```\n")
    with pytest.raises(SpecError, match=r"program.md \(```yaml block\): key 'holdout': the agent"):
        resolve(spec(tmp_path, program="program.md"), tmp_path, "s.yaml")
    (tmp_path / "m").mkdir()
    (tmp_path / "m/mission.md").write_text("# Speed\n")
    evaluator = {"command": "python e.py", "holdout": "python h.py", "holdout_timeout_s": 9}
    (tmp_path / "m/evaluator.json").write_text(json.dumps(evaluator))
    values = {"target": str(tmp_path), "experiment": {"mission": "m", "scope": ["fast.py"]}}
    values["experiment"]["max_runtime"] = "1h"
    got = resolve(values, tmp_path, "s.yaml")
    assert (got.holdout, got.holdout_timeout_s) == ("python h.py", 9.0)
    evaluator["holdout"] = ""
    (tmp_path / "m/evaluator.json").write_text(json.dumps(evaluator))
    with pytest.raises(SpecError, match=r"m/evaluator.json: key 'holdout': ''"):
        resolve(values, tmp_path, "s.yaml")

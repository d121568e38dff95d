"""The default guard through Snakemake: a spec that names no `experiment.guard` is guarded
by the target's own test command, judged by test identity as the test gate is. A change
that breaks a test, then hides it (deletes, skips or renames the test, or deselects it in
conftest.py), is discarded as guard_failed; `guard: none` turns the guard off and
session.md says so; a test failing at the base may stay failing, and no other."""

from __future__ import annotations

import json

import pytest
from conftest import Workflow, git, make_repo
from test_experiment import FAST, MEASURE, TESTS, change, jsonl, spec_for

OTHER = "def test_other():\n    assert True\n"
KNOWN_BAD = "def test_known_bad():\n    assert False\n"
BROKEN = FAST.format(n=0)  # zero steps: the best metric, and test_steps fails


def write(path, content):
    return {"tool": "write_file", "args": {"path": path, "content": content}}


def finish(hypothesis):
    return {"tool": "finish_experiment", "args": {"hypothesis": hypothesis, "change_summary": "x"}}


def make_target(path, **extra):
    files = {
        "fast.py": FAST.format(n=1000),
        "measure.py": MEASURE.replace("{{", "{").replace("}}", "}"),
        "tests/test_fast.py": TESTS,
        "tests/test_other.py": OTHER,
    }
    return make_repo(path, files | extra)


def experiment(repo, workflow, script, **extra):
    """An experiment spec that names no guard: the session's test_command guards it."""
    keys = {
        "goal": "fewer steps",
        "scope": ["fast.py", "tests/*.py", "*conftest.py"],  # a glob: conftest.py is new
        "metric": {"command": "python measure.py", "key": "ops", "direction": "minimize"},
        "max_iterations": len(script["experiment"]),
    }
    return spec_for(repo, workflow, script, **(keys | extra))


def decisions(session, count):
    return [
        json.loads((session / "iterations" / f"{n:03d}" / "decision.json").read_text())
        for n in range(1, count + 1)
    ]


# conftest.py deselecting the broken test: flagged too (tamper.py), which the attacks'
# session allows, so the guard alone decides on each of them.
DESELECT = (
    "def pytest_collection_modifyitems(config, items):\n"
    "    items[:] = [i for i in items if i.name != 'test_steps']\n"
)

# Each iteration breaks test_steps and hides the break its own way; the last is honest.
ATTACKS = {
    "experiment": {
        1: [write("fast.py", BROKEN), finish("Skip the work entirely")],
        2: [
            write("fast.py", BROKEN),
            write("tests/test_fast.py", "from fast import steps\n"),
            finish("Drop the slow test with the work"),
        ],
        3: [
            write("fast.py", BROKEN),
            write(
                "tests/test_fast.py",
                "import pytest\nfrom fast import steps\n\n\ndef test_steps():\n"
                "    pytest.skip('later')\n    assert steps() > 0\n",
            ),
            finish("Skip the test for now"),
        ],
        4: [
            write("fast.py", BROKEN),
            write(
                "tests/test_fast.py",
                "from fast import steps\n\n\ndef test_steps_renamed():\n    assert steps() >= 0\n",
            ),
            finish("Relax the renamed test"),
        ],
        5: [write("fast.py", BROKEN), write("conftest.py", DESELECT), finish("Trim tests")],
        6: change(800, "Halve the inner loop"),
    }
}


@pytest.fixture(scope="module")
def attacks(tmp_path_factory):
    """One session of the attacks above, with no guard in its spec (read by the tests)."""
    base = tmp_path_factory.mktemp("guard")
    workflow, repo = Workflow(base / "work"), make_target(base / "target")
    workflow.run("g", experiment(repo, workflow, ATTACKS, allow_flagged=True))
    session = workflow.session("g")
    return session, decisions(session, 6)


def test_with_no_guard_named_the_targets_tests_discard_a_change_that_breaks_one(attacks):
    session, found = attacks
    broken = found[0]
    assert broken["status"] == "guard_failed" and broken["metric_value"] == 0
    assert broken["improved"] is True  # the metric alone would have kept it
    assert "guard `python -m pytest -q` (the target's tests) failed" in broken["verdict"]
    assert "tests/test_fast.py::test_steps" in broken["verdict"]
    assert broken["end_commit"] == broken["start_commit"]


def test_a_test_deleted_with_the_break_is_no_pass(attacks):
    _, found = attacks
    deleted = found[1]
    assert deleted["status"] == "guard_failed"
    assert deleted["guard_tests"]["outcome"] == "passed"  # the suite itself exits 0
    assert "not reported" in deleted["verdict"] and "test_steps" in deleted["verdict"]


def test_a_test_skipped_with_the_break_is_no_pass(attacks):
    _, found = attacks
    skipped = found[2]
    assert skipped["status"] == "guard_failed"
    assert skipped["guard_tests"]["outcome"] == "passed"
    assert "skipped or xfailed: tests/test_fast.py::test_steps" in skipped["verdict"]


def test_a_test_renamed_with_the_break_is_no_pass(attacks):
    _, found = attacks
    renamed = found[3]
    assert renamed["status"] == "guard_failed"
    assert renamed["guard_tests"]["outcome"] == "passed"
    assert "not reported" in renamed["verdict"] and "test_fast.py::test_steps" in renamed["verdict"]


def test_a_conftest_that_deselects_the_broken_test_is_no_pass(attacks):
    _, found = attacks
    deselected = found[4]
    assert deselected["status"] == "guard_failed"
    assert deselected["guard_tests"]["outcome"] == "passed"
    assert "not reported" in deselected["verdict"]
    assert "test_fast.py::test_steps" in deselected["verdict"]


def test_an_honest_change_passes_the_default_guard_and_session_md_names_it(attacks):
    session, found = attacks
    assert found[5]["status"] == "kept" and found[5]["guard_ok"] is True
    assert [e["status"] for e in jsonl(session)][-1] == "kept"
    subjects = git(session / "worktree", "log", "--format=%s").splitlines()
    kept = [s for s in subjects if s.startswith("autoresearch: exp ")]
    assert len(kept) == 1 and "Halve the inner loop" in kept[0]
    summary = (session / "session.md").read_text()
    assert (
        "- Guard: `python -m pytest -q` (the default: the target's test command, judged by "
        "test identity as the test gate is)"
    ) in summary


def test_guard_none_turns_the_default_guard_off_and_session_md_says_so(workflow, tmp_path):
    script = {"experiment": {1: [write("fast.py", BROKEN), finish("Skip the work entirely")]}}
    repo = make_target(tmp_path / "target")
    workflow.run("n", experiment(repo, workflow, script, guard="none"))
    session = workflow.session("n")
    (rec,) = decisions(session, 1)
    assert rec["status"] == "kept" and rec["guard_ok"] is None
    assert "- Guard: none (turned off by the spec)" in (session / "session.md").read_text()


def test_a_test_failing_at_the_base_may_stay_failing_but_not_be_deleted(workflow, tmp_path):
    script = {
        "experiment": {
            # Gone is not fixed: the known-bad test deleted with a better metric.
            1: [
                write("fast.py", FAST.format(n=900)),
                write("tests/test_known.py", "\n"),
                finish("Trim the known-bad test"),
            ],
            2: change(800, "Halve the inner loop"),  # the known-bad test still fails
        }
    }
    repo = make_target(tmp_path / "target", **{"tests/test_known.py": KNOWN_BAD})
    workflow.run("b", experiment(repo, workflow, script))
    deleted, honest = decisions(workflow.session("b"), 2)
    assert deleted["status"] == "guard_failed"
    assert "tests/test_known.py::test_known_bad" in deleted["verdict"]
    assert honest["status"] == "kept" and honest["guard_tests"]["outcome"] == "failed"
    assert honest["guard_tests"]["failing_ids"] == ["tests/test_known.py::test_known_bad"]


def test_a_target_with_no_detectable_tests_goes_on_without_a_guard_and_says_so(workflow, tmp_path):
    script = {"experiment": {1: change(800, "Halve the inner loop")}}
    measure = MEASURE.replace("{{", "{").replace("}}", "}")
    repo = make_repo(tmp_path / "target", {"fast.py": FAST.format(n=1000), "measure.py": measure})
    spec = experiment(repo, workflow, script, scope=["fast.py"])
    del spec["test_command"]  # and nothing to detect one from
    workflow.run("t", spec)
    session = workflow.session("t")
    (rec,) = decisions(session, 1)
    assert rec["status"] == "kept" and rec["guard_ok"] is None
    summary = (session / "session.md").read_text()
    assert "- Test command: none (none could be detected)" in summary
    assert (
        "- Guard: none (the target has no test command that could be detected and the spec "
        "names no experiment.guard)"
    ) in summary


def test_the_sequential_test_holds_a_change_to_the_default_guard_by_test_identity(
    workflow, tmp_path
):
    skip = ATTACKS["experiment"][3]  # breaks test_steps and skips it
    repo = make_target(tmp_path / "target")
    workflow.run("s", experiment(repo, workflow, {"experiment": {1: skip}}, sequential=True))
    (rec,) = decisions(workflow.session("s"), 1)
    assert rec["status"] == "guard_failed" and rec["pairs"] == 0
    assert "skipped or xfailed: tests/test_fast.py::test_steps" in rec["verdict"]
    assert rec["verdict"].endswith("no metric run spent")


def test_a_test_weakened_under_its_own_id_with_the_break_is_no_pass(workflow, tmp_path):
    # The default guard is graded as the test gate is: the start's test file decides.
    weakened = "from fast import steps\n\n\ndef test_steps():\n    assert steps() >= 0\n"
    script = {
        "experiment": {
            1: [
                write("fast.py", BROKEN),
                write("tests/test_fast.py", weakened),
                finish("Relax the test with the work"),
            ]
        }
    }
    repo = make_target(tmp_path / "target")
    workflow.run("w", experiment(repo, workflow, script, allow_flagged=True))
    (rec,) = decisions(workflow.session("w"), 1)
    assert rec["status"] == "guard_failed"
    assert rec["guard_tests"]["outcome"] == "passed"  # the change's own run passes
    assert "tests/test_fast.py::test_steps" in rec["verdict"]
    assert "allow_test_edits" in rec["verdict"]

"""Session setup: spec layering, freezing, bad input, and the user's checkout left alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import Workflow, calc_repo, git, make_repo, no_key_sweep


def run_setup_only(workflow, values, name="s"):
    return workflow.run(name, values, target=f"sessions/{name}/session.yaml", check=False)


# A spec refused before anything runs: tests/unit/test_setup_refusals.py, and its wiring in
# tests/e2e/test_bad_input.py. Here what the setup job itself refuses, and what it writes.


def assert_refused(proc, *needles):
    assert proc.returncode != 0
    for needle in needles:
        assert needle in proc.stderr, proc.stderr[-3000:]


# --- spec layering and freezing ------------------------------------------------------


@pytest.fixture(scope="module")
def set_up(tmp_path_factory):
    """One setup of the calc target (max_findings: 7), read by the tests of what setup writes
    and of the frozen spec; the spec it ran with is returned for a rerun."""
    base = tmp_path_factory.mktemp("setup")
    workflow, target = Workflow(base / "work"), calc_repo(base / "target")
    values = no_key_sweep(target, max_findings=7)
    assert run_setup_only(workflow, values).returncode == 0
    return workflow, target, values


def test_spec_is_frozen_at_start(set_up):
    workflow, _, values = set_up
    values = dict(values)
    frozen = yaml.safe_load((workflow.session("s") / "session.yaml").read_text())
    assert frozen["max_findings"] == 7
    values["max_findings"] = 3  # a later edit of the spec...
    run_setup_only(workflow, values)
    frozen = yaml.safe_load((workflow.session("s") / "session.yaml").read_text())
    assert frozen["max_findings"] == 7  # ...does not change the running session


# --- setup results -----------------------------------------------------------------------


def test_setup_records_baseline_counts_branch_and_context(set_up):
    workflow, target, _ = set_up
    setup = json.loads((workflow.session("s") / "setup.json").read_text())
    assert setup["baseline"]["passed"] == 2 and setup["baseline"]["ok"]
    assert setup["branch"] == "autoresearch/improve"
    assert setup["base_commit"] == git(target, "rev-parse", "HEAD")
    assert "Adds numbers." in setup["conventions"]
    md = (workflow.session("s") / "session.md").read_text()
    assert "## Skill version\nautoresearch 0.1.0" in md and "- Stack: Python" in md
    for name in ("results.tsv", "ideas.md"):
        assert (workflow.session("s") / name).is_file()
    assert (workflow.session("s") / "cycles").is_dir()


def test_taken_branch_gets_next_free_number(workflow, target):
    git(target, "branch", "autoresearch/improve")
    run_setup_only(workflow, no_key_sweep(target))
    setup = json.loads((workflow.session("s") / "setup.json").read_text())
    assert setup["branch"] == "autoresearch/improve-2"


def test_a_new_session_never_starts_on_the_commits_an_earlier_one_of_its_name_left(
    workflow, target
):
    run_setup_only(workflow, no_key_sweep(target))
    worktree = (workflow.session("s") / "worktree").resolve()
    (worktree / "kept.py").write_text("X = 1\n")  # the earlier session's kept work
    git(worktree, "add", "kept.py")
    git(worktree, "commit", "-q", "-m", "fix: [F-001] kept by the earlier session")
    kept = git(worktree, "rev-parse", "HEAD")
    shutil.rmtree(workflow.session("s"))  # the user deletes the folder to start over
    proc = run_setup_only(workflow, no_key_sweep(target))
    assert_refused(
        proc,
        "sessions/s is new, but the worktree of an earlier session of that name is still at",
        f"git -C {target} worktree remove --force {worktree}",
    )
    assert git(worktree, "rev-parse", "HEAD") == kept  # nothing of it is lost
    assert not (workflow.session("s") / "setup.json").exists()


def test_a_worktree_left_at_the_targets_head_is_taken_up_again(workflow, target):
    run_setup_only(workflow, no_key_sweep(target))
    shutil.rmtree(workflow.session("s"))
    assert run_setup_only(workflow, no_key_sweep(target)).returncode == 0
    setup = json.loads((workflow.session("s") / "setup.json").read_text())
    assert setup["base_commit"] == git(target, "rev-parse", "HEAD")


FAILING = {
    "test_x.py": "def test_x():\n    assert False\n\n\ndef test_y():\n    assert True\n",
    "test_z.py": "def test_z():\n    assert 1 == 2\n",
}


def test_failing_baseline_stops_setup_when_allow_failing_baseline_is_false(workflow, tmp_path):
    repo = make_repo(tmp_path / "t", FAILING)
    proc = run_setup_only(workflow, no_key_sweep(repo, allow_failing_baseline=False))
    assert_refused(proc, "key 'allow_failing_baseline' is false", "test_x.py::test_x")
    assert not (workflow.session("s") / "setup.json").exists()


@pytest.fixture(scope="module")
def failing_base(tmp_path_factory):
    """A sweep of a target two of whose tests fail at the base, the spec leaving
    allow_failing_baseline at its default, run to its end once: read by the tests of what
    setup says of that base and of what done says of it."""
    base = tmp_path_factory.mktemp("failing")
    workflow = Workflow(base / "work")
    repo = make_repo(base / "t", FAILING | {"calc.py": "X = 1\n"})
    proc = workflow.run("s", no_key_sweep(repo, stop_below=None), check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return workflow, proc


def test_a_failing_baseline_is_warned_about_and_the_session_goes_on_by_default(failing_base):
    workflow, proc = failing_base
    assert "warning: baseline FAILS" in proc.stderr  # said on the console, not only in a log
    setup = json.loads((workflow.session("s") / "setup.json").read_text())
    assert setup["baseline"]["outcome"] == "failed" and not setup["baseline"]["ok"]
    assert setup["baseline"]["failing_ids"] == ["test_x.py::test_x", "test_z.py::test_z"]
    md = (workflow.session("s") / "session.md").read_text()
    listed = md.split("- Failing at the base", 1)[1].split("- Base commit")[0]
    assert listed.splitlines()[1:] == ["  - test_x.py::test_x", "  - test_z.py::test_z"]


def test_a_fix_session_starts_on_failing_tests_by_default(workflow, tmp_path):
    # Fix exists to make failing tests pass: no key needed to start one on them.
    repo = make_repo(tmp_path / "t", FAILING)
    proc = run_setup_only(workflow, no_key_sweep(repo, mode="fix"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "- Failing at the base" in (workflow.session("s") / "session.md").read_text()


def test_a_test_command_that_collects_nothing_is_not_a_baseline(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "t",
        {
            "calc.py": "X = 1\n",
            "tests/test_calc.py": "from calc import X\n\n\ndef test_x():\n    assert X\n",
        },
    )
    # Plain `pytest` does not put the rootdir on sys.path: `import calc` fails to collect.
    proc = run_setup_only(workflow, no_key_sweep(repo, test_command="pytest -q"))
    assert_refused(proc, "test_command", "python -m pytest")
    assert not (workflow.session("s") / "setup.json").exists()


# A src/ layout, not installed, with no pytest config: one test passes, one fails, and the
# test file has Windows line endings.
SRC_LAYOUT = {
    "pyproject.toml": '[project]\nname = "shop"\nversion = "0.1"\n',
    "src/shop/__init__.py": "def total(prices):\n    return sum(prices)\n",
    "tests/test_total.py": (
        "from shop import total\r\n\r\n\r\n"
        "def test_total():\r\n    assert total([1, 2]) == 3\r\n\r\n\r\n"
        "def test_total_of_nothing_is_none():\r\n    assert total([]) is None\r\n"
    ),
}
SRC_FAILING = ["tests/test_total.py::test_total_of_nothing_is_none"]


def test_a_src_layout_baseline_counts_its_tests_with_src_on_the_path_said_in_the_command(
    workflow, tmp_path
):
    repo = make_repo(tmp_path / "t", SRC_LAYOUT)
    proc = run_setup_only(workflow, no_key_sweep(repo, test_command=None))
    assert proc.returncode == 0, proc.stderr[-3000:]
    setup = json.loads((workflow.session("s") / "setup.json").read_text())
    assert setup["test_command"] == "PYTHONPATH=src python -m pytest"
    baseline = setup["baseline"]
    assert (baseline["passed"], baseline["failed"]) == (1, 1), baseline["summary"]
    assert baseline["failing_ids"] == SRC_FAILING
    md = (workflow.session("s") / "session.md").read_text()
    assert "- Test command: PYTHONPATH=src python -m pytest\n" in md


def test_a_src_layout_whose_pytest_config_sets_pythonpath_keeps_the_plain_command(
    workflow, tmp_path
):
    configured = SRC_LAYOUT["pyproject.toml"] + '\n[tool.pytest.ini_options]\npythonpath = "src"\n'
    repo = make_repo(tmp_path / "t", {**SRC_LAYOUT, "pyproject.toml": configured})
    proc = run_setup_only(workflow, no_key_sweep(repo, test_command=None))
    assert proc.returncode == 0, proc.stderr[-3000:]
    setup = json.loads((workflow.session("s") / "setup.json").read_text())
    assert setup["test_command"] == "python -m pytest"
    assert setup["baseline"]["failing_ids"] == SRC_FAILING


def test_on_dirty_stash_records_changes_and_leaves_files(workflow, target):
    (target / "calc.py").write_text("# my local edit\n")
    run_setup_only(workflow, no_key_sweep(target, on_dirty="stash"))
    assert (target / "calc.py").read_text() == "# my local edit\n"
    assert "autoresearch s" in git(target, "stash", "list")
    worktree = workflow.session("s") / "worktree"
    assert "def add" in (worktree / "calc.py").read_text()


def test_a_setup_error_is_said_once_with_its_last_lines_and_where_the_whole_output_is(
    workflow, tmp_path
):
    noisy = "".join(f"def test_{i}():\n    assert {i} == -1\n\n\n" for i in range(30))
    repo = make_repo(tmp_path / "t", {"test_many.py": noisy})
    proc = run_setup_only(workflow, no_key_sweep(repo, allow_failing_baseline=False))
    assert_refused(proc, "the whole output: sessions/s/logs/session.log")
    assert proc.stderr.count("key 'allow_failing_baseline' is false") == 1, proc.stderr
    shown = proc.stderr.split("last lines:\n", 1)[1].split("the whole output:")[0]
    assert len(shown.splitlines()) <= 10
    assert "30 failed" in shown  # the end of the output, where pytest puts its verdict
    log = (workflow.session("s") / "logs" / "session.log").read_text()
    assert "test_many.py::test_0 - assert 0 == -1" in log  # the start, left out above
    assert "test_many.py::test_0 - assert 0 == -1" not in proc.stderr


def test_done_says_a_failing_base_test_that_still_fails_is_the_same_as_at_the_base(
    failing_base,
):
    workflow, proc = failing_base
    done = (workflow.session("s") / "done").read_text()
    assert "tests: FAIL (the same 2 tests as at the base)\n" in done
    # The cycle's line on the console says it the same way, not a bare FAIL.
    assert "fixes kept, tests FAIL (the same 2 tests as at the base)" in proc.stderr + proc.stdout
    status = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "status", "s"],
        cwd=workflow.workdir, env=workflow.env(), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "Tests: FAIL (the same 2 tests as at the base)\n" in status

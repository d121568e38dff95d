"""Bad input: one line naming the file and the key, and nothing left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, make_repo, no_key_sweep, wait_for

from autoresearch.safety import git as gitops

NARROW_GOAL = {"metric": "todo count", "command": "sh count.sh", "target": "<= 1"}
ANGLES = [{"name": "todos", "hypothesis": "TODOs can be resolved."}]


def setup_only(workflow, values, *extra, name="s"):
    return workflow.run(name, values, *extra, target=f"sessions/{name}/session.yaml", check=False)


def one_line_refusal(proc, *needles) -> str:
    """The run failed with our line, without Snakemake's wrapping or a traceback."""
    assert proc.returncode != 0
    for needle in needles:
        assert needle in proc.stderr, proc.stderr[-3000:]
    assert "InputFunctionException" not in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Wildcards:" not in proc.stderr
    return next(line for line in proc.stderr.splitlines() if needles[0] in line)


def session_files(workflow, name="s") -> list[str]:
    """What a session folder holds besides the logs that explain a failure."""
    root = workflow.session(name)
    if not root.exists():
        return []
    kept = {"logs", "benchmarks", ".run.lock", ".journal.lock"}
    return sorted(p.name for p in root.iterdir() if p.name not in kept)


# --- errors raised while Snakemake builds the DAG: the one line only -----------------------


# The variants of a refusal are unit tests (tests/unit/test_setup_refusals.py); here each
# wiring once: the setup rule's input function, --config's origin, the catch-all rule for a
# bad name, the filter for a name Snakemake normalised, the dry run's summary.


def test_a_spec_refused_at_parse_time_is_one_line_naming_the_configfile(
    workflow, untouched, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    proc = workflow.run("s", no_key_sweep(untouched, agent={"backend": "claude"}), check=False)
    line = one_line_refusal(proc, "ANTHROPIC_API_KEY is not set")
    assert f"--configfile {workflow.workdir / 'specs' / 's.yaml'}" in line
    assert "key 'agent.backend'" in line
    assert not workflow.session("s").exists()  # refused before any stage: nothing written


def test_config_on_the_command_line_is_named_as_such(workflow, untouched):
    proc = setup_only(workflow, no_key_sweep(untouched), "--config", "test_timeout_s=1e10")
    one_line_refusal(proc, "--config: key 'test_timeout_s'", "maximum of 604800")


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("sessions/café/done", "session name 'café' is not allowed"),  # the catch-all rule
        ("sessions/a/../../x/done", "'x/done' is not a session"),  # normalised by Snakemake
    ],
)
def test_names_outside_the_naming_rule_get_its_message(workflow, path, said):
    proc = workflow.run("s", None, target=path, check=False)
    one_line_refusal(proc, said)
    assert not (workflow.workdir / "sessions").exists()  # nothing written


def test_dry_run_of_an_experiment_prints_its_parsed_config(workflow, tmp_path):
    program = "# Faster\n\n```yaml\ntarget_file: a.py\neval_command: echo 1\n"
    program += "metric_key: v\ndirection: minimize\nmax_experiments: 7\n```\n"
    repo = make_repo(tmp_path / "t", {"a.py": "x = 1\n", "program.md": program})
    values = no_key_sweep(repo, mode="experiment", experiment={"program": "program.md"})
    values["agent"] = {"backend": "script", "script": str(workflow.script({}))}
    proc = workflow.run("s", values, "-n")
    assert "experiment config of session 's'" in proc.stderr
    assert "max_iterations: 7" in proc.stderr and "scope: ['a.py']" in proc.stderr
    assert not workflow.session("s").exists()


# --- a setup that fails leaves nothing behind ------------------------------------------


@pytest.fixture
def todo_repo(tmp_path):
    files = {
        "src.py": "x = 1\n# TODO a\n# TODO b\n",
        "count.sh": "grep -c TODO src.py || true\n",
        "tests/test_src.py": "def test_src():\n    pass\n",
    }
    return make_repo(tmp_path / "todo", files)


def narrow(repo, **goal) -> dict:
    return no_key_sweep(repo, mode="narrow", goal={**NARROW_GOAL, **goal}, angles=ANGLES)


def test_a_failing_baseline_command_leaves_nothing_and_a_rerun_starts_fresh(workflow, todo_repo):
    before = gitops.snapshot(todo_repo), git(todo_repo, "branch", "--list")
    proc = setup_only(workflow, narrow(todo_repo, command="sh nowhere.sh"))
    assert proc.returncode != 0 and "goal.command" in proc.stderr, proc.stderr[-3000:]
    assert (gitops.snapshot(todo_repo), git(todo_repo, "branch", "--list")) == before
    assert "worktree" not in git(todo_repo, "worktree", "list").split("\n", 1)[-1]
    assert session_files(workflow) == []
    assert "setup undone" in (workflow.session("s") / "logs/session.log").read_text()

    proc = setup_only(workflow, narrow(todo_repo))
    assert proc.returncode == 0, proc.stderr[-3000:]
    setup = json.loads((workflow.session("s") / "setup.json").read_text())
    assert setup["branch"] == "autoresearch/narrow/s"


def test_a_failed_baseline_leaves_only_the_log_the_error_points_to(workflow, todo_repo, tmp_path):
    store = tmp_path / "store"
    values = narrow(todo_repo, command="sh nowhere.sh") | {"worktree_root": str(store)}
    proc = setup_only(workflow, values)
    assert proc.returncode != 0 and "logs/session.log" in proc.stderr, proc.stderr[-3000:]
    root = workflow.session("s")
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert left == ["logs", "logs/session.log"]
    assert not store.exists() or list(store.iterdir()) == []  # no empty folder of ours


def test_a_baseline_that_already_meets_the_target_leaves_nothing(workflow, todo_repo):
    before = gitops.snapshot(todo_repo), git(todo_repo, "branch", "--list")
    proc = setup_only(workflow, narrow(todo_repo, target="<= 5"))
    assert proc.returncode != 0 and "goal.target" in proc.stderr, proc.stderr[-3000:]
    assert (gitops.snapshot(todo_repo), git(todo_repo, "branch", "--list")) == before
    assert session_files(workflow) == []


SLOW_TESTS = """\
import os, pathlib, time

pathlib.Path(os.environ["SETUP_MARKER"]).write_text("baseline running")
time.sleep(120)
"""


def test_a_setup_killed_half_way_is_undone_by_the_next_run(workflow, tmp_path):
    repo = make_repo(
        tmp_path / "t", {"slow.py": SLOW_TESTS, "tests/test_a.py": "def test_a():\n    pass\n"}
    )
    marker = tmp_path / "marker"
    workflow.extra_env["SETUP_MARKER"] = str(marker)
    # No jail: the baseline must reach the marker outside it (the jail's /tmp is its own);
    # the marker's name is passed as the spec passes any variable a target's tests need.
    commands = {"sandbox": "none", "pass_env": ["SETUP_MARKER"]}
    values = no_key_sweep(repo, test_command="python slow.py", commands=commands)
    proc = workflow.start("s", values)
    try:
        wait_for(marker.exists, timeout=300)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "autoresearch/improve" in git(repo, "branch", "--list")  # what the kill left

    done = setup_only(workflow, no_key_sweep(repo))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((workflow.session("s") / "setup.json").read_text())["branch"] == (
        "autoresearch/improve"
    )
    assert git(repo, "branch", "--list", "autoresearch/*").split() == ["+", "autoresearch/improve"]
    assert not (workflow.session("s") / ".setup-created.json").exists()


def test_cli_status_outside_a_workflow_folder_is_refused(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "status"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "no Snakefile in" in proc.stderr


# --- a session whose branch or worktree was deleted ---------------------------------------
# done's input function refuses to resume it: its variants (a gone branch, a newer version's
# stamp) are tests/unit/test_resume_refusals.py; here that wiring once.


def test_a_deleted_worktree_is_reported_before_any_stage(workflow, target):
    values = no_key_sweep(target)
    assert setup_only(workflow, values).returncode == 0
    worktree = json.loads((workflow.session("s") / "setup.json").read_text())
    path = git(target, "worktree", "list", "--porcelain").split("worktree ")[2].split()[0]
    git(target, "worktree", "remove", "--force", path)
    proc = workflow.run("s", values, check=False)
    line = one_line_refusal(proc, "is gone")
    assert f"worktree add {path} {worktree['branch']}" in line
    assert not (workflow.session("s") / "cycles/001/red.json").exists()


def test_a_worktree_left_from_a_deleted_repository_is_set_aside_and_setup_goes_on(workflow, target):
    values = no_key_sweep(target)
    assert setup_only(workflow, values).returncode == 0
    path = Path(git(target, "worktree", "list", "--porcelain").split("worktree ")[2].split()[0])
    # The user deletes the target and the session, makes the target again and starts over
    # (a checkout cloned again at the same path): the store still holds the old worktree,
    # whose .git points at a repository that is gone.
    shutil.rmtree(target)
    shutil.rmtree(workflow.session("s"))
    make_repo(target, {"calc.py": "x = 1\n", "tests/test_calc.py": "def test_x():\n    pass\n"})
    proc = setup_only(workflow, values)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{path} belonged to a repository that is gone; moved it to" in proc.stderr
    (aside,) = path.parent.glob("worktree.orphaned-*")
    assert (aside / ".git").exists()  # set aside, never deleted
    assert git(workflow.session("s") / "worktree", "log", "--format=%s") == "initial"

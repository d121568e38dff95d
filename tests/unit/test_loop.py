"""The loop's protocol: one status vocabulary, one decision record, one writer, one reader."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from autoresearch import modes
from autoresearch.engine import loop
from autoresearch.engine.loop import Decision, Status
from autoresearch.engine.stage import StageEnv
from autoresearch.errors import SessionError
from autoresearch.modes.base import Mode
from autoresearch.modes.experiment import policy
from autoresearch.modes.fix import stages as fix_stages
from autoresearch.modes.lens.output import Writer
from autoresearch.modes.ship import stages as ship_stages
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal


def sweep_decision(cycle: int) -> dict:
    """A decision as the sweep loop writes it: no status word, its own keys between ours."""
    return {
        "cycle": cycle,
        "track": "",
        "start_commit": "a" * 40,
        "end_commit": "b" * 40,
        "tests_pass": True,
        "tests": {"outcome": "passed", "ok": True, "passed": ["t::a"], "output": "1 passed"},
        "fixed": [{"id": "F-001", "key": "bug at a.py:1"}],
        "stop": False,
        "reason": None,
        "session_stop": None,
    }


def test_the_modes_share_one_spelling_of_each_status_word():
    # fix wrote "guard failed" / "no change", experiment "guard_failed" / "no_change".
    assert fix_stages.GUARD_FAILED == policy.GUARD_FAILED == "guard_failed"
    assert fix_stages.NO_CHANGE == policy.NO_CHANGE == "no_change"
    assert ship_stages.KEPT == fix_stages.KEPT == policy.KEPT == Status.KEPT


# Files being reworked on other branches (experiment's loop, verify): their last bare words
# go with that work.
SPELT_ELSEWHERE: set[tuple[str, str]] = set()


def test_no_status_word_is_spelt_outside_the_enum():
    # A bare "guard failed" next to Status.GUARD_FAILED is how two spellings came about: a
    # status is compared with, or written as, a Status member, never a string of its own.
    import ast
    from pathlib import Path

    import autoresearch

    words = {s.value for s in Status} | {"guard failed", "no change"}
    root = Path(autoresearch.__file__).parent
    found = set()
    for path in sorted(root.rglob("*.py")):
        if path == root / "engine" / "loop.py":
            continue
        name = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(path.read_text())):
            spelt: list[ast.expr] = []
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any("status" in ast.unparse(side) for side in sides):
                    spelt = sides
            elif isinstance(node, ast.Dict):
                spelt = [
                    v
                    for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and k.value == "status"
                ]
            elif isinstance(node, ast.keyword) and node.arg == "status":
                spelt = [node.value]
            for side in spelt:
                if isinstance(side, ast.Constant) and side.value in words:
                    found.add((name, side.value))
    assert found == SPELT_ELSEWHERE


def test_a_resumed_session_reads_the_old_spelling_as_todays_word(tmp_path):
    layout = SessionLayout(tmp_path / "s", "fixes")
    write_json(layout.decision(1), {"cycle": 1, "status": "guard failed", "stop": False})
    write_json(layout.decision(2), {"cycle": 2, "status": "no change", "stop": False})
    assert [d["status"] for d in journal.load_decisions(layout)] == ["guard_failed", "no_change"]
    assert loop.read_decision(layout.decision(1)).status is Status.GUARD_FAILED


def test_a_status_with_a_detail_keeps_it(tmp_path):
    decision = Decision.from_json({"cycle": 3, "status": "rejected: suppression"})
    assert decision.status is Status.REJECTED and decision.status_detail == "suppression"
    assert decision["status"] == "rejected: suppression"
    learn = Decision.from_json({"cycle": 1, "status": "not kept: names `gone()`"})
    assert learn.status is Status.NOT_KEPT and learn["status"] == "not kept: names `gone()`"


def test_a_status_word_outside_the_vocabulary_is_an_error_naming_the_file(tmp_path):
    layout = SessionLayout(tmp_path / "s", "fixes")
    write_json(layout.decision(1), {"cycle": 1, "status": "kpet"})
    with pytest.raises(SessionError, match=r"fixes/001/decision\.json: key 'status'.*'kpet'"):
        journal.load_decisions(layout)


def test_a_decision_without_a_cycle_number_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "decision.json"
    write_json(path, {"status": "kept"})
    with pytest.raises(SessionError, match=r"decision\.json: key 'cycle'"):
        loop.read_decision(path)


def test_a_decision_read_and_written_again_is_the_same_file(tmp_path):
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    write_json(first, sweep_decision(1))
    loop.write_decision(second, loop.read_decision(first))
    assert second.read_bytes() == first.read_bytes()


def test_the_common_fields_are_typed_and_the_modes_keys_are_its_extra():
    decision = Decision.from_json(sweep_decision(2) | {"status": "kept"})
    assert (decision.cycle, decision.end_commit, decision.stop) == (2, "b" * 40, False)
    assert decision.tests["passed"] == ["t::a"] and decision.kept
    assert set(decision.extra) == {"tests_pass", "fixed", "session_stop"}
    with pytest.raises(AttributeError):
        decision.stop = True  # frozen: a reader cannot change what a cycle decided


def test_the_writer_masks_through_the_modes_writer(tmp_path):
    path = tmp_path / "sessions" / "s" / "learn" / "001" / "decision.json"
    secret = "sk-ant-" + "x" * 40
    loop.write_decision(path, {"cycle": 1, "status": "kept", "why": f"key {secret}"}, Writer())
    text = path.read_text()
    assert secret not in text and json.loads(text)["status"] == "kept"


def test_a_mode_status_enum_value_is_written_as_its_word(tmp_path):
    path = tmp_path / "decision.json"
    loop.write_decision(path, {"cycle": 1, "status": Status.GUARD_FAILED})
    assert json.loads(path.read_text())["status"] == "guard_failed"


def test_the_previous_decision_is_read_back_into_the_record(tmp_path):
    layout = SessionLayout(tmp_path / "s")
    write_json(layout.decision(1), sweep_decision(1))
    env = StageEnv(layout=layout, spec=None, record=None, cycle=2)  # type: ignore[arg-type]
    previous = env.previous_decision()
    assert isinstance(previous, Decision) and previous.end_commit == "b" * 40
    assert previous["fixed"][0]["id"] == "F-001"  # and reads like the file


# --- the loop's final decision --------------------------------------------------------


class Checkpoints:
    """Snakemake's `checkpoints` as an input function sees them: what was asked of which."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict]] = []

    def __getattr__(self, rule: str):
        outer = self

        class Rule:
            def get(self, **wildcards):
                outer.asked.append((rule, wildcards))
                return SimpleNamespace(output=SimpleNamespace(decision=f"{rule}.json"))

        return Rule()


LOOP_MODES = {
    "sweep": "evaluate",
    "narrow": "evaluate",
    "experiment": "experiment_decide",
    "fix": "fix_decide",
    "learn": "learn_write",
    "ship": "ship_prepare",
    "security": "lens_check",
    "debug": "lens_check",
    "scenario": "lens_check",
}


def test_the_final_decision_is_written_once_for_every_mode():
    for name in modes.MODES:
        assert type(modes.get(name)).final_decision is Mode.final_decision, name


@pytest.mark.parametrize("name", sorted(LOOP_MODES))
def test_the_final_decision_asks_the_modes_checkpoint_for_the_next_open_cycle(tmp_path, name):
    mode = modes.get(name)
    assert mode.decide_checkpoint == LOOP_MODES[name]
    layout = mode.layout(tmp_path / "sessions" / "s")
    for n in (1, 2):
        write_json(layout.decision(n), {"cycle": n, "stop": False})
    checkpoints = Checkpoints()
    assert mode.final_decision(layout, checkpoints) == f"{LOOP_MODES[name]}.json"
    assert checkpoints.asked == [(LOOP_MODES[name], {"name": "s", "cycle": "003"})]


def frozen_session(root, mode: str) -> SessionLayout:
    """sessions/s/ of `mode`, set up: its frozen spec says which mode it is."""
    layout = modes.get(mode).layout(root / "sessions" / "s")
    layout.spec.parent.mkdir(parents=True)
    layout.spec.write_text(f"mode: {mode}\n")
    return layout


PRODUCTS = {
    "experiment": "report.md",
    "narrow": "goal-progress.png",
    "security": "security-fix.json",
}


@pytest.mark.parametrize("name", ["experiment", "narrow", "security"])
def test_a_rule_waits_for_the_final_decision_of_the_sessions_own_mode(tmp_path, monkeypatch, name):
    # experiment's report and plot, narrow's plot and security's fixes share one input
    # function: the session's frozen mode says which loop it is, not the rule asking.
    import scripts.common

    monkeypatch.chdir(tmp_path)
    write_json(frozen_session(tmp_path, name).decision(1), {"cycle": 1, "stop": False})
    checkpoints = Checkpoints()
    final = scripts.common.final_decision_of("s", checkpoints, PRODUCTS[name])
    assert final == f"{LOOP_MODES[name]}.json"
    # Setup first (it freezes the mode), then the next open step of the mode's loop only.
    assert checkpoints.asked == [
        ("session", {"name": "s"}),
        (LOOP_MODES[name], {"name": "s", "cycle": "002"}),
    ]


def test_a_broad_tracks_final_decision_is_of_its_own_loop(tmp_path, monkeypatch):
    import scripts.common

    monkeypatch.chdir(tmp_path)
    layout = frozen_session(tmp_path, "broad")
    assert modes.get("broad").decide_checkpoint == "broad_evaluate"
    write_json(layout.decision(1, "h2"), {"cycle": 1, "track": "h2", "stop": True})
    checkpoints = Checkpoints()
    scripts.common.final_decision_of("s", checkpoints, "tracks/h2/result.json", "h2")
    assert checkpoints.asked[-1] == ("broad_evaluate", {"name": "s", "cycle": "001", "hid": "h2"})


@pytest.mark.parametrize(
    ("mode", "product", "makes"),
    [
        ("experiment", "goal-progress.png", "done, progress.png, report.md, report/"),
        ("sweep", "report.md", "done, report/"),
        ("narrow", "security-fix.json", "done, goal-progress.png, report/"),
        ("fix", "tracks/h1/result.json", "done, findings.md, handoff.json, report/"),
    ],
)
def test_one_modes_file_asked_of_another_modes_session_is_refused_before_its_loop_runs(
    tmp_path, monkeypatch, mode, product, makes
):
    # Asked by hand (snakemake sessions/s/goal-progress.png of an experiment session), the
    # file's rule would wait for the whole loop and then fail in its job with a traceback.
    import scripts.common

    monkeypatch.chdir(tmp_path)
    layout = frozen_session(tmp_path, mode)
    (layout.root / "report").mkdir()
    checkpoints = Checkpoints()
    with pytest.raises(SessionError) as err:
        scripts.common.final_decision_of("s", checkpoints, product, "h1" if "h1" in product else "")
    article = "an" if mode == "experiment" else "a"
    assert str(err.value) == (
        f"sessions/s/{product}: {article} {mode} session makes no {product} (it makes {makes})"
    )
    assert checkpoints.asked == [("session", {"name": "s"})]  # no loop step asked for


@pytest.mark.parametrize(
    ("mode", "product", "track"),
    [
        ("experiment", "report.md", ""),
        ("experiment", "progress.png", ""),
        ("narrow", "goal-progress.png", ""),
        ("broad", "tracks/h2/result.json", "h2"),
        ("broad", "comparison.md", ""),
        ("security", "security-fix.json", ""),
        *((lens, "findings.md", "") for lens in ("fix", "learn", "ship", "debug", "predict")),
        ("scenario", "findings.md", ""),
    ],
)
def test_each_mode_makes_the_files_its_rules_are_asked_for(
    tmp_path, monkeypatch, mode, product, track
):
    import scripts.common

    monkeypatch.chdir(tmp_path)
    frozen_session(tmp_path, mode)
    got, layout = scripts.common.made_by("s", product, track)
    assert got.name == mode and layout.root == Path("sessions/s").absolute()


# --- the one order a step ends in -----------------------------------------------------


class Recorder:
    """A mode as loop.decide sees it, noting each hook it is asked, in order."""

    decision_extra = loop.Keys  # the mode's keys as they come (no record of its own)

    def __init__(self, out, calls: list[str]) -> None:
        self.out, self.calls = out, calls
        self.views = self  # its session.md too

    def apply_policy(self, env, decision) -> None:
        self.calls.append("stop rules")
        decision.update(stop=True, reason="cap of 1 cycles reached")

    def write_summary(self, env, pending=None) -> None:
        assert not self.out.exists(), "session.md is written before the decision"
        self.calls.append("summary")

    def log_line(self, env, decision) -> str:
        self.calls.append("log")
        return f"cycle {decision.cycle}: {decision.reason}"

    def decision_writer(self, env):
        return None


def test_a_step_ends_in_one_order_and_its_decision_is_written_last(tmp_path):
    out, calls, logged = tmp_path / "001" / "decision.json", [], []
    env = SimpleNamespace(log=logged.append)

    def judge() -> loop.Judged:
        calls.append("judge")

        def results(record) -> None:
            assert record["stop"] is True  # the stop rules have spoken
            assert not out.exists()
            calls.append("results")

        return loop.Judged({"cycle": 1, "status": "kept"}, results)

    decision = loop.decide(env, Recorder(out, calls), judge, out)
    assert calls == ["judge", "stop rules", "results", "summary", "log"]
    assert json.loads(out.read_text()) == {
        "cycle": 1,
        "status": "kept",
        "stop": True,
        "reason": "cap of 1 cycles reached",
    }
    assert decision.stop and logged == ["cycle 1: cap of 1 cycles reached"]


def test_a_judge_that_fails_leaves_no_decision(tmp_path):
    out, calls = tmp_path / "001" / "decision.json", []

    def judge() -> loop.Judged:
        raise RuntimeError("the measurement crashed")

    with pytest.raises(RuntimeError):
        loop.decide(SimpleNamespace(log=print), Recorder(out, calls), judge, out)
    assert calls == [] and not out.exists()  # the rerun makes the step again


def test_the_deciding_job_ends_through_the_one_decide():
    # The one job every mode's judge runs under (the rules that call it:
    # test_architecture.py::test_every_loop_step_is_decided_by_the_one_job).
    import ast
    import inspect

    import scripts.step

    calls = {
        ast.unparse(node.func)
        for node in ast.walk(ast.parse(inspect.getsource(scripts.step.decide).strip()))
        if isinstance(node, ast.Call)
    }
    assert "loop.decide" in calls and "mode.judge" in calls
    assert not {c for c in calls if c.endswith(("write_decision", "write_json", ".json"))}


# --- a mode's own keys, as one record ------------------------------------------------------


def lens_decision(**changes) -> dict:
    """A loop lens's decision.json as lens_check writes it."""
    data = {
        "cycle": 2,
        "run_id": "k-20261201-1",
        "iteration": 2,
        "focus": "injection",
        "accepted": 1,
        "new": 1,
        "dropped": 0,
        "drop_reasons": {},
        "stop": False,
        "reason": None,
        "end_commit": "c" * 40,
        "tests_pass": None,
    }
    return {**data, **changes}


def test_a_modes_keys_are_read_back_into_its_record(tmp_path):
    from autoresearch.modes.lens.loop import LensStep

    path = tmp_path / "decision.json"
    written = loop.write_decision(path, lens_decision(), extra=LensStep)
    read = loop.read_decision(path, LensStep)
    assert isinstance(read.extra, LensStep) and read.extra == written.extra
    assert (read.extra.run_id, read.extra.iteration, read.extra.focus) == (
        "k-20261201-1",
        2,
        "injection",
    )
    assert json.loads(path.read_text()) == lens_decision()  # the same file, key for key
    assert list(json.loads(path.read_text())) == list(lens_decision())


def test_a_decision_missing_a_key_of_its_modes_record_is_not_written(tmp_path):
    from autoresearch.modes.lens.loop import LensStep

    path = tmp_path / "lens" / "002" / "decision.json"
    broken = lens_decision()
    del broken["run_id"]
    with pytest.raises(SessionError, match=r"002/decision\.json: key 'run_id' missing"):
        loop.write_decision(path, broken, extra=LensStep)
    assert not path.exists()


def test_a_key_its_modes_record_does_not_have_is_an_error_naming_the_file(tmp_path):
    # A misspelt key would otherwise be written, and every reader would miss it.
    from autoresearch.modes.lens.loop import LensStep

    path = tmp_path / "decision.json"
    write_json(path, lens_decision(acepted=1))
    with pytest.raises(SessionError, match=r"decision\.json: key 'acepted' is not one of"):
        loop.read_decision(path, LensStep)


def test_decide_holds_a_judges_record_to_the_modes_keys(tmp_path):
    from autoresearch.modes.lens.loop import LensStep

    out, calls = tmp_path / "001" / "decision.json", []
    mode = Recorder(out, calls)
    mode.decision_extra = LensStep
    short = lens_decision()
    del short["focus"]
    with pytest.raises(SessionError, match="key 'focus' missing"):
        loop.decide(SimpleNamespace(log=print), mode, lambda: loop.Judged(short), out)
    assert not out.exists() and "log" not in calls


def test_every_loop_lens_and_learn_name_their_record():
    from autoresearch.modes.learn import DocStep
    from autoresearch.modes.lens.loop import LensStep, LoopLens

    lenses = [n for n in modes.MODES if isinstance(modes.get(n), LoopLens)]
    assert lenses and all(modes.get(n).decision_extra is LensStep for n in lenses)
    assert modes.get("learn").decision_extra is DocStep
    assert Mode.decision_extra is loop.Keys


def ship_decision(**changes) -> dict:
    """A ship iteration's decision.json as ship_prepare writes it (no `rejected`: the
    protection let the change through)."""
    data = {
        "cycle": 1,
        "gate": "lint",
        "summary": "fixed the lint",
        "start_commit": "a" * 40,
        "passing_before": 1,
        "results_after": [{"name": "lint", "status": "pass", "detail": ""}],
        "broke": [],
        "tests_pass": None,
        "timestamp": "2026-12-01T16:00:00Z",
        "broken": False,
        "session_stop": None,
        "status": "kept",
        "end_commit": "b" * 40,
        "final": False,
        "passing_after": 2,
        "score": 1.0,
        "blocked": [],
        "stop": False,
        "reason": None,
    }
    return {**data, **changes}


def test_a_key_only_some_steps_have_is_written_only_when_they_have_it(tmp_path):
    from autoresearch.modes.ship import GateStep

    plain, refused = tmp_path / "1.json", tmp_path / "2.json"
    loop.write_decision(plain, ship_decision(), extra=GateStep)
    assert "rejected" not in json.loads(plain.read_text())
    assert loop.read_decision(plain, GateStep).extra.rejected is None
    why = "ship.py: protected file — the change edits it"
    loop.write_decision(refused, ship_decision(status="reverted", rejected=why), extra=GateStep)
    assert json.loads(refused.read_text())["rejected"] == why
    assert loop.read_decision(refused, GateStep).extra.rejected == why


def test_a_fix_decision_without_its_blocked_errors_is_not_written(tmp_path):
    # The next iteration reads `blocked` and `counts_after` from it: a decision without
    # them would end the loop's memory of what was given up on.
    from autoresearch.modes.fix import FixStep

    record = {
        "cycle": 1, "iteration": 1, "run_id": "r", "error": None, "summary": "",
        "start_commit": "a" * 40, "violations": [], "guard": None, "fixed": [],
        "revealed": 0, "verdict": "", "status": "no_change", "before": 0, "after": 0,
        "end_commit": "a" * 40, "counts_after": [], "files_changed": [], "timestamp": "t",
        "tests_pass": True, "session_stop": None, "broken": False, "final": False,
    }  # fmt: skip
    path = tmp_path / "fixes" / "001" / "decision.json"
    with pytest.raises(SessionError, match=r"001/decision\.json: key 'blocked' missing"):
        loop.write_decision(path, record, extra=FixStep)
    assert not path.exists()
    loop.write_decision(path, record | {"blocked": []}, extra=FixStep)
    assert loop.read_decision(path, FixStep).extra.blocked == []


def test_fix_and_ship_name_their_record():
    from autoresearch.modes.fix import FixStep
    from autoresearch.modes.ship import GateStep

    assert modes.get("fix").decision_extra is FixStep
    assert modes.get("ship").decision_extra is GateStep

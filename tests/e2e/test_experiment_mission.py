"""A mission folder (mission.md + evaluator.json) as the experiment's input: each session
is a run, mirrored into <mission>/runs/<run-id>/, and a new run never overwrites an old one."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from conftest import git, make_repo, wait_for
from test_experiment import EVALUATOR, FAST, MEASURE, TESTS, change, jsonl, spec_for

MISSION = (
    "# Fewer steps\n\nMISSION-PROSE: make fast.steps() cheaper; a failing evaluation is data.\n"
)
EVALUATOR_JSON = {
    "command": "python evaluate.py",
    "contract": {"pass": "boolean", "score": "number", "notes": "string"},
}


def make_mission_target(path):
    return make_repo(
        path,
        {
            "fast.py": FAST.format(n=1000),
            "measure.py": MEASURE.replace("{{", "{").replace("}}", "}"),
            "evaluate.py": EVALUATOR,
            "tests/test_fast.py": TESTS,
            "missions/speed/mission.md": MISSION,
            "missions/speed/evaluator.json": json.dumps(EVALUATOR_JSON),
            ".gitignore": "missions/*/runs/\n",
        },
    )


def mission_spec(target, workflow, script, transcript, **extra):
    experiment = {"mission": "missions/speed", "scope": ["fast.py"], "output": "missions/speed"}
    return spec_for(target, workflow, script, transcript, **(experiment | extra))


def run_folders(target):
    runs = target / "missions/speed/runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


def test_a_mission_runs_until_its_limit_and_each_run_gets_its_own_folder(workflow, tmp_path):
    target = make_mission_target(tmp_path / "target")
    transcript = tmp_path / "briefs.jsonl"
    first = {
        "experiment": {
            1: change(900, "Trim a tenth"),  # pass=false, better score: kept
            2: change(950, "Trim less"),  # worse score: discarded, and the run goes on
            3: change(300, "Cut two thirds"),  # pass=true: kept, and the run still goes on
        }
    }
    workflow.run(
        "m1", mission_spec(target, workflow, first, transcript, max_runtime="1h", max_iterations=3)
    )
    session = workflow.session("m1")
    assert [e["status"] for e in jsonl(session)] == ["baseline", "kept", "discarded", "kept"]
    evaluation = json.loads((session / "evaluations/iteration-0001.json").read_text())
    assert (evaluation["pass"], evaluation["score"], evaluation["notes"]) == (
        False,
        -900,
        "900 steps",
    )
    assert "stopped: iteration limit reached" in (session / "done").read_text()
    brief = workflow.transcript(transcript)[0]
    assert "MISSION-PROSE" in brief["task"] and brief["task"].startswith("# Goal\nFewer steps")

    run_id = json.loads((session / "experiment-setup.json").read_text())["run_id"]
    assert run_id.startswith("m1-") and run_folders(target) == [run_id]
    folder = target / "missions/speed/runs" / run_id
    assert sorted(p.name for p in (folder / "evaluations").iterdir()) == [
        f"iteration-{n:04d}.json" for n in range(4)
    ]
    assert (folder / "decision-log.md").read_text() == (session / "decision-log.md").read_text()
    record = json.loads((folder / "run.json").read_text())
    assert (record["run_id"], record["session"], record["mission"]) == (
        run_id,
        "m1",
        "missions/speed",
    )
    assert record["max_runtime_s"] == 3600 and record["iterations"] == 3
    assert f"run folder: {folder}" in (session / "done").read_text()
    # The user's checkout: the run is there, ignored; nothing else changed.
    assert git(target, "status", "--porcelain") == ""
    first_run = (folder / "run.json").read_text()

    # A second run of the same mission, stopped by its runtime ceiling alone.
    second = {"experiment": {1: [{"sleep": 3}, *change(1100, "Add a pass")]}}
    workflow.run("m2", mission_spec(target, workflow, second, transcript, max_runtime=2))
    done = (workflow.session("m2") / "done").read_text()
    assert "stopped: duration limit reached" in done
    runs = run_folders(target)
    assert len(runs) == 2 and runs[0] == run_id and runs[1].startswith("m2-")
    assert (folder / "run.json").read_text() == first_run


# Iteration 2's change (950 steps) is measured slowly while the flag file exists: the test
# reads the run folder then, and kills the session there.
SLOW_EVALUATOR = (
    "import json, os, pathlib, time\nimport fast\n\n"
    "ops = fast.steps()\n"
    "if ops == 950 and os.path.exists({flag!r}):\n"
    "    pathlib.Path({flag!r} + '.pid').write_text(str(os.getpid()))\n"
    "    time.sleep(300)\n"
    "print(json.dumps({{'pass': ops < 500, 'score': -ops, 'notes': f'{{ops}} steps'}}))\n"
)


def test_the_run_folder_grows_while_the_session_runs_and_a_rerun_after_kill_completes_it(
    workflow, tmp_path
):
    flag = tmp_path / "slow"
    target = make_mission_target(tmp_path / "target")
    (target / "evaluate.py").write_text(SLOW_EVALUATOR.format(flag=str(flag)))
    git(target, "commit", "-qam", "slow evaluator")
    script = {
        "experiment": {
            1: change(900, "Trim a tenth"),
            2: change(950, "Trim less"),
            3: change(300, "Cut two thirds"),
        }
    }
    spec = mission_spec(
        target, workflow, script, tmp_path / "t.jsonl", max_runtime="1h", max_iterations=3
    )
    spec["commands"] = {"sandbox": "none"}  # the flag is outside the jail's view (its /tmp)
    session = workflow.session("g")
    pid_file = Path(f"{flag}.pid")
    flag.write_text("")
    proc = workflow.start("g", spec)
    try:
        wait_for(lambda: pid_file.exists() or proc.poll() is not None, 300)
        assert proc.poll() is None, proc.stderr.read()
        # Iteration 2 is being measured: iteration 1 is in the run folder already.
        run_id = json.loads((session / "experiment-setup.json").read_text())["run_id"]
        folder = target / "missions/speed/runs" / run_id
        assert evaluations(folder) == ["iteration-0000.json", "iteration-0001.json"]
        log = (folder / "decision-log.md").read_text()
        assert "## Iteration 0001 — " in log and "## Iteration 0002" not in log
        run = json.loads((folder / "run.json").read_text())
        assert (run["status"], run["iterations"], run["best"]["value"]) == ("running", 1, -900)
        summary = (folder / "summary.md").read_text()
        assert "- Status: running" in summary and "-1000 → -900" in summary
        assert "## Recommended next steps" in summary and "still improving" in summary
        assert not (folder / "report.md").exists()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        flag.unlink()
        if pid_file.exists():  # the evaluator runs in a process group of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert not (session / "iterations/002/decision.json").exists()

    workflow.run("g", spec)
    assert evaluations(folder) == [f"iteration-{n:04d}.json" for n in range(4)]
    log = (folder / "decision-log.md").read_text()
    assert [log.count(f"## Iteration {n:04d} — ") for n in range(4)] == [1, 1, 1, 1]
    assert log == (session / "decision-log.md").read_text()
    run = json.loads((folder / "run.json").read_text())
    assert (run["status"], run["iterations"], run["stopped"]) == (
        "finished",
        3,
        "iteration limit reached (max_iterations = 3)",
    )
    assert (folder / "report.md").read_text() == (session / "report.md").read_text()
    assert "- Status: stopped: iteration limit reached" in (folder / "summary.md").read_text()
    assert run_folders(target) == [run_id]


def evaluations(folder):
    return sorted(p.name for p in (folder / "evaluations").iterdir())


def test_without_output_a_mission_run_lands_in_its_folder_or_the_log_says_where(workflow, tmp_path):
    one = {"experiment": {1: change(900, "Trim a tenth")}}
    ignored = make_mission_target(tmp_path / "ignored")  # its .gitignore names runs/
    spec = mission_spec(ignored, workflow, one, tmp_path / "t.jsonl", max_runtime="1h")
    del spec["experiment"]["output"]
    workflow.run("a", spec | {"experiment": spec["experiment"] | {"max_iterations": 1}})
    run_id = json.loads((workflow.session("a") / "experiment-setup.json").read_text())["run_id"]
    assert run_folders(ignored) == [run_id]
    assert git(ignored, "status", "--porcelain") == ""

    tracked = make_mission_target(tmp_path / "tracked")
    (tracked / ".gitignore").unlink()
    git(tracked, "commit", "-qam", "runs/ is not ignored")
    spec = mission_spec(tracked, workflow, one, tmp_path / "t.jsonl", max_runtime="1h")
    del spec["experiment"]["output"]
    proc = workflow.run("b", spec | {"experiment": spec["experiment"] | {"max_iterations": 1}})
    assert run_folders(tracked) == [] and git(tracked, "status", "--porcelain") == ""
    said = "the run is kept under sessions/b/, not in missions/speed/runs/"
    assert said in proc.stderr
    assert said in " ".join(
        json.loads((workflow.session("b") / "setup.json").read_text())["warnings"]
    )

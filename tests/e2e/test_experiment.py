"""Experiment mode through Snakemake, on a target whose metric is a deterministic step count."""

from __future__ import annotations

import json
import re

import pytest
from conftest import Workflow, git, make_repo, wait_for

FAST = "def steps():\n    return {n}\n"
MEASURE = "import json\nimport fast\n\nprint(json.dumps({{'ops': fast.steps()}}))\n"
EVALUATOR = (
    "import json\nimport fast\n\n"
    "ops = fast.steps()\n"
    "print(json.dumps({'pass': ops < 500, 'score': -ops, 'notes': f'{ops} steps'}))\n"
)
TESTS = "from fast import steps\n\n\ndef test_steps():\n    assert steps() > 0\n"
PROGRAM = """# Fewer steps

```yaml
target_file: fast.py
eval_command: python measure.py
metric_key: ops
direction: minimize
max_experiments: 6
experiment_timeout: 30
guard: python -m pytest -q
```

## Research Direction

PROSE-MARKER: reduce the number of steps without breaking the tests.
"""


def make_target(path):
    return make_repo(
        path,
        {
            "fast.py": FAST.format(n=1000),
            "measure.py": MEASURE.replace("{{", "{").replace("}}", "}"),
            "evaluate.py": EVALUATOR,
            "tests/test_fast.py": TESTS,
            "program.md": PROGRAM,
        },
    )


@pytest.fixture
def exp_target(tmp_path):
    return make_target(tmp_path / "target")


def change(n, hypothesis, content=None):
    return [
        {"tool": "write_file", "args": {"path": "fast.py", "content": content or FAST.format(n=n)}},
        {
            "tool": "finish_experiment",
            "args": {"hypothesis": hypothesis, "change_summary": f"steps() returns {n}"},
        },
    ]


def finish(hypothesis):
    return {"tool": "finish_experiment", "args": {"hypothesis": hypothesis, "change_summary": "x"}}


BAD = "def steps(:\n    return 1\n"

MAIN_SCRIPT = {
    "experiment": {
        1: change(800, "Halve the inner loop"),
        2: change(900, "Unroll the loop by hand"),
        # Equal to the best: discarded.
        3: change(
            800, "Cache the intermediate sums", content="def steps():\n    return 800  # c\n"
        ),
        # A rephrasing of #2 is refused before anything is measured; then a new idea.
        4: [finish("unroll the loop by hand!"), *change(700, "Memoize the step function")],
        # Syntax error, told to the agent, fixed once.
        5: [
            {"tool": "write_file", "args": {"path": "fast.py", "content": BAD}},
            finish("Vectorize the counting"),
            *change(600, "Vectorize the counting"),
        ],
        6: change(0, "Skip the work entirely"),  # better metric, but the guard fails
    }
}


def spec_for(repo, workflow, script, transcript=None, **experiment):
    return {
        "mode": "experiment",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        # No pause between iterations (program.md's default is 5 s).
        "experiment": {"cooldown_s": 0} | (experiment or {"program": "program.md"}),
        "agent": {
            "backend": "script",
            "script": str(workflow.script(script)),
            "transcript": str(transcript or workflow.workdir / "transcript.jsonl"),
        },
    }


def jsonl(session):
    return [json.loads(line) for line in (session / "experiments.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def main_run(tmp_path_factory):
    """One six-iteration session shared by the tests that only read it (about 15 s)."""
    base = tmp_path_factory.mktemp("main")
    workflow, target = Workflow(base / "work"), make_target(base / "target")
    workflow.run("e", spec_for(target, workflow, MAIN_SCRIPT))
    return workflow, target, workflow.session("e")


def test_keeps_strict_improvements_and_resets_the_rest(main_run):
    workflow, target, session = main_run
    subjects = git(session / "worktree", "log", "--format=%s").splitlines()
    assert subjects[:3] == [
        "autoresearch: exp 5 -- ops=600 (was 700) -- Vectorize the counting",
        "autoresearch: exp 4 -- ops=700 (was 800) -- Memoize the step function",
        "autoresearch: exp 1 -- ops=800 (was 1000) -- Halve the inner loop",
    ]
    assert subjects[3:] == ["autoresearch: baseline ops=1000", "initial"]
    assert (session / "worktree/fast.py").read_text() == FAST.format(n=600)
    assert git(session / "worktree", "status", "--porcelain") == ""
    assert (
        git(session / "worktree", "rev-parse", "--abbrev-ref", "HEAD")
        == "autoresearch/experiment/e"
    )
    statuses = [e["status"] for e in jsonl(session)]
    assert statuses == [
        "baseline",
        "kept",
        "discarded",
        "discarded",
        "kept",
        "kept",
        "guard_failed",
    ]
    baseline = json.loads((session / "baseline.json").read_text())
    assert (baseline["value"], baseline["experiment_id"], baseline["metric_key"]) == (600, 5, "ops")
    # The user's checkout is untouched.
    assert git(target, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (target / "fast.py").read_text() == FAST.format(n=1000)


def test_another_modes_file_asked_of_the_session_is_refused_in_one_line(main_run):
    # narrow's plot asked of an experiment session by hand: refused before any job runs,
    # not after waiting for the loop and failing in the plot's job with a traceback.
    workflow, _, session = main_run
    before = sorted(
        str(p.relative_to(session)) for p in session.rglob("*") if ".git" not in p.parts
    )
    proc = workflow.run("e", target="sessions/e/goal-progress.png", check=False)
    assert proc.returncode != 0
    assert (
        "Error: sessions/e/goal-progress.png: an experiment session makes no goal-progress.png"
        in (proc.stderr)
    )
    assert "Traceback" not in proc.stderr
    after = sorted(str(p.relative_to(session)) for p in session.rglob("*") if ".git" not in p.parts)
    assert after == before


def test_duplicate_hypothesis_is_refused_before_any_measurement(main_run):
    _, _, session = main_run
    proposal = json.loads((session / "iterations/004/proposal.json").read_text())
    assert proposal["refused_duplicates"] == [
        {"hypothesis": "unroll the loop by hand!", "matches": 2}
    ]
    assert proposal["hypothesis"] == "Memoize the step function"
    data = json.loads((session / "results-data.json").read_text())
    assert [d["experiment_id"] for d in data] == list(range(7))


def test_syntax_error_is_told_to_the_agent_and_retried_once(main_run):
    _, _, session = main_run
    proposal = json.loads((session / "iterations/005/proposal.json").read_text())
    assert proposal["outcome"] == "proposed" and len(proposal["syntax_errors"]) == 1
    assert "fast.py:1" in proposal["syntax_errors"][0][0]


def test_guard_failure_discards_a_better_metric(main_run):
    _, _, session = main_run
    decision = json.loads((session / "iterations/006/decision.json").read_text())
    assert decision["status"] == "guard_failed" and decision["metric_value"] == 0
    assert decision["end_commit"] == decision["start_commit"]


def test_iteration_limit_stops_and_every_log_is_written(main_run):
    _, _, session = main_run
    done = (session / "done").read_text()
    assert "stopped: iteration limit reached (max_iterations = 6)" in done
    assert "best: ops = 600 (experiment 5)" in done
    report = (session / "report.md").read_text()
    assert report.startswith("## Autoresearch Complete")
    assert "- Experiments run: 6" in report and "- Improvements found: 3" in report
    assert (session / "progress.png").read_bytes()[:4] == b"\x89PNG"
    tsv = (session / "experiments.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[:2] == ["run_id", "iteration"] and len(tsv) == 8
    assert len({row.split("\t")[0] for row in tsv[1:]}) == 1
    assert len(list((session / "evaluations").glob("iteration-*.json"))) == 7
    evaluation = json.loads((session / "evaluations/iteration-0006.json").read_text())
    assert evaluation["pass"] is False and evaluation["status"] == "guard_failed"
    log = (session / "decision-log.md").read_text()
    assert "## Iteration 0004 — " in log and "**Evaluator result**: pass=true, score=700" in log
    results = (session / "results.tsv").read_text().splitlines()
    assert len(results) == 7 and all("\texperiment\t" in r for r in results[1:])


def test_the_reports_counts_agree_with_its_lists(main_run):
    _, _, session = main_run
    report = (session / "report.md").read_text()

    def count(label: str) -> int:
        return int(re.search(rf"^- {label}: (\d+)", report, re.M).group(1))

    def listed(heading: str) -> tuple[str, list[str]]:
        """A section's heading line and its items (up to the next blank line)."""
        start = report.index(f"### {heading}")
        lines = report[start:].split("\n\n")[0].splitlines()
        return lines[0], [line for line in lines[1:] if line != "(none)"]

    _, improvements = listed("Improvements")
    assert count("Improvements found") == len(improvements) == 3
    heading, not_kept = listed("Experiments not kept")
    # Two discarded and a guard failure: counted where they are listed, none called failed.
    assert count("Discarded experiments") == 3 and count("Failed experiments") == 0
    assert len(not_kept) == 3 and heading == "### Experiments not kept (3)"


def test_agent_is_shown_research_prose_history_and_best(main_run):
    workflow, _, _ = main_run
    briefs = [
        b
        for b in workflow.transcript(workflow.workdir / "transcript.jsonl")
        if b["team"] == "experiment"
    ]
    assert len(briefs) == 6
    assert "finish_experiment" in briefs[0]["tools"] and "run_tests" in briefs[0]["tools"]
    last = briefs[-1]
    assert "PROSE-MARKER" in last["task"]
    assert "ops = 600 (set by experiment 5" in last["task"]
    assert [h["id"] for h in last["data"]["history"]] == [1, 2, 3, 4, 5]


def test_program_md_is_protected_and_never_modified(workflow, exp_target):
    script = {
        "experiment": {
            1: [
                {"tool": "write_file", "args": {"path": "program.md", "content": "hijacked"}},
                {"tool": "write_file", "args": {"path": "measure.py", "content": "print(0)"}},
                *change(900, "Trim a step"),
            ]
        }
    }
    workflow.run(
        "p", spec_for(exp_target, workflow, script, program="program.md", max_iterations=1)
    )
    session = workflow.session("p")
    assert (session / "worktree/program.md").read_text() == PROGRAM
    assert (exp_target / "program.md").read_text() == PROGRAM
    assert git(session / "worktree", "show", "--stat", "--format=", "HEAD").startswith("fast.py |")


def test_rerun_after_an_interrupted_decision_adds_no_duplicate(main_run):
    workflow, _, session = main_run
    before = git(session / "worktree", "log", "--format=%s")
    # As if killed after committing iteration 6's verdict but before decision.json landed.
    for name in (
        "iterations/006/decision.json",
        "iterations/006/evaluation.md",
        "done",
        "report.md",
        "progress.png",
    ):
        (session / name).unlink()
    workflow.run("e")
    assert git(session / "worktree", "log", "--format=%s") == before
    ids = [e["id"] for e in jsonl(session)]
    assert ids == list(range(7))
    # A plain rerun of a finished session does nothing.
    proc = workflow.run("e")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_crash_timeout_syntax_error_and_target_reached(workflow, exp_target):
    slow = "import time\ntime.sleep(120)\n\n\ndef steps():\n    return 10\n"
    script = {
        "experiment": {
            1: change(10, "Precompute at import time", content=slow),
            2: [
                {"tool": "write_file", "args": {"path": "fast.py", "content": BAD}},
                finish("Inline the helper"),
                finish("Inline the helper"),
            ],
            3: change(400, "Remove the redundant pass"),
        }
    }
    spec = spec_for(
        exp_target,
        workflow,
        script,
        goal="fewer steps",
        scope=["fast.py"],
        guard="python -m pytest -q",
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        verify_timeout_s=10,  # generous for a loaded machine, short against the 120 s sleep
        guard_timeout_s=300,
        target=500,
        max_iterations=10,
    )
    workflow.run("c", spec)
    session = workflow.session("c")
    entries = jsonl(session)
    assert [e["status"] for e in entries] == ["baseline", "crash", "syntax_error", "kept"]
    assert "timed out after 10s" in entries[1]["error"]
    # A crash is a crash whatever the guard says: no guard run (it would sleep 120 s too).
    [measured] = json.loads((session / "iterations/001/measurements.json").read_text()).values()
    assert measured["guard"] == {"ok": None}
    assert entries[2]["error"].startswith("syntax_error")
    assert "stopped: target reached: 400 meets <= 500" in (session / "done").read_text()


def test_evaluator_format_with_pass_only(workflow, exp_target):
    script = {"experiment": {1: change(900, "Shave a tenth"), 2: change(300, "Halve twice")}}
    spec = spec_for(
        exp_target,
        workflow,
        script,
        goal="pass the evaluator",
        scope=["fast.py"],
        metric={"command": "python evaluate.py", "format": "evaluator"},
        keep_policy="pass_only",
        max_iterations=2,
    )
    workflow.run("v", spec)
    session = workflow.session("v")
    assert [e["status"] for e in jsonl(session)] == ["baseline", "discarded", "kept"]
    first = json.loads((session / "evaluations/iteration-0001.json").read_text())
    assert first["pass"] is False and first["score"] == -900 and first["notes"] == "900 steps"
    raw = json.loads((session / "results-data.json").read_text())[2]["raw_eval_output"]
    assert raw == {"pass": True, "score": -300, "notes": "300 steps"}


def test_dry_run_lists_the_next_iteration(workflow, exp_target):
    workflow.run("d", spec_for(exp_target, workflow, MAIN_SCRIPT), "--until", "session")
    proc = workflow.run("d", None, "-n")
    assert "experiment_propose" in proc.stdout and "experiment_decide" in proc.stdout


def test_kill_during_decide_then_rerun_logs_each_iteration_once(workflow, tmp_path):
    import os
    import signal

    flag = tmp_path / "slow-measure"
    asleep = tmp_path / "asleep"  # made when the slow measurement has begun its sleep
    slow_measure = (
        "import json, os, time\nimport fast\n\n"
        f"if os.path.exists({str(flag)!r}) and fast.steps() == 900:\n"
        f"    open({str(asleep)!r}, 'w').close()\n    time.sleep(60)\n"
        "print(json.dumps({'ops': fast.steps()}))\n"
    )
    repo = make_target(tmp_path / "t")
    (repo / "measure.py").write_text(slow_measure)
    git(repo, "commit", "-qam", "slow measure")
    script = {"experiment": {1: change(800, "Halve the loop"), 2: change(900, "Unroll it")}}
    spec = spec_for(repo, workflow, script, program="program.md", max_iterations=2)
    spec["commands"] = {"sandbox": "none"}  # the flag is outside the jail's view (its /tmp)
    flag.write_text("")
    try:
        proc = workflow.start("k", spec)
        wait_for(asleep.exists)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        flag.unlink()
    assert not (workflow.session("k") / "iterations/002/decision.json").exists()
    workflow.run("k", spec)
    ids = [e["id"] for e in jsonl(workflow.session("k"))]
    assert ids == sorted(set(ids)) == [0, 1, 2]
    subjects = git(workflow.session("k") / "worktree", "log", "--format=%s").splitlines()
    assert sum(s.startswith("autoresearch: exp 1 ") for s in subjects) == 1
    assert not any(s.startswith("autoresearch: exp 2 ") for s in subjects)  # 900 > 800: discarded
    assert (workflow.session("k") / "done").exists()


def test_max_duration_is_the_agent_deadline_not_only_a_check_between_iterations(
    workflow, exp_target
):
    # The agent would think for ten minutes; the session has 20 s. Without the remaining
    # time as its deadline the run outlasts the subprocess timeout below.
    script = {"experiment": {1: [{"sleep": 600}, *change(400, "Think for a long time")]}}
    spec = spec_for(
        exp_target,
        workflow,
        script,
        goal="fewer steps",
        scope=["fast.py"],
        metric={"command": "python measure.py", "key": "ops", "direction": "minimize"},
        max_duration=20,
    )
    workflow.run("t", spec, timeout=300)
    session = workflow.session("t")
    assert [e["status"] for e in jsonl(session)] == ["baseline", "no_change"]
    assert "stopped: duration limit reached" in (session / "done").read_text()

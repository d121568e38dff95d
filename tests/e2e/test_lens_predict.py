"""The predict lens through Snakemake: personas analyse alone (their briefs hold nothing of one
another's), debate with every finding in view, the devil's advocate is held to its duty, and
code counts the vote into the report files."""

from __future__ import annotations

import csv
import json
import re

import pytest
import yaml
from conftest import git

from autoresearch.checks.votes import merge_id

PERSONAS = ["architecture", "security", "devils-advocate"]
ZERO = ("ZERO mean divides by zero", "calc.py:6")
NAME = ("NAME add is trivially named", "calc.py:1")
ZID, NID = merge_id(ZERO[1], ZERO[0]), merge_id(NAME[1], NAME[0])


def predict(title_location, severity="high", confidence="high", **extra) -> dict:
    title, location = title_location
    args = {
        "title": title,
        "category": "correctness",
        "location": location,
        "evidence": f"EVIDENCE for {title}",
        "severity": severity,
        "confidence": confidence,
        **extra,
    }
    return {"tool": "report_prediction", "args": args}


def position(fid, stance, reason="because") -> dict:
    return {
        "tool": "state_position",
        "args": {"finding_id": fid, "stance": stance, "reason": reason},
    }


SCRIPT = {
    "persona": {
        "architecture/0": [
            predict(ZERO, hypothesis="Guarding empty input in mean removes a crash."),
            predict(NAME, severity="low", confidence="low"),
        ],
        "security/0": [predict(ZERO), predict(("SEC ghost", "calc.py:99"))],
    },
    "debate": {
        "architecture/1": [position(ZID, "confirm"), position(NID, "dispute", "on reflection")],
        "security/1": [position(ZID, "confirm"), position("nope", "confirm")],
        "devils-advocate/1": [position(ZID, "confirm")],
        "devils-advocate/1-retry": [position(ZID, "dispute", "thin evidence")],
    },
}


@pytest.fixture(scope="module")
def predict_run(tmp_path_factory):
    from conftest import CALC, CALC_TESTS, Workflow, make_repo

    base = tmp_path_factory.mktemp("predict")
    target = make_repo(base / "target", {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS})
    head = git(target, "rev-parse", "HEAD")
    workflow = Workflow(base / "work")
    spec = {
        "mode": "predict",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "predict": {"personas": PERSONAS, "rounds": 1},
        "fail_on": "high",
        "agent": {
            "backend": "script",
            "script": str(workflow.script(SCRIPT)),
            "transcript": str(workflow.workdir / "t.jsonl"),
        },
    }
    workflow.run("pr", spec, cores=3)
    return workflow, target, head


def briefs(workflow, team):
    return [b for b in workflow.transcript(workflow.workdir / "t.jsonl") if b["team"] == team]


def test_a_personas_brief_holds_nothing_of_any_other_persona(predict_run):
    workflow = predict_run[0]
    analyses = briefs(workflow, "persona")
    assert sorted(b["data"]["persona"] for b in analyses) == sorted(PERSONAS)
    for brief in analyses:
        text = json.dumps(brief)
        assert "ZERO" not in text and "NAME" not in text and "SEC ghost" not in text
        others = [p for p in PERSONAS if p != brief["data"]["persona"]]
        assert not any(f"persona: {p}" in brief["task"] for p in others)


def test_every_debate_brief_shows_every_merged_finding(predict_run):
    debates = briefs(predict_run[0], "debate")
    assert len(debates) == 4  # three personas, and the devil's advocate's retry
    for brief in debates:
        assert ZID in brief["task"] and NID in brief["task"]
        assert "raised by architecture, security" in brief["task"]


def test_the_vote_labels_follow_the_scripted_table(predict_run):
    findings = (predict_run[0].session("pr") / "findings.md").read_text()
    rows = {r.split("|")[1].strip(): r for r in findings.splitlines() if r.startswith("| ")}
    assert "| 2/3 | 1 | confirmed |" in rows[ZID]
    assert "| 0/3 | 1 | discarded |" in rows[NID]


def test_the_devils_advocate_is_retried_once_when_it_agrees_with_the_majority(predict_run):
    session = predict_run[0].session("pr")
    record = json.loads((session / "predict/devils-advocate/round-1.json").read_text())
    assert record["attempts"] == 2
    assert record["devils_advocate"] == {"majority": [ZID], "disputed": [ZID], "action": "accept"}
    retry = [b for b in briefs(predict_run[0], "debate") if b["data"]["cycle"] == "1-retry"]
    assert len(retry) == 1 and "Your positions were not accepted" in retry[0]["task"]


def test_the_hypothesis_queue_is_ready_for_narrow_and_broad_sessions(predict_run):
    text = (predict_run[0].session("pr") / "hypothesis-queue.md").read_text()
    assert "NAME" not in text  # discarded findings are not queued
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]
    assert blocks[0]["angles"][0] == {
        "name": ZERO[0],
        "hypothesis": "Guarding empty input in mean removes a crash.",
        "priority": 1,
    }
    assert blocks[1]["hypotheses"][0]["id"] == "h1"


def test_the_log_counts_each_round_and_the_drops(predict_run):
    with (predict_run[0].session("pr") / "predict-results.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert [(r["iteration"], r["category"]) for r in rows] == [("0", "analysis"), ("1", "debate-1")]
    assert rows[0]["new"] == "2" and rows[0]["drop_reasons"] == "location=1"
    assert rows[1]["drop_reasons"] == "not-allowed=1"  # the unknown finding id


def test_predict_changes_nothing_and_gates_on_the_confirmed_high_finding(predict_run):
    workflow, target, head = predict_run
    assert git(target, "rev-parse", "HEAD") == head and git(target, "status", "--porcelain") == ""
    handoff = json.loads((workflow.session("pr") / "handoff.json").read_text())
    assert [f["title"] for f in handoff["findings"]] == [ZERO[0]]
    assert handoff["gate"] == "FAILED"
    assert "debate.md" in {p.name for p in workflow.session("pr").iterdir()}


def test_a_kill_during_the_analyses_then_a_rerun_finishes_without_duplicate_rows(workflow, target):
    import os
    import signal

    from conftest import wait_for

    # Each analysis waits for its own go-ahead, so whichever runs first (Snakemake picks the
    # order) can be let through while the next one is held: the kill lands during it.
    go = workflow.workdir / "go"
    held = {
        f"{p}/0": [{"wait_for": str(go / p), "timeout": 600}, *SCRIPT["persona"].get(f"{p}/0", [])]
        for p in PERSONAS
    }
    slow = {**SCRIPT, "persona": {**SCRIPT["persona"], **held}}
    spec = {
        "mode": "predict",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "predict": {"personas": PERSONAS, "rounds": 1},
        "agent": {"backend": "script", "script": str(workflow.script(slow, "kill.yaml"))},
    }
    proc = workflow.start("pk", spec)
    session = workflow.session("pk")

    def started() -> list[str]:
        return [p for p in PERSONAS if (session / f"logs/predict/{p}/round-0.log").exists()]

    def reached(condition) -> None:
        # Only the conditions are waited on (a held analysis waits for its go-ahead as long
        # as it takes), with a loaded machine's margin; a run that ended early says why.
        def seen() -> bool:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            return condition()

        wait_for(seen, timeout=600)

    reached(lambda: len(started()) == 1)
    done = started()[0]
    go.mkdir()
    (go / done).touch()
    reached(lambda: (session / f"predict/{done}/round-0.json").exists())
    reached(lambda: len(started()) == 2)
    running = next(p for p in started() if p != done)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (session / f"predict/{running}/round-0.json").exists()
    first = (session / f"predict/{done}/round-0.json").stat().st_mtime_ns
    workflow.script(SCRIPT, "kill.yaml")  # the rerun replays the quick script
    workflow.run("pk", spec)
    assert (session / f"predict/{done}/round-0.json").stat().st_mtime_ns == first
    with (session / "predict-results.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert [r["iteration"] for r in rows] == ["0", "1"] and len({r["run_id"] for r in rows}) == 1
    assert "| 2/3 | 1 | confirmed |" in (session / "findings.md").read_text()

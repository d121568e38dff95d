"""`autoresearch redo`: a stage and everything after it run again on a consistent branch."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
from conftest import Workflow, calc_repo, git, script_spec

FINDING = {
    "severity": "high",
    "title": "missing notes file",
    "location": "calc.py:1",
    "issue": "The project has no notes.",
    "impact": "Readers are lost.",
}


def green_writes(path: str, text: str, fid: str) -> list[dict]:
    return [
        {"tool": "write_file", "args": {"path": path, "content": text}},
        {"tool": "finish_fix", "args": {"finding_id": fid, "summary": f"write {path}"}},
    ]


def three_cycle_script(second: str) -> dict:
    return {
        # A new finding each cycle: Red may not report one already handled.
        "red": {
            n: [{"tool": "report_finding", "args": {**FINDING, "title": f"missing file {n}"}}]
            for n in (1, 2, 3)
        },
        "green": {
            1: green_writes("one.txt", "one\n", "F-001"),
            2: green_writes("two.txt", second, "F-002"),
            3: green_writes("three.txt", "three\n", "F-003"),
        },
    }


def cli(workflow, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        cwd=workflow.workdir,
        env=workflow.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def recorded_commits(session, cycles: int) -> list[str]:
    """Every commit the session's records claim, one entry per claim."""
    out = []
    for n in range(1, cycles + 1):
        folder = session / "cycles" / f"{n:03d}"
        out += [f["commit"] for f in json.loads((folder / "green.json").read_text())["fixed"]]
        refactor = folder / "refactor.json"
        if refactor.exists():
            out += [c["commit"] for c in json.loads(refactor.read_text())["commits"]]
    return out


def run_three_cycles(workflow, target):
    script = workflow.script(three_cycle_script("two\n"))
    values = script_spec(
        target, script, workflow.workdir / "t.jsonl", max_cycles=3, teams=["red", "green"]
    )
    workflow.run("s", values)
    return script


@pytest.fixture(scope="module")
def three_cycles(tmp_path_factory):
    """One three-cycle session for the tests of a redo that refuses or moves nothing (each
    checks that nothing moved) and of status on a branch moved behind its back (which puts
    the branch back); the tests of a redo that moves something run their own."""
    base = tmp_path_factory.mktemp("redo")
    workflow, target = Workflow(base / "work"), calc_repo(base / "target")
    run_three_cycles(workflow, target)
    return workflow, target


def test_redo_of_a_middle_green_reruns_the_rest_on_the_new_history(workflow, target):
    script = run_three_cycles(workflow, target)
    session = workflow.session("s")
    old_green = json.loads((session / "cycles/002/green.json").read_text())
    script.write_text(json.dumps(three_cycle_script("two, redone\n")))

    proc = cli(workflow, "redo", "s", "--cycle", "2", "--stage", "green")
    assert proc.returncode == 0, proc.stderr[-4000:]
    # Each stage says where the run is: cycle k of max, elapsed, kept so far.
    assert re.search(r"\[s\] cycle 2/3 green started \(\d\d:\d\d:\d\d elapsed, 1 kept", proc.stderr)
    assert re.search(r"\[s\] cycle 2/3 evaluate started \([^)]*, 1 kept so far", proc.stderr)
    # The stage that decides counts its cycle's fix in its closing line.
    assert re.search(r"\[s\] cycle 2/3 evaluate finished \([^)]*, 2 kept so far", proc.stderr)
    assert re.search(r"\[s\] cycle 3/3 evaluate finished \([^)]*, 3 kept so far", proc.stderr)

    # The old outputs are kept, not deleted.
    [moved] = list((session / "superseded").iterdir())
    assert json.loads((moved / "cycles/002/green.json").read_text()) == old_green
    assert (moved / "cycles/003/decision.json").exists() and (moved / "done").exists()
    assert json.loads((moved / "redo.json").read_text())["reset_to"] == old_green["start_commit"]
    # The session ran to its end again, on the redone Green.
    assert (session / "done").exists()
    branch = "autoresearch/improve"
    assert git(target, "show", f"{branch}:two.txt") == "two, redone"
    decisions = [workflow.decision("s", n) for n in (1, 2, 3)]
    assert decisions[2]["start_commit"] == decisions[1]["end_commit"]
    assert decisions[2]["end_commit"] == git(target, "rev-parse", branch)
    # Every commit on the branch is recorded exactly once, and every record is on it.
    base = json.loads((session / "setup.json").read_text())["base_commit"]
    on_branch = git(target, "rev-list", f"{base}..{branch}").split()
    claims = Counter(recorded_commits(session, 3))
    assert sorted(claims) == sorted(on_branch)
    assert set(claims.values()) == {1}
    # results.tsv counts each cycle once; the superseded rows went with the old files.
    rows = (session / "results.tsv").read_text().splitlines()[1:]
    assert sorted(r.split("\t")[0] for r in rows) == ["001", "001", "002", "002", "003", "003"]
    assert len((moved / "results.tsv").read_text().splitlines()) == 1 + 4
    assert "WARNING" not in cli(workflow, "status", "s").stdout


def session_state(session, target) -> tuple:
    """Every file of the session with its bytes, and the session branch's tip."""
    files = {str(p.relative_to(session)): p.read_bytes() for p in session.rglob("*") if p.is_file()}
    return files, git(target, "rev-parse", "autoresearch/improve")


def test_redo_with_no_run_changes_nothing_and_lists_what_would_move(three_cycles):
    workflow, target = three_cycles
    session = workflow.session("s")
    start = json.loads((session / "cycles/003/red.json").read_text())["start_commit"]
    before = session_state(session, target)
    proc = cli(workflow, "redo", "s", "--cycle", "3", "--stage", "red", "--no-run")
    assert proc.returncode == 0, proc.stderr
    assert session_state(session, target) == before
    assert not (session / "superseded").exists()
    out = proc.stdout
    assert "a redo of cycle 003 red would:" in out
    assert "    sessions/s/done\n" in out and "    sessions/s/cycles/003/red-findings.md\n" in out
    assert "set aside 2 results.tsv row(s)" in out
    assert f"to {start[:12]}" in out
    assert "then run: snakemake --cores 1" in out and "sessions/s/done" in out
    assert "nothing was changed" in out


def test_redo_with_move_only_resets_the_branch_and_prints_the_command(workflow, target):
    run_three_cycles(workflow, target)
    session = workflow.session("s")
    start = json.loads((session / "cycles/003/red.json").read_text())["start_commit"]
    proc = cli(workflow, "redo", "s", "--cycle", "3", "--stage", "red", "--move-only")
    assert proc.returncode == 0, proc.stderr
    assert "snakemake --cores 1" in proc.stdout and "sessions/s/done" in proc.stdout
    assert git(target, "rev-parse", "autoresearch/improve") == start
    assert not (session / "done").exists() and not (session / "cycles/003/red.json").exists()


def test_redo_of_a_step_that_never_ran_moves_nothing(three_cycles):
    workflow, _ = three_cycles
    before = sorted(p.name for p in workflow.session("s").rglob("*"))
    proc = cli(workflow, "redo", "s", "--cycle", "7", "--stage", "green")
    assert proc.returncode == 2 and "cycles/007 does not exist" in proc.stderr
    assert sorted(p.name for p in workflow.session("s").rglob("*")) == before


def test_redo_names_the_stages_of_the_mode(three_cycles):
    workflow, target = three_cycles
    before = session_state(workflow.session("s"), target)
    proc = cli(workflow, "redo", "s", "--cycle", "1", "--stage", "propose")
    assert proc.returncode == 2
    assert "red, sanitize, green, refactor, evaluate" in proc.stderr
    assert session_state(workflow.session("s"), target) == before


def test_status_flags_a_branch_rewritten_outside_autoresearch(three_cycles):
    workflow, target = three_cycles
    base = json.loads((workflow.session("s") / "setup.json").read_text())["base_commit"]
    ref = "refs/heads/autoresearch/improve"
    tip = git(target, "rev-parse", ref)
    git(target, "update-ref", ref, base)
    try:
        out = cli(workflow, "status", "s").stdout
    finally:
        git(target, "update-ref", ref, tip)  # the shared session as it was, for the others
    assert "WARNING: branch autoresearch/improve is at" in out and "autoresearch redo" in out


def test_redo_of_an_experiment_iteration_logs_each_iteration_once(workflow, tmp_path):
    from test_experiment import change, make_target, spec_for

    repo = make_target(tmp_path / "t")
    script = {"experiment": {1: change(800, "Halve the loop"), 2: change(900, "Unroll it")}}
    values = spec_for(repo, workflow, script, program="program.md", max_iterations=2)
    workflow.run("x", values)
    session = workflow.session("x")
    redone = {"experiment": {1: script["experiment"][1], 2: change(700, "Memoize it")}}
    (workflow.workdir / "script.yaml").write_text(json.dumps(redone))

    proc = cli(workflow, "redo", "x", "--iteration", "2", "--stage", "propose")
    assert proc.returncode == 0, proc.stderr[-4000:]
    logged = [json.loads(line) for line in (session / "experiments.jsonl").read_text().splitlines()]
    assert [e["id"] for e in logged] == [0, 1, 2]
    assert logged[2]["hypothesis"] == "Memoize it" and logged[2]["kept"]
    [moved] = list((session / "superseded").iterdir())
    old = [json.loads(line) for line in (moved / "experiments.jsonl").read_text().splitlines()]
    assert [(e["id"], e["hypothesis"]) for e in old] == [(2, "Unroll it")]
    assert (moved / "report.md").exists() and (session / "report.md").exists()
    assert git(repo, "show", "autoresearch/experiment/x:fast.py").count("700")


def results_rows(session) -> dict[str, dict[str, str]]:
    lines = (session / "results.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    return {
        row["team"]: row
        for row in (dict(zip(header, ln.split("\t"), strict=True)) for ln in lines[1:])
    }


def test_each_results_row_has_its_stages_time_and_refactor_its_own_files(workflow, target):
    script = workflow.script(
        {
            "red": {1: [{"tool": "report_finding", "args": FINDING}]},
            "green": {1: green_writes("notes.txt", "notes\n", "F-001")},
        }
    )
    values = script_spec(target, script, workflow.workdir / "t.jsonl", max_cycles=1)
    workflow.run("s", values)
    session = workflow.session("s")
    rows = results_rows(session)
    assert rows["green"]["files_changed"] == "1"
    assert (rows["refactor"]["description"], rows["refactor"]["files_changed"]) == (
        "0 changes",
        "0",  # Refactor was given notes.txt and changed nothing
    )
    # Rewrite the rows with red's record dated long ago: its row keeps red's own time.
    red = session / "cycles/001/red.json"
    os.utime(red, (978307200, 978307200))  # 2001-01-01T00:00:00Z
    proc = cli(workflow, "redo", "s", "--cycle", "1", "--stage", "evaluate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = results_rows(session)
    assert rows["red"]["timestamp"] == "2001-01-01T00:00:00Z"
    assert rows["green"]["timestamp"] != "2001-01-01T00:00:00Z"

"""Experiment batches (`experiment.parallel: 3`) through Snakemake: candidates in their own
worktrees, measured as separate jobs, the best one kept; locally, on the cluster-generic
profile, and after a kill -9 in the middle of a batch."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import ROOT, Workflow, git, wait_for
from test_experiment import BAD, change, finish, jsonl, make_target, spec_for

# Iteration 1: c2 is best (700) and kept; c1 (800) also beats the baseline but loses to
# c2; c3 hands in the same idea as c1, and whichever claims it second is refused and
# tries its fallback. Iteration 2 starts from c2's commit: c1 wins, c2 fails the syntax
# check twice, c3 breaks the guard.
BATCH_SCRIPT = {
    "experiment": {
        "c1/1": [*change(800, "Halve the inner loop"), *change(850, "Reorder the loop")],
        "c2/1": change(700, "Memoize the step function"),
        "c3/1": [*change(1200, "halve the inner loop!"), *change(1100, "Drop a redundant pass")],
        "c1/2": change(650, "Hoist the constant out of the loop"),
        "c2/2": [
            {"tool": "write_file", "args": {"path": "fast.py", "content": BAD}},
            finish("Vectorize the counting"),
            finish("Vectorize the counting"),
        ],
        "c3/2": change(0, "Skip the work entirely"),
    }
}
KEPT_SUBJECTS = [
    "autoresearch: exp 2 (c1) -- ops=650 (was 700) -- Hoist the constant out of the loop",
    "autoresearch: exp 1 (c2) -- ops=700 (was 1000) -- Memoize the step function",
    "autoresearch: baseline ops=1000",
    "initial",
]


def batch_spec(target, workflow, script=BATCH_SCRIPT, **extra):
    experiment = {"program": "program.md", "parallel": 3, "max_iterations": 2} | extra
    return spec_for(target, workflow, script, **experiment)


def subjects(session) -> list[str]:
    return git(session / "worktree", "log", "--format=%s").splitlines()


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory):
    """One two-iteration batch session at --cores 3, shared by the tests that read it."""
    base = tmp_path_factory.mktemp("batch")
    workflow, target = Workflow(base / "work"), make_target(base / "target")
    workflow.run("b", batch_spec(target, workflow), cores=3)
    return workflow, target, workflow.session("b")


def test_batch_keeps_the_best_candidate_beating_the_incumbent(batch_run):
    _, _, session = batch_run
    assert subjects(session) == KEPT_SUBJECTS
    first = json.loads((session / "iterations/001/decision.json").read_text())
    statuses = {c["candidate"]: c["status"] for c in first["candidates"]}
    assert statuses == {"c1": "discarded", "c2": "kept", "c3": "discarded"}
    c1 = next(c for c in first["candidates"] if c["candidate"] == "c1")
    assert c1["metric_value"] in (800, 850) and "c2 did better (700)" in c1["verdict"]
    second = json.loads((session / "iterations/002/decision.json").read_text())
    statuses = {c["candidate"]: c["status"] for c in second["candidates"]}
    assert statuses == {"c1": "kept", "c2": "syntax_error", "c3": "guard_failed"}
    assert second["best"] | {"commit": None} == {
        "value": 650,
        "samples": [650.0],
        "passed": None,
        "commit": None,
        "experiment_id": 2,
        "candidate": "c1",
    }


def test_each_candidate_works_in_its_own_worktree_from_the_incumbent(batch_run):
    _, _, session = batch_run
    first = json.loads((session / "iterations/001/decision.json").read_text())
    starts = {
        json.loads((session / f"iterations/002/{c}/proposal.json").read_text())["start_commit"]
        for c in ("c1", "c2", "c3")
    }
    assert starts == {first["end_commit"]}
    for c in ("c1", "c2", "c3"):
        worktree = session / "tracks" / c / "worktree"
        assert git(worktree, "rev-parse", "HEAD") == first["end_commit"]
        assert git(worktree, "status", "--porcelain") == ""


def test_a_siblings_hypothesis_is_refused_when_handed_in_second(batch_run):
    _, _, session = batch_run
    proposals = {
        c: json.loads((session / f"iterations/001/{c}/proposal.json").read_text())
        for c in ("c1", "c3")
    }
    refused = {c: p["refused_duplicates"] for c, p in proposals.items() if p["refused_duplicates"]}
    assert len(refused) == 1, proposals
    [(loser, [entry])] = refused.items()
    winner = "c3" if loser == "c1" else "c1"
    assert entry["sibling"] is True and entry["matches"] == f"1/{winner}"
    assert proposals[loser]["hypothesis"] in ("Reorder the loop", "Drop a redundant pass")


def test_every_candidate_is_logged_once_with_its_patch_kept(batch_run):
    _, _, session = batch_run
    entries = jsonl(session)
    keys = [(e["id"], e.get("candidate")) for e in entries]
    assert keys == [(0, None)] + [(i, f"c{c}") for i in (1, 2) for c in (1, 2, 3)]
    for e in entries[1:]:
        patch = session / f"iterations/{e['id']:03d}/{e['candidate']}/proposal.patch"
        assert patch.read_text().startswith("diff --git a/fast.py b/fast.py"), e
    tsv = (session / "experiments.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[:3] == ["run_id", "iteration", "candidate"] and len(tsv) == 8
    evaluation = json.loads((session / "evaluations/iteration-0002.json").read_text())
    assert evaluation["candidate"] == "c1" and len(evaluation["candidates"]) == 3
    log = (session / "decision-log.md").read_text()
    assert "**Tried**: c1: Hoist the constant" in log and "c3: Skip the work entirely" in log
    assert "experiments: 6 (3 candidates per iteration)" in (session / "done").read_text()


def test_show_prints_a_discarded_candidates_hypothesis_verdict_and_diff(batch_run):
    workflow, _, _ = batch_run
    proc = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "show", "b", "2", "--candidate", "c3"],
        cwd=workflow.workdir,
        env=workflow.env() | {"PYTHONPATH": str(ROOT)},  # this checkout's package
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Experiment #2/c3" in out and "- Hypothesis: Skip the work entirely" in out
    assert "- Status: guard_failed" in out and "- ops: 700 → 0" in out
    assert "+    return 0" in out
    missing = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "show", "b", "2", "--candidate", "c9"],
        cwd=workflow.workdir,
        env=workflow.env() | {"PYTHONPATH": str(ROOT)},  # this checkout's package
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "no candidate 'c9' (candidates: c1, c2, c3)" in (
        missing.stderr
    )


def test_cluster_generic_profile_keeps_the_same_commits(batch_run, tmp_path):
    """Every propose, measure and decide job a process of its own: the first iteration keeps
    the commit the local run kept first, with the same verdicts (one iteration submits every
    kind of job, at half the cost of two)."""
    _, local_target, local = batch_run
    workflow, target = Workflow(tmp_path / "work"), make_target(tmp_path / "target")
    workflow.run(
        "b",
        batch_spec(target, workflow, max_iterations=1),
        "--profile",
        str(ROOT / "profiles" / "cluster-generic"),
        cores=3,
    )
    remote = workflow.session("b")
    assert subjects(remote) == KEPT_SUBJECTS[1:]
    first_kept = git(local_target, "log", "--format=%H", "-1", f"--grep={KEPT_SUBJECTS[1]}",
                     "--fixed-strings", "autoresearch/experiment/b")  # fmt: skip
    assert git(target, "rev-parse", "autoresearch/experiment/b^{tree}") == git(
        local_target, "rev-parse", f"{first_kept}^{{tree}}"
    )

    def verdicts(session) -> list[tuple]:
        # c1 and c3 race for one idea: which of them falls back differs from run to run.
        return sorted((e["candidate"], e["status"]) for e in jsonl(session) if e["id"] == 1)

    assert verdicts(remote) == verdicts(local)


def test_measurement_jobs_ask_for_the_specs_resources(workflow, tmp_path):
    target = make_target(tmp_path / "target")
    spec = batch_spec(target, workflow, resources={"gpu": 1, "slurm_partition": "gpu"})
    workflow.run("r", spec, "--until", "session")
    proc = workflow.run("r", None, "-n", "--quiet", "host")  # the profile quiets job blocks
    blocks = re.split(r"\n(?=(?:local)?(?:rule|checkpoint) )", proc.stdout)
    measure = [b for b in blocks if b.startswith("rule experiment_measure:")]
    assert len(measure) == 3
    assert all("gpu=1" in b and "slurm_partition=gpu" in b for b in measure)
    assert not any("gpu=1" in b for b in blocks if b.startswith("rule experiment_candidate:"))


def test_kill_mid_batch_then_rerun_logs_every_candidate_once(workflow, tmp_path):
    flag = tmp_path / "slow-measure"
    asleep = tmp_path / "asleep"  # made when the slow measurement has begun its sleep
    slow_measure = (
        "import json, os, time\nimport fast\n\n"
        f"if os.path.exists({str(flag)!r}) and fast.steps() == 600:\n"
        f"    open({str(asleep)!r}, 'w').close()\n    time.sleep(90)\n"
        "print(json.dumps({'ops': fast.steps()}))\n"
    )
    target = make_target(tmp_path / "t")
    (target / "measure.py").write_text(slow_measure)
    git(target, "commit", "-qam", "slow measure")
    script = {
        "experiment": {
            "c1/1": change(800, "Halve the loop"),
            "c2/1": change(900, "Unroll it"),
            "c3/1": change(950, "Inline the helper"),
            "c1/2": change(600, "Cache the sums"),
            "c2/2": change(750, "Skip a pass"),
            "c3/2": change(850, "Reorder the loop"),
        }
    }
    spec = batch_spec(target, workflow, script)
    spec["commands"] = {"sandbox": "none"}  # the flag is outside the jail's view (its /tmp)
    flag.write_text("")
    session = workflow.session("k")
    try:
        proc = subprocess.Popen(
            workflow.command("k", spec, cores=3),
            cwd=workflow.workdir,
            env=workflow.env(),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(asleep.exists, timeout=300)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        flag.unlink()
    assert not (session / "iterations/002/decision.json").exists()
    workflow.run("k", spec, cores=3)
    keys = [(e["id"], e.get("candidate")) for e in jsonl(session)]
    assert keys == [(0, None)] + [(i, f"c{c}") for i in (1, 2) for c in (1, 2, 3)]
    assert subjects(session) == [
        "autoresearch: exp 2 (c1) -- ops=600 (was 800) -- Cache the sums",
        "autoresearch: exp 1 (c1) -- ops=800 (was 1000) -- Halve the loop",
        "autoresearch: baseline ops=1000",
        "slow measure",
        "initial",
    ]
    assert (session / "done").exists()


# fast.py with a list of 40 names: a candidate that flips their quotes rewrites 40 lines
# whose code does not change, a reformat the protection refuses at the commit.
NAMES = "".join(f"    '{i}',\n" for i in range(40))
LISTED = "def steps():\n    return {n}\n\n\nNAMES = [\n" + NAMES + "]\n"


def test_a_winning_candidate_the_protection_refuses_at_the_commit_is_discarded(workflow, tmp_path):
    """The batch's decide commits the best candidate through the protection as a single
    proposal's decide does: a refused commit discards it, and the session goes on."""
    target = make_target(tmp_path / "target")
    (target / "fast.py").write_text(LISTED.format(n=1000))
    git(target, "commit", "-qam", "names")
    restyled = LISTED.format(n=500).replace("'", '"')
    script = {
        "experiment": {
            "c1/1": change(500, "Halve it, and tidy the quotes", content=restyled),
            "c2/1": change(900, "Trim a pass", content=LISTED.format(n=900)),
        }
    }
    workflow.run("r", batch_spec(target, workflow, script, parallel=2, max_iterations=1), cores=2)
    session = workflow.session("r")
    first = json.loads((session / "iterations/001/decision.json").read_text())
    c1 = next(c for c in first["candidates"] if c["candidate"] == "c1")
    assert c1["status"] == "discarded"
    assert "fast.py: the change rewrites" in c1["verdict"]
    assert first["end_commit"] == first["start_commit"]
    assert subjects(session) == ["autoresearch: baseline ops=1000", "names", "initial"]

"""Finished jobs leave Snakemake's DAG (engine/finished_jobs.py), on the pinned Snakemake.

A small workflow shaped like a session's loop (a chain of checkpoints that `all` asks for
one at a time, as `done` asks for the next open cycle's decision) runs with and without
pruning. Every job the DAG finished is watched through a weak reference; at the end,
Snakemake's own bounded caches (the `lru_cache`s of its metadata store) are emptied and
the garbage collected: with pruning no job of an earlier step is still alive, so no
table of Snakemake's still holds one. If a new Snakemake keeps finished jobs somewhere
else, or renames an internal the pruning relies on, this test fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STEPS = 8

SNAKEFILE = """
import gc, json, os, sys, weakref
sys.path.insert(0, {root!r})
from autoresearch.engine import finished_jobs

STEPS = {steps}
PRUNE = config["prune"]
WATCHED = []
INSTALLED = []
real_prune = finished_jobs.prune


def watching_prune(dag, scheduler):
    WATCHED.extend(weakref.ref(job) for job in dag._finished)
    return real_prune(dag, scheduler)


finished_jobs.prune = watching_prune


def next_decision(wildcards):
    n = 1
    while n < STEPS and os.path.exists(f"out/{{n}}/decision"):
        n += 1
    return checkpoints.decide.get(n=n).output[0]


rule all:
    input: next_decision
    output: "done"
    shell: "touch {{output}}"


# The previous step's decision until it is on disk (as a cycle's first stage asks).
def previous(wildcards):
    path = f"out/{{int(wildcards.n) - 1}}/decision"
    return [path] if int(wildcards.n) > 1 and not os.path.exists(path) else []


rule work:
    input: previous
    output: "out/{{n}}/work"
    shell: "touch {{output}}"


checkpoint decide:
    input: "out/{{n}}/work"
    output: "out/{{n}}/decision"
    shell: "touch {{output}}"


onstart:
    if PRUNE:
        INSTALLED.append(finished_jobs.install(workflow))
    else:
        # The same watch, without the pruning: what Snakemake alone keeps.
        dag = workflow.dag
        finish = dag.finish

        async def watched(job, update_checkpoint_dependencies=True):
            ready = await finish(job, update_checkpoint_dependencies)
            WATCHED.extend(weakref.ref(j) for j in dag._finished)
            return ready

        dag.finish = watched


onsuccess:
    for cls in type(workflow.persistence).__mro__:
        for value in vars(cls).values():
            if hasattr(value, "cache_clear"):
                value.cache_clear()
    gc.collect()
    # Every job object still alive: those watched finishing, and those a checkpoint
    # update replaced before they ran (`all`, as `done` is each cycle).
    alive = [o for o in gc.get_objects() if type(o).__name__ == "Job"]
    with open("result.json", "w") as out:
        json.dump({{
            "installed": INSTALLED,
            "alive": sorted(f"{{j.rule.name}} {{dict(j.wildcards)}}" for j in alive),
        }}, out)
"""


def run_chain(tmp_path: Path, prune: bool) -> dict:
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(root=str(ROOT), steps=STEPS))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "1",
            "--quiet",
            "all",
            "--config",
            f"prune={prune}",
            "--rerun-triggers",
            "mtime",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / f"out/{STEPS}/decision").exists()
    assert "finished jobs stay" not in proc.stderr
    return json.loads((tmp_path / "result.json").read_text())


def test_snakemake_keeps_every_finished_job_without_the_pruning(tmp_path):
    """The premise (and what makes the next test able to fail): left alone, Snakemake
    keeps the jobs of every finished step of the chain."""
    result = run_chain(tmp_path, prune=False)
    early = [a for a in result["alive"] if "'n': '1'}" in a]
    assert early == ["decide {'n': '1'}", "work {'n': '1'}"]
    assert len(result["alive"]) >= 2 * (STEPS - 1)


def test_no_finished_step_job_outlives_the_pruning(tmp_path):
    result = run_chain(tmp_path, prune=True)
    assert result["installed"] == [True]
    # Only the graph that is left: the last step's jobs and `all` (and at most the `all`
    # the last update replaced, dropped at the next finish, which never comes).
    last = ["all {}", f"decide {{'n': '{STEPS}'}}", f"work {{'n': '{STEPS}'}}"]
    assert sorted(set(result["alive"])) == last
    assert result["alive"].count("all {}") <= 2 and len(result["alive"]) <= 4


def test_install_changes_nothing_on_a_snakemake_without_an_internal(caplog):
    """A Snakemake that renamed a table: the session runs unpruned, said in one line."""
    from autoresearch.engine import finished_jobs

    class Dag:
        async def finish(self, job, update_checkpoint_dependencies=True):
            return None

    class Workflow:
        dag = Dag()
        scheduler = object()

    before = Workflow.dag.finish
    assert not finished_jobs.install(Workflow())
    assert Workflow.dag.finish == before
    assert "dag._finished" in finished_jobs.missing(Workflow())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("finished jobs stay in Snakemake's DAG")


@pytest.mark.parametrize("signature", ["(job)", "(job, update_checkpoint_dependencies=True)"])
def test_a_changed_finish_is_named(signature):
    from autoresearch.engine import finished_jobs

    namespace: dict = {}
    exec(f"async def finish{signature}: return None", namespace)  # noqa: S102

    class Dag:
        pass

    dag = Dag()
    dag.finish = namespace["finish"]

    class Workflow:
        scheduler = None

    Workflow.dag = dag
    gone = finished_jobs.missing(Workflow())
    changed = "dag.finish(job, update_checkpoint_dependencies)" in gone
    assert changed == (signature == "(job)")

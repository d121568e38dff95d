"""Finished jobs out of Snakemake's DAG: the process that runs a long session stays flat.

A session's loop is a chain of checkpoints: once cycle N's decision is made, Snakemake
builds cycle N+1's jobs and drops cycle N's from its dependency graph, but keeps each of
them (a `Job` with its input, output, log and params containers, ~19 KiB) in its set of
finished jobs and in a dozen side tables, for the life of the process: about 0.14 MiB a
cycle, 420 MiB at cycle 2000. Nothing reads them again: a finished job out of the graph
is asked for nothing (its outputs' metadata is on disk, and a plain rerun rebuilds what it
needs from the files).

`install` wraps the DAG's `finish` on the one workflow that runs (the instance, never
Snakemake's class): after Snakemake has finished a job and updated its checkpoints, every
finished job that is out of the graph (no job depends on it, it is no target and not
running) is taken out of the tables below. Jobs still in the graph are left alone, so
what Snakemake schedules next is what it would have scheduled anyway.

Snakemake is pinned (environment.yml, pyproject.toml); these are the internals relied on
(`RELIED_ON`). If any is missing, `install` changes nothing and says so in one line: the
session runs as before, only its memory grows. `tests/e2e/test_finished_jobs.py` fails
if a new Snakemake version keeps a pruned job alive elsewhere or renames one of these.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

log = logging.getLogger(__name__)

# (object, attribute): the object is "dag", "dag.job_factory", a DAG processor
# ("processor") or the job scheduler ("scheduler").
RELIED_ON: tuple[tuple[str, str], ...] = (
    ("dag", "finish"),  # async (job, update_checkpoint_dependencies=True): wrapped
    ("dag", "jobs"),  # the jobs in the dependency graph
    ("dag", "depending"),  # job -> the jobs that depend on it
    ("dag", "targetjobs"),
    ("dag", "_running"),
    ("dag", "_finished"),  # the set that keeps every finished job
    ("dag", "_reason"),
    ("dag", "_jobid"),
    ("dag", "_priority"),
    ("dag", "_group"),
    ("dag", "_checked_jobs"),
    ("dag", "_checked_needrun_jobs"),
    ("dag", "_seen_outputs"),  # output file -> job
    ("dag", "job_cache"),  # (rule, file) -> job
    ("dag", "_deferred_temp_jobs"),  # every finished job while a checkpoint is pending
    ("dag", "dag_processors"),
    ("dag.job_factory", "cache"),  # (rule name, wildcards) -> job
    ("processor", "processed_jobs"),
    ("scheduler", "_validated_jobs"),
)


def missing(workflow: Any) -> list[str]:
    """The internals in `RELIED_ON` this Snakemake lacks (none on the pinned version)."""
    dag = workflow.dag
    owners: dict[str, list[Any]] = {
        "dag": [dag],
        "dag.job_factory": [getattr(dag, "job_factory", None)],
        "processor": list(getattr(dag, "dag_processors", None) or [None]),
        "scheduler": [workflow.scheduler],
    }
    gone = [
        f"{owner}.{name}"
        for owner, name in RELIED_ON
        if any(not hasattr(obj, name) for obj in owners[owner])
    ]
    finish = getattr(dag, "finish", None)
    if finish is not None and (
        not inspect.iscoroutinefunction(finish)
        or list(inspect.signature(finish).parameters) != ["job", "update_checkpoint_dependencies"]
    ):
        gone.append("dag.finish(job, update_checkpoint_dependencies)")
    return gone


def install(workflow: Any) -> bool:
    """Prune finished jobs out of `workflow`'s DAG after every job Snakemake finishes;
    False (and one line in the log) when this Snakemake lacks what pruning relies on."""
    gone = missing(workflow)
    if gone:
        log.warning(
            "finished jobs stay in Snakemake's DAG (its memory grows with the session): "
            "this Snakemake has no %s",
            ", ".join(gone),
        )
        return False
    dag = workflow.dag
    finish = dag.finish

    async def finish_and_prune(job: Any, update_checkpoint_dependencies: bool = True) -> Any:
        ready = await finish(job, update_checkpoint_dependencies=update_checkpoint_dependencies)
        prune(dag, workflow.scheduler)
        return ready

    dag.finish = finish_and_prune
    return True


def prune(dag: Any, scheduler: Any) -> int:
    """Take every finished job that is out of the graph out of the DAG's tables; how many."""
    graph = dag.jobs
    dead = {
        job
        for job in dag._finished
        if job not in graph
        and not dag.depending.get(job)
        and job not in dag.targetjobs
        and job not in dag._running
    }
    if not dead:
        return 0
    dag._finished -= dead
    for job in dead:
        for table in (dag.depending, dag._reason, dag._jobid, dag._priority, dag._group):
            table.pop(job, None)
        for members in (dag._checked_jobs, dag._checked_needrun_jobs, scheduler._validated_jobs):
            members.discard(job)
        for processor in dag.dag_processors:
            processor.processed_jobs.discard(job)
    # A job with temp() outputs stays on the deferred list: Snakemake deletes those files
    # once no checkpoint is pending. Ours have none.
    dag._deferred_temp_jobs[:] = [
        job for job in dag._deferred_temp_jobs if job not in dead or job.temp_output
    ]
    for index in (dag._seen_outputs, dag.job_cache, dag.job_factory.cache):
        for key in [key for key, job in index.items() if job in dead]:
            del index[key]
    return len(dead) + forget_replaced(dag, scheduler)


def forget_replaced(dag: Any, scheduler: Any) -> int:
    """Jobs a checkpoint update replaced before they ran (`done`, the report: a new job
    each cycle) leave the graph without finishing, and stay in the sets of jobs Snakemake
    has checked, prioritised, numbered and processed; how many such entries were dropped."""
    graph, running = dag.jobs, dag._running
    sets = [dag._checked_jobs, dag._checked_needrun_jobs, scheduler._validated_jobs]
    sets += [processor.processed_jobs for processor in dag.dag_processors]
    dropped = 0
    for members in sets:
        out = [job for job in members if job not in graph and job not in running]
        members.difference_update(out)
        dropped += len(out)
    for table in (dag._priority, dag._jobid):  # a replaced job's id stays with it too
        for job in [job for job in table if job not in graph and job not in running]:
            del table[job]
            dropped += 1
    # The first job seen making each output (checked against later ones by id): one out
    # of the graph gives way to the job that replaced it, checked afresh.
    seen = dag._seen_outputs
    for path in [p for p, job in seen.items() if job not in graph and job not in running]:
        del seen[path]
        dropped += 1
    return dropped

"""Telling a killed run's Slurm jobs apart (no cluster needed; tests/cluster has the rest)."""

from __future__ import annotations

from autoresearch.session import slurm

BATCH_SCRIPT = """#!/bin/sh
# This script was created by sbatch --wrap.

/venv/bin/python -m snakemake --snakefile '/w/Snakefile' --target-jobs 'green:name=s,cycle=001' \
--allowed-rules green --cores 'all' --wait-for-files '/w/.snakemake/tmp.x' --no-hooks
"""


def test_sessions_of_a_job_script_come_from_its_target_jobs_name_wildcard():
    assert slurm.sessions_of(BATCH_SCRIPT) == {"s"}


def test_a_group_job_names_every_session_it_works_on():
    script = "snakemake --target-jobs 'red:name=a,cycle=001' 'broad_red:name=b.2,hid=h1' --x"
    assert slurm.sessions_of(script) == {"a", "b.2"}


def test_a_job_without_a_session_names_none():
    assert slurm.sessions_of("snakemake --target-jobs 'example_repo:example=demo'") == set()
    assert slurm.sessions_of("#!/bin/sh\necho unrelated 'name=s'\n") == set()


def test_without_squeue_there_are_no_leftover_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurm.leftover_jobs(["s"], tmp_path) == []


def test_slurm_is_asked_only_when_this_or_an_earlier_run_submitted_to_it(tmp_path):
    assert not slurm.worth_asking(tmp_path, "local")
    assert slurm.worth_asking(tmp_path, "slurm")
    (tmp_path / ".snakemake" / "slurm_logs").mkdir(parents=True)
    assert slurm.worth_asking(tmp_path, "local")

"""The Slurm cluster the `slurm` tests submit to, and what they ask it.

Your own cluster: set AUTORESEARCH_SLURM_PARTITION (and AUTORESEARCH_SLURM_ACCOUNT if
your site wants one) and run `make test-slurm` from a login node; the temp directories
must be on a filesystem the compute nodes share (set TMPDIR/--basetemp if /tmp is not).
Otherwise local-slurm.sh brings up a single-node cluster on this machine (root, Debian)
and the fixture stops it again if it started it.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LOCAL_SLURM = HERE / "local-slurm.sh"
PROFILE = ROOT / "profiles" / "slurm" / "config.yaml"
# sacct's fields for one job (-X: the allocation, not its steps).
JOB_FIELDS = ("JobID", "State", "Partition", "Account", "Timelimit", "ReqMem", "ReqCPUS")


class Unavailable(Exception):
    """No Slurm to test on; the message says why."""


@dataclass
class Cluster:
    partition: str
    account: str | None
    env: dict[str, str] = field(default_factory=dict)  # SLURM_CONF of a local cluster
    started: bool = False

    def command(self, *args: str) -> str:
        proc = subprocess.run(
            args, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def profile(self, dest: Path) -> Path:
        """profiles/slurm as a user would copy it: their partition and account filled in.

        Also what a short test needs: the plugin's first status check comes 40 s after
        a job is submitted by default (right for hour-long stages), and the tests read
        which rule a job ran from its log file, which the plugin deletes on success.
        """
        settings = yaml.safe_load(PROFILE.read_text())
        resources = settings["default-resources"]
        resources["slurm_partition"] = self.partition
        if self.account:
            resources["slurm_account"] = self.account
        settings["slurm-init-seconds-before-status-checks"] = 1
        settings["slurm-keep-successful-logs"] = True
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "config.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
        return dest

    def jobs_in(self, workdir: Path) -> list[dict[str, str]]:
        """Every job (sacct) that was submitted from `workdir` in the last day."""
        out = self.command(
            "sacct",
            "-X",
            "--parsable2",
            "--noheader",
            "--starttime=now-1days",
            f"--format={','.join(JOB_FIELDS)},WorkDir",
        )
        jobs = []
        for line in out.splitlines():
            job = dict(zip((*JOB_FIELDS, "WorkDir"), line.split("|"), strict=True))
            if Path(job["WorkDir"]).resolve() == workdir.resolve():
                jobs.append(job)
        return jobs

    def active_jobs_in(self, workdir: Path) -> list[str]:
        """Ids of jobs from `workdir` that are still queued or running."""
        out = self.command("squeue", "--me", "--noheader", "--format=%i|%Z")
        ids = []
        for line in out.splitlines():
            job_id, _, job_dir = line.strip().partition("|")
            if Path(job_dir).resolve() == workdir.resolve():
                ids.append(job_id)
        return ids


def existing_cluster() -> Cluster | None:
    """The user's cluster, named by AUTORESEARCH_SLURM_PARTITION."""
    partition = os.environ.get("AUTORESEARCH_SLURM_PARTITION")
    if not partition:
        return None
    cluster = Cluster(partition, os.environ.get("AUTORESEARCH_SLURM_ACCOUNT") or None)
    try:
        state = cluster.command("sinfo", "--noheader", "--partition", partition, "--format=%a")
    except (AssertionError, OSError) as err:
        raise Unavailable(f"sinfo cannot reach partition {partition!r}: {err}") from None
    if "up" not in state.split():
        raise Unavailable(f"partition {partition!r} is not up (sinfo says {state.strip()!r})")
    return cluster


def bring_up() -> Cluster:
    """The user's cluster, or a local one started by local-slurm.sh (Unavailable if not)."""
    cluster = existing_cluster()
    if cluster is not None:
        return cluster
    proc = subprocess.run(
        ["bash", str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        reason = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise Unavailable(reason[0])
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return Cluster(
        partition=values["PARTITION"],
        account=values["ACCOUNT"],
        env={"SLURM_CONF": values["SLURM_CONF"]},
        started=values["STARTED"] == "1",
    )


def tear_down(cluster: Cluster) -> None:
    """Stop the local cluster if this run started it; leave anything else running."""
    if cluster.started:
        subprocess.run(["bash", str(LOCAL_SLURM), "down"], check=True, timeout=300)

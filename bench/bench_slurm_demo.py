"""The bundled sweep demo locally and through profiles/slurm: wall time of each.

Runs `snakemake --cores 1 sessions/demo/done`, then the same with `--profile` (a copy of
profiles/slurm with the test cluster's partition and account, and the first status check
1 s after submission), each in a fresh copy of this checkout. Prints both wall times, the
number of Slurm jobs and the machine's load average, which the figures depend on.

Needs a Slurm that is already up: yours (AUTORESEARCH_SLURM_PARTITION set) or the local
one (tests/cluster/local-slurm.sh up); prints why it skipped otherwise.

    python bench/bench_slurm_demo.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

from slurm_cluster import LOCAL_SLURM, Unavailable, bring_up  # noqa: E402

PARTS = ("Snakefile", "rules", "config", "profiles", "autoresearch", "examples")


def checkout_copy(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for part in PARTS:
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / part)
    return dest


def timed_demo(workdir: Path, env: dict[str, str], *extra: str) -> float:
    args = [sys.executable, "-m", "snakemake", "--cores", "1", "sessions/demo/done", *extra]
    start = time.monotonic()
    proc = subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"demo failed in {workdir}:\n{proc.stderr[-3000:]}")
    if not (workdir / "sessions" / "demo" / "done").exists():
        sys.exit(f"demo in {workdir} wrote no done")
    return seconds


def main() -> None:
    local_up = subprocess.run(["bash", str(LOCAL_SLURM), "status"], capture_output=True)
    if not os.environ.get("AUTORESEARCH_SLURM_PARTITION") and local_up.returncode != 0:
        print("skipped: no Slurm up (run tests/cluster/local-slurm.sh up first)")
        return
    try:
        cluster = bring_up()
    except Unavailable as err:
        print(f"skipped: {err}")
        return
    env = {**os.environ, **cluster.env}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        base = Path(tmp)
        load_before = os.getloadavg()[0]
        local = timed_demo(checkout_copy(base / "local"), env)
        remote_dir = checkout_copy(base / "slurm")
        profile = cluster.profile(base / "profile")
        remote = timed_demo(remote_dir, env, "--profile", str(profile))
        jobs = len(cluster.jobs_in(remote_dir))
        load_after = os.getloadavg()[0]
    print(f"sweep demo, --cores 1:            {local:7.1f} s")
    print(f"sweep demo, --profile slurm:      {remote:7.1f} s  ({jobs} Slurm jobs)")
    print(f"per Slurm job, beyond local:      {(remote - local) / max(jobs, 1):7.1f} s")
    print(f"load average (1 min), start/end:  {load_before:.1f} / {load_after:.1f}")


if __name__ == "__main__":
    main()

"""CPU of test files: what each costs the suite, whatever the machine's load.

Each file runs alone in a fresh `python -m pytest -p no:xdist` (no workers), and the CPU
of that process and of every process it waited for (Snakemake, the jobs, git, the
target's test runs) is read from wait4's rusage: on a loaded machine the wall time says
little, the CPU says what the file costs. Also printed: the sum of pytest's own test
durations (`--durations=0`, setup + call + teardown: wall, so load-dependent) and the
count of tests run (their calls). The file's tests must pass; a failure is reported, not timed.

With `--tests N`, the N costliest phases of each file's tests (setup, call, teardown, with
the processes each waited for; bench/suite_cpu_plugin.py): a module fixture is paid in the
setup of its first test, so these name the costly fixtures too.

This process is made the subreaper of what the file's run starts: a job that detaches (the
cluster-generic profile's `nohup` jobs) is reaped here and counted with its file, where
wait4's figure alone would lose it with its parent.

`--checkout PATH` runs another checkout's tests with its own package (a "before":
`git archive <commit> | tar -x -C PATH`); the interpreter is this one's. Both checkouts'
modules are compiled first, as `make test` compiles them once before any session.

    python bench/bench_suite_files.py tests/e2e/test_narrow.py tests/e2e/test_ship.py
        [--checkout /tmp/before] [--repeat 2]
"""

from __future__ import annotations

import argparse
import compileall
import ctypes
import json
import os
import py_compile
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
PR_SET_CHILD_SUBREAPER = 36
DURATION = re.compile(r"^(\d+\.\d+)s (setup|call|teardown) ", re.M)


@dataclass
class FileCost:
    """One run of one test file."""

    path: str
    cpu_s: float
    wall_s: float
    durations_s: float
    tests: int
    ok: bool
    phases: list[tuple[float, str]]  # (cpu s, "nodeid phase"), costliest first


def children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def reap_orphans() -> None:
    """Collect the detached processes handed to this subreaper that have ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def run_file(checkout: Path, path: str) -> FileCost:
    # pytest as `python -m pytest` runs it, with the per-test plugin importable and nothing
    # added to the environment the tests and their processes see.
    main = f"import sys; sys.path.insert(1, {str(BENCH)!r}); import pytest; sys.exit(pytest.main())"
    args = [sys.executable, "-c", main, "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    args += ["-p", "suite_cpu_plugin", "--durations=0", "--durations-min=0", path]
    fd, phases_file = tempfile.mkstemp(prefix="suite-cpu-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", SUITE_CPU_OUT=phases_file)
    reap_orphans()
    before = children_cpu_s()
    start = time.monotonic()
    with open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            args, cwd=checkout, env=env, stdin=devnull, stdout=subprocess.PIPE, text=True
        )
        out = proc.stdout.read() if proc.stdout else ""
        _, status, _ = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    reap_orphans()
    lines = Path(phases_file).read_text().splitlines()
    os.unlink(phases_file)
    phases = sorted(
        ((r["cpu_s"], f"{r['nodeid']} {r['phase']}") for r in map(json.loads, lines)),
        reverse=True,
    )
    return FileCost(
        path=path,
        cpu_s=children_cpu_s() - before,
        wall_s=wall,
        durations_s=sum(float(m.group(1)) for m in DURATION.finditer(out)),
        tests=sum(m.group(2) == "call" for m in DURATION.finditer(out)),
        ok=proc.returncode == 0,
        phases=phases,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="test files (paths inside the checkout)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="whose tests and package")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each file")
    parser.add_argument("--tests", type=int, default=0, help="costliest test phases to print")
    opts = parser.parse_args()
    # Jobs that detach (nohup ... &) are re-parented here, not to init, and counted.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    checkout = opts.checkout.resolve()
    hashed = py_compile.PycInvalidationMode.CHECKED_HASH
    for package in ("autoresearch", "scripts"):
        compileall.compile_dir(checkout / package, quiet=1, invalidation_mode=hashed)
    print(f"checkout {checkout}")
    print(f"{'file':<52} {'cpu s':>7} {'wall s':>7} {'dur s':>7} {'tests':>6}")
    total_cpu = total_dur = 0.0
    for path in opts.files:
        for _ in range(opts.repeat):
            cost = run_file(checkout, path)
            total_cpu += cost.cpu_s
            total_dur += cost.durations_s
            flag = "" if cost.ok else "  FAILED (not a valid figure)"
            print(
                f"{cost.path:<52} {cost.cpu_s:7.1f} {cost.wall_s:7.1f} "
                f"{cost.durations_s:7.1f} {cost.tests:6d}{flag}",
                flush=True,
            )
            for cpu, phase in cost.phases[: opts.tests]:
                print(f"    {cpu:7.1f}  {phase}", flush=True)
    print(f"{'total':<52} {total_cpu:7.1f} {'':>7} {total_dur:7.1f}")


if __name__ == "__main__":
    main()

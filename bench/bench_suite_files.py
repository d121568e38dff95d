"""CPU of test files: what each costs the suite, whatever the machine's load.

Each file runs alone in a fresh `python -m pytest -p no:xdist` (no workers), and the CPU
of that process and of every process it waited for (Snakemake, the jobs, git, the
target's test runs) is read from wait4's rusage: on a loaded machine the wall time says
little, the CPU says what the file costs. Also printed: the sum of pytest's own test
durations (`--durations=0`, setup + call + teardown: wall, so load-dependent) and the
count of tests run (their calls). The file's tests must pass; a failure is reported, not timed.

`--checkout PATH` runs another checkout's tests with its own package (a "before":
`git archive <commit> | tar -x -C PATH`); the interpreter is this one's. Both checkouts'
modules are compiled first, as `make test` compiles them once before any session.

    python bench/bench_suite_files.py tests/e2e/test_narrow.py tests/e2e/test_ship.py
        [--checkout /tmp/before] [--repeat 2]
"""

from __future__ import annotations

import argparse
import compileall
import os
import py_compile
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def run_file(checkout: Path, path: str) -> FileCost:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    args += ["--durations=0", "--durations-min=0", path]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    start = time.monotonic()
    with open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            args, cwd=checkout, env=env, stdin=devnull, stdout=subprocess.PIPE, text=True
        )
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    return FileCost(
        path=path,
        cpu_s=usage.ru_utime + usage.ru_stime,
        wall_s=wall,
        durations_s=sum(float(m.group(1)) for m in DURATION.finditer(out)),
        tests=sum(m.group(2) == "call" for m in DURATION.finditer(out)),
        ok=proc.returncode == 0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="test files (paths inside the checkout)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="whose tests and package")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each file")
    opts = parser.parse_args()
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
    print(f"{'total':<52} {total_cpu:7.1f} {'':>7} {total_dur:7.1f}")


if __name__ == "__main__":
    main()

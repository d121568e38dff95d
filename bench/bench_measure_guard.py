"""What the measurement's guard (autoresearch/measure/guard.py) costs a Python measurement: the
hook's start-up (holding builtins and every stdlib module imported), the import watch and the
check at exit, per run of a metric.

Each scenario is a temp git repo whose `bench/measure.py` imports `src` and prints a number;
`metrics.measure` runs it `--repeats` times in a fresh Python, and the child processes' CPU
and the wall time are read. This checkout is compared with `--checkout PATH` (an older one,
no guard; `git archive <commit> | tar -x -C PATH` makes one).

  small   the script imports statistics only;
  stdlib  the code under test imports 40 stdlib modules (json, asyncio, email, sqlite3, ...);
  numpy   the code under test imports numpy (installed, not held: only the import watch);
  late    the code under test prints 0 from an atexit handler reached by a computed name
          (the value column shows whether the figure read is the script's, 3, or the late 0).

Each round runs every side once, in turn, so a change of the machine's load falls on both.

    python bench/bench_measure_guard.py [--repeats 20] [--rounds 5] [--checkout /tmp/before]
        [--jail]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEASURE = "import statistics\n\nfrom src import work\n\nprint(statistics.median(work()))\n"
STDLIB = (
    "import json, re, subprocess, asyncio, logging, typing, dataclasses, decimal, fractions\n"
    "import io, contextlib, concurrent.futures, xml.etree.ElementTree, email.message\n"
    "import http.client, sqlite3, csv, argparse, multiprocessing, tempfile, pathlib\n"
    "import collections, enum, functools, itertools, random, time, datetime, unittest.mock\n"
    "import importlib.metadata, warnings, pickle, copy, hashlib, base64, zlib, inspect, ast\n"
)
SCENARIOS = {
    "small": "def work():\n    return [3, 3, 3]\n",
    "stdlib": STDLIB + "\n\ndef work():\n    return [3, 3, 3]\n",
    "numpy": "import numpy\n\n\ndef work():\n    return [float(numpy.float64(3))] * 3\n",
    "late": (
        "import importlib\n\nimportlib.import_module('ate' + 'xit').register(print, 0)\n\n\n"
        "def work():\n    return [3, 3, 3]\n"
    ),
}

ONE = """
import json, resource, sys, time
from pathlib import Path
from autoresearch.measure import metrics
from autoresearch.safety import jail
repo, repeats, jailed = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
box = jail.build_jail({"sandbox": "bwrap"}, repo) if jailed else None
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.perf_counter()
m = metrics.measure("PYTHONPATH=. python bench/measure.py", repo, repeats=repeats, jail=box)
wall = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({"wall": wall / repeats, "cpu": cpu / repeats, "value": m.value}))
"""


def make_repo(where: Path, src: str) -> Path:
    (where / "bench").mkdir(parents=True)
    (where / "bench" / "measure.py").write_text(MEASURE)
    (where / "src.py").write_text(src)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=where, check=True
        )
    return where


def run(checkout: Path, repo: Path, repeats: int, jailed: bool) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", ONE, str(repo), str(repeats), "1" if jailed else "0"],
        cwd=checkout,
        env={
            "PYTHONPATH": str(checkout),
            "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="runs of the metric per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median is shown")
    parser.add_argument("--checkout", type=Path, help="an older checkout to compare with")
    parser.add_argument("--jail", action="store_true", help="in the bwrap jail")
    args = parser.parse_args()
    sides = [("this checkout", ROOT)] + ([("--checkout", args.checkout)] if args.checkout else [])
    with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
        for name, src in SCENARIOS.items():
            repo = make_repo(Path(tmp) / name, src)
            runs: dict[str, list[dict]] = {label: [] for label, _ in sides}
            for _ in range(args.rounds):
                for label, checkout in sides:
                    runs[label].append(run(checkout, repo, args.repeats, args.jail))
            for label, _ in sides:
                rounds = runs[label]
                cpu = statistics.median(r["cpu"] for r in rounds) * 1000
                wall = statistics.median(r["wall"] for r in rounds) * 1000
                value = rounds[0]["value"]
                print(
                    f"{name:7} {label:14} per run: CPU {cpu:6.1f} ms, wall {wall:6.1f} ms "
                    f"(median of {args.rounds} rounds of {args.repeats}; value {value:g})"
                )


if __name__ == "__main__":
    main()

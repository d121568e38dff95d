"""Parses of the frozen spec (session.yaml) per sweep cycle: by the jobs, and by the input
functions Snakemake calls on the thread that updates its DAG.

One session of bench_git_cycle.py's profile (the instant script agent, `true` as the tests)
with every `spec.load_frozen` call counted by the thread it ran on, and its CPU time.
Each job parses the spec once (its StageEnv holds it); the input functions read the run's
FrozenSpecs, which parses each version of the file once a run.

    python bench/bench_spec_parses.py [--root CHECKOUT] [--cycles 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_git_cycle import command, environment, prepare  # noqa: E402
from bench_sweep_overhead import ROOT  # noqa: E402

# Run in the session's Snakemake process: counts each load_frozen by the thread it ran on.
COUNTING = """
import atexit, json, sys, threading, time
sys.path.insert(0, {root!r})
from autoresearch.session import spec
counts = {{"dag": [0, 0.0], "jobs": [0, 0.0]}}
real = spec.load_frozen
def counted(path):
    began = time.thread_time()
    try:
        return real(path)
    finally:
        side = counts["dag" if threading.current_thread() is threading.main_thread() else "jobs"]
        side[0] += 1
        side[1] += time.thread_time() - began
spec.load_frozen = counted
atexit.register(lambda: open({out!r}, "w").write(json.dumps(counts)))
from snakemake.cli import main
sys.argv = ["snakemake"] + sys.argv[1:]
main()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    parser.add_argument("--cycles", type=int, default=10)
    args = parser.parse_args()
    root = args.root.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        spec, work = prepare(tmp, args.cycles)
        runner, out = tmp / "counting.py", tmp / "parses.json"
        runner.write_text(COUNTING.format(root=str(root), out=str(out)))
        cmd = command(root, spec)
        done = subprocess.run(
            [cmd[0], str(runner), *cmd[3:]], cwd=work, env=environment(tmp), capture_output=True
        )
        if done.returncode:
            sys.exit(f"the session with {root} failed: {done.stderr.decode()[-2000:]}")
        counts = json.loads(out.read_text())
    print(f"{root}, {args.cycles} cycles: parses of session.yaml a cycle (whole session / cycles)")
    for side, (n, cpu) in counts.items():
        per = args.cycles
        print(f"    {side:4s}: {n / per:.1f} a cycle, {1000 * cpu / per:.1f} ms CPU a cycle")


if __name__ == "__main__":
    main()

"""Whether a sweep's cycles cost more as the session grows, counted in Python calls.

CPU seconds on a shared 2-vCPU machine move 10-30 % between windows run minutes apart,
even for a stage that does the same work every cycle, so a growth of a few percent cannot
be seen in them. The number of Python function calls a stage makes is exact and the same
on a busy machine as on an idle one: this bench runs one sweep (the instant script agent
and `true` as its tests, as bench_sweep_overhead.py does), profiles every stage of three
early and three late cycles with cProfile, and prints each stage's calls and profiled
time early and late, and their ratios. (A C function such as a JSON parse is one call
whatever its input: the late profiled time shows those.)

    python bench/bench_cycle_calls.py [--cycles 215]
"""

from __future__ import annotations

import argparse
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep_overhead import ROOT, make_script, make_spec, make_target  # noqa: E402

# Runs Snakemake in this process with timings.timed (around every stage's body) also
# profiling the stages of the cycles named in PROFILE_CYCLES. cProfile sees only the thread
# it is enabled in: the job's.
RUNNER = """
import contextlib, cProfile, os, sys
from pathlib import Path
sys.path.insert(0, os.environ["PROFILE_ROOT"])
from autoresearch.engine import timings
original = timings.timed
cycles = {int(c) for c in os.environ["PROFILE_CYCLES"].split(",")}
out = Path(os.environ["PROFILE_OUT"])

@contextlib.contextmanager
def timed(layout, stage, track, cycle):
    with original(layout, stage, track, cycle):
        if cycle not in cycles:
            yield
            return
        profile = cProfile.Profile()
        profile.enable()
        try:
            yield
        finally:
            profile.disable()
            profile.dump_stats(out / f"{stage}-{cycle}.prof")

timings.timed = timed
from snakemake.cli import main
sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""


def figures(folder: Path, stage: str, cycles: list[int]) -> tuple[float, float] | None:
    """The stage's median calls and profiled seconds over `cycles`."""
    files = [folder / f"{stage}-{n}.prof" for n in cycles]
    if not all(f.exists() for f in files):
        return None
    stats = [pstats.Stats(str(f)) for f in files]
    return (
        statistics.median(s.total_calls for s in stats),
        statistics.median(s.total_tt for s in stats),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=215)
    args = parser.parse_args()
    last = args.cycles
    early, late = [5, 6, 7], [last - 2, last - 1, last]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        make_target(tmp / "target")
        make_script(tmp / "script.yaml", last)
        make_spec(tmp / "spec.yaml", tmp / "target", tmp / "script.yaml", last)
        work, profiles = tmp / "work", tmp / "profiles"
        work.mkdir()
        profiles.mkdir()
        env = {
            **os.environ,
            "PROFILE_ROOT": str(ROOT),
            "PROFILE_CYCLES": ",".join(map(str, early + late)),
            "PROFILE_OUT": str(profiles),
        }
        command = [sys.executable, "-c", RUNNER, "--snakefile", str(ROOT / "Snakefile")]
        command += ["--cores", "1", "sessions/bench/done", "--configfile", str(tmp / "spec.yaml")]
        with (tmp / "session.log").open("w") as log:
            if subprocess.run(command, cwd=work, env=env, stdout=log, stderr=log).returncode:
                sys.exit(f"the session failed: {(tmp / 'session.log').read_text()[-2000:]}")
        print(f"calls and profiled time per stage, cycles {early} against {late}:")
        head = f"{'stage':10} {'calls early':>12} {'late':>8} {'ratio':>6}"
        print(f"{head}   {'ms early':>9} {'late':>7}")
        totals = [0.0, 0.0]
        for stage in ("red", "sanitize", "green", "refactor", "evaluate"):
            a, b = figures(profiles, stage, early), figures(profiles, stage, late)
            if a is None or b is None:
                continue
            totals[0] += a[0]
            totals[1] += b[0]
            print(
                f"{stage:10} {a[0]:12.0f} {b[0]:8.0f} {b[0] / a[0]:6.3f}   "
                f"{a[1] * 1000:9.1f} {b[1] * 1000:7.1f}"
            )
        print(f"{'a cycle':10} {totals[0]:12.0f} {totals[1]:8.0f} {totals[1] / totals[0]:6.3f}")


if __name__ == "__main__":
    main()

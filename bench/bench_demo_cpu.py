"""CPU of `make demo`'s two sessions, a commit against another, paired.

Each round runs the demo (`snakemake --cores 1 sessions/demo/done
sessions/demo-experiment/done`, the examples' set-up included) in a fresh copy of each
side, before then after, and reads the CPU of Snakemake's process and of every process it
waited for (the jobs' git, ruff and test runs) from wait4's rusage: on a shared machine the
wall time says little. Each side may have its own interpreter (`--before-python`): a
virtualenv with what that commit installs.

    python bench/bench_demo_cpu.py [--before REF] [--after REF] [--rounds 3]
        [--before-python PATH] [--after-python PATH] [--sessions demo]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_demo_identical import ROOT, SESSIONS, copy_tree  # noqa: E402


def demo_cpu(tree: Path, python: str, sessions: list[str]) -> float:
    """CPU seconds of one demo run in `tree` (the copy's package, its worktrees in it)."""
    env = dict(os.environ, PYTHONPATH=str(tree), XDG_DATA_HOME=str(tree / ".data"))
    targets = [f"sessions/{s}/done" for s in sessions]
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(
            [python, "-m", "snakemake", "--cores", "1", *targets],
            cwd=tree,
            env=env,
            stdout=devnull,
            stderr=devnull,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the demo failed in {tree}")
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD")
    parser.add_argument("--after", help="a git ref (default: the working tree as it is)")
    parser.add_argument("--rounds", type=int, default=3)
    # One session a run is what a test pays (each its own Snakemake process).
    parser.add_argument("--sessions", nargs="+", default=list(SESSIONS), choices=SESSIONS)
    python = str(ROOT / ".venv" / "bin" / "python")
    parser.add_argument("--before-python", default=python)
    parser.add_argument("--after-python", default=python)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="demo-cpu-"))
    sources = {"before": base / "before-src", "after": base / "after-src"}
    copy_tree(args.before, sources["before"])
    copy_tree(args.after, sources["after"])
    for source in sources.values():  # as `make` leaves them: every module compiled once
        for package in ("autoresearch", "scripts"):
            compileall.compile_dir(source / package, quiet=1)
    pythons = {"before": args.before_python, "after": args.after_python}
    figures: dict[str, list[float]] = {"before": [], "after": []}
    try:
        for n in range(args.rounds):
            for side in ("before", "after"):
                tree = base / f"{side}-{n}"
                shutil.copytree(sources[side], tree, symlinks=True)
                figures[side].append(demo_cpu(tree, pythons[side], args.sessions))
                shutil.rmtree(tree, ignore_errors=True)
            print(
                f"round {n + 1}: before {figures['before'][-1]:.2f} s, "
                f"after {figures['after'][-1]:.2f} s CPU "
                f"({figures['after'][-1] / figures['before'][-1]:.3f})"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    before, after = (statistics.median(figures[s]) for s in ("before", "after"))
    print(f"median: before {before:.2f} s, after {after:.2f} s CPU ({after / before:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

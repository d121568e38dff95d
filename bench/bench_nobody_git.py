"""What running root's confined git as nobody costs, per call, against keeping capabilities.

On a temp repository with a session-like worktree (`git.open_worktree`) of --files files,
times `git status` and `git add -A` as the harness runs them (`git.worktree_git`, confined)
with `git.NOBODY_GIT` on (nobody, no capability, the git directory through an idmapped view,
the worktree handed over to nobody before each call) and off (root with CAP_DAC_OVERRIDE and
CAP_FOWNER). Prints the median CPU (ours and the children's) and wall per call, and the cost
of making the view once per process.

    python bench/bench_nobody_git.py [--files 200] [--calls 30]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoresearch.safety import git, nobody_view


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def make(tmp: Path, files: int) -> Path:
    target = tmp / "target"
    for i in range(files):
        (target / f"pkg{i % 10}").mkdir(parents=True, exist_ok=True)
        (target / f"pkg{i % 10}" / f"m{i}.py").write_text(f"X = {i}\n" * 20)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", "-C", str(target), *args], check=True, capture_output=True)
    place = tmp / "store" / "worktree"
    git.open_worktree(target, place, "autoresearch/bench", git.head(target))
    return place


def timed(worktree: Path, calls: int, *args: str) -> tuple[float, float]:
    spent, walls = [], []
    for i in range(calls):
        (worktree / "pkg0" / "m0.py").write_text(f"X = {i}\n")  # something to see
        start, before = time.perf_counter(), cpu()
        git.worktree_git(worktree, *args)
        walls.append((time.perf_counter() - start) * 1000)
        spent.append((cpu() - before) * 1000)
    return statistics.median(spent), statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--calls", type=int, default=30)
    opts = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: only a root harness runs its git as nobody")
    with tempfile.TemporaryDirectory() as tmp:
        worktree = make(Path(tmp), opts.files)
        start, before = time.perf_counter(), cpu()
        shown = nobody_view.view(git.common_dir(worktree))
        made = ((cpu() - before) * 1000, (time.perf_counter() - start) * 1000)
        if shown is None:
            sys.exit("no idmapped mount here: root's git keeps its capabilities")
        print(f"worktree of {opts.files} files; median of {opts.calls} calls (CPU ms, wall ms)")
        print(f"  making the view (once per process): {made[0]:.1f} CPU, {made[1]:.1f} wall")
        for label, nobody in (("root with 2 capabilities", False), ("nobody, none", True)):
            git.NOBODY_GIT = nobody
            git._jail_prefix.cache_clear()
            status = timed(worktree, opts.calls, "status", "--porcelain")
            add = timed(worktree, opts.calls, "add", "-A")
            print(
                f"  {label:26} status {status[0]:5.1f} CPU {status[1]:5.1f} wall; "
                f"add -A {add[0]:5.1f} CPU {add[1]:5.1f} wall"
            )


if __name__ == "__main__":
    main()

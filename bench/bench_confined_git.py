"""What the harness's git costs per cycle, and what running it inside the jail would add.

Runs one sweep (the instant script agent, `true` as its tests: only the workflow's own cost
is left, as in bench_sweep_overhead.py) with a `git` on PATH that logs each call and then
runs the real git. Prints:
  (a) the harness's git processes per cycle, by subcommand;
  (b) the whole Snakemake process's CPU per cycle (our code, git, the jailed `true`s);
  (c) one `git status` on the session's worktree, plain and as the harness runs it, inside
      the jail (`git.confined`; CPU and wall per call, median of --calls runs);
  (d) the calls that touch the worktree's files (the confined ones) x the jail's extra CPU
      and wall per call: what confining harness git costs a cycle, and its share of (b).

    python bench/bench_confined_git.py [--cycles 6] [--calls 40] [--root CHECKOUT]

`--root` runs the sweep of another checkout of autoresearch (its Snakefile and package),
for a before/after figure of the same machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep_overhead import ROOT, make_script, make_spec, make_target  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def logging_git(folder: Path, log: Path) -> None:
    """`git` and `bwrap` on PATH that log each call, then run the real one. A confined git
    call is logged by its bwrap (its own log line, written in the jail, is refused: the
    jail shows this folder read-only), with the git command line as its last argument."""
    folder.mkdir()
    for name, marker in (("git", ""), ("bwrap", "jailed ")):
        real = shutil.which(name)
        if real is None:
            continue
        shim = folder / name
        line = f'echo "{marker}$*" >> {log} 2>/dev/null'
        shim.write_text(f'#!/bin/sh\n{line}\nexec {real} "$@"\n')
        shim.chmod(0o755)


def sweep(root: Path, tmp: Path, cycles: int) -> tuple[Counter, float, float, Path]:
    """(subcommands of every git call, CPU seconds, wall seconds, the session's worktree)."""
    make_target(tmp / "target")
    make_script(tmp / "script.yaml", cycles)
    make_spec(tmp / "spec.yaml", tmp / "target", tmp / "script.yaml", cycles)
    work = tmp / "work"
    work.mkdir()
    log = tmp / "git.log"
    logging_git(tmp / "bin", log)
    env = {**os.environ, "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env["XDG_DATA_HOME"] = str(tmp / "data")  # the session's worktree goes with the bench
    env.pop("ANTHROPIC_API_KEY", None)
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile")]
    command += ["--cores", "1", "sessions/bench/done", "--configfile", str(tmp / "spec.yaml")]
    command += ["--quiet", "all"]
    start, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the session failed: {done.stderr[-2000:]}")
    wall, used = time.perf_counter() - start, children_cpu() - cpu
    calls: Counter = Counter()
    for line in log.read_text().splitlines():
        # A jail runs one git call or a few in a row (git.worktree_batch): each is a
        # process. A jail without git is a target command's (`true`).
        parts = line.split(" git -C ")[1:] if line.startswith("jailed ") else [line]
        for part in parts:
            words = ("-C " + part.split(" && ")[0] if part is not line else part).split()
            # The subcommand: the first word after the -C path and the -c settings.
            rest = [
                w for i, w in enumerate(words) if not w.startswith("-") and not _is_value(words, i)
            ]
            calls[rest[0] if rest else "?"] += 1
    worktrees = list((tmp / "data").glob("autoresearch/worktrees/bench*/worktree"))
    return calls, used, wall, (worktrees[0] if worktrees else tmp / "target")


def _is_value(words: list[str], i: int) -> bool:
    return i > 0 and words[i - 1] in ("-C", "-c")


def one_call(argv: list[str], cwd: Path, env: dict, calls: int) -> tuple[float, float]:
    """Median (CPU ms, wall ms) of running `argv`. The CPU of the whole process tree where a
    cpuacct cgroup can be made (bench_git_cycle.Meter): rusage never sees a jail's."""
    from bench_git_cycle import Meter

    cpu, wall = [], []
    meter = Meter(f"autoresearch-bench-call-{os.getpid()}")
    try:
        for _ in range(calls):
            start, before = time.perf_counter(), meter.seconds()
            subprocess.run(
                argv, cwd=cwd, env=env, capture_output=True, check=True, preexec_fn=meter.enter
            )
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((meter.seconds() - before) * 1000)
    finally:
        meter.close()
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from autoresearch.safety import git as ar_git

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        calls, cpu, wall, worktree = sweep(args.root.resolve(), tmp, args.cycles)
        total = sum(calls.values())
        print(f"sweep of {args.cycles} cycles with {args.root}:")
        print(f"  (a) git processes: {total}, {total / args.cycles:.1f} per cycle")
        for sub, n in calls.most_common(12):
            print(f"        {sub:14} {n / args.cycles:6.1f} per cycle")
        print(f"  (b) CPU {cpu:.1f} s, {cpu / args.cycles:.2f} s per cycle (wall {wall:.1f} s)")

        touching = sum(n for sub, n in calls.items() if sub in ar_git.TOUCHES_FILES)
        print(f"      of which touch the worktree's files: {touching / args.cycles:.1f} per cycle")
        admin = ar_git.worktree_admin(worktree)
        if admin is None:
            print(f"  (c) no session worktree found under {tmp}")
            return
        env = ar_git.environment(worktree, git_dir=admin)
        plain = ar_git.argv(worktree, "status", "--porcelain")
        jailed = ar_git.confined(plain, ("status",), env)
        if jailed == plain:
            print("  (c) no bwrap jail here: harness git runs unconfined")
            return
        a = one_call(plain, worktree, env, args.calls)
        b = one_call(jailed, worktree, env, args.calls)
        print(f"  (c) git status: plain {a[0]:.1f} ms CPU, {a[1]:.1f} ms wall;")
        print(f"      in the jail {b[0]:.1f} ms CPU, {b[1]:.1f} ms wall")
        extra_cpu = (b[0] - a[0]) / 1000 * touching / args.cycles
        extra_wall = (b[1] - a[1]) / 1000 * touching / args.cycles
        share = extra_cpu / (cpu / args.cycles) * 100
        print(
            f"  (d) the confined calls add {extra_cpu:.3f} s CPU per cycle ({share:.1f} % of (b)) "
            f"and {extra_wall:.2f} s wall"
        )


if __name__ == "__main__":
    main()

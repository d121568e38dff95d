"""Git processes and harness CPU per sweep cycle, paired against another checkout.

The profile of bench_sweep_overhead.py and bench_confined_git.py: the instant script agent
(one fix by Green and one change by Refactor a cycle) and `true` as the tests, so only the
workflow's own cost is left. Two kinds of runs of one session of `--cycles` cycles:

  (a) git processes per cycle, by subcommand: one run per checkout with a `git` and a
      `bwrap` on PATH that log each call (a call in a bwrap jail is logged by its bwrap,
      whose shell runs one git call or a few in a row: each counts; the target's own
      jailed `true` is not git and is left out; a call in the Landlock box, which may not
      write the log's folder, logs itself in the repository's common git directory), and
      the jails and boxes the harness's git ran in;
  (b) CPU per cycle of the whole process tree, jails included: each run's Snakemake goes
      into a cpuacct cgroup of its own (root, cgroup v1), whose counter also sees what runs
      in a bwrap jail (rusage never does: the jail's init is not our child). The counter is
      read as each cycle's decision.json appears, and a cycle's CPU is the difference
      between two decisions; the median of cycles 2..N is quoted. Without such a cgroup the
      figure is rusage's plus timings.tsv's jailed_cpu_s (the target's commands only), and
      the line says so. Runs go A B A B ... (`--pairs`), and each pair's ratio A/B is
      printed: a drift of the machine's load moves both sides of a pair alike.

    python bench/bench_git_cycle.py --vs CHECKOUT [--root CHECKOUT] [--cycles 10] [--pairs 3]
    python bench/bench_git_cycle.py --once [--root CHECKOUT] [--cycles 10]

CHECKOUT: a tree of autoresearch (its Snakefile and package), e.g. an older commit's
`git archive` unpacked in a temporary folder.
"""

from __future__ import annotations

import argparse
import csv
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
from bench_confined_git import _is_value, logging_git  # noqa: E402
from bench_sweep_overhead import ROOT, make_script, make_spec, make_target  # noqa: E402

CGROUPS = Path("/sys/fs/cgroup/cpuacct")


def prepare(tmp: Path, cycles: int) -> tuple[Path, Path]:
    make_target(tmp / "target")
    make_script(tmp / "script.yaml", cycles)
    make_spec(tmp / "spec.yaml", tmp / "target", tmp / "script.yaml", cycles)
    (tmp / "work").mkdir()
    return tmp / "spec.yaml", tmp / "work"


def command(root: Path, spec: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(root / "Snakefile"),
        "--cores",
        "1",
        "sessions/bench/done",
        "--configfile",
        str(spec),
        "--quiet",
        "all",
    ]


def environment(tmp: Path, path_first: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp / "data")}  # the worktree goes with the run
    env.pop("ANTHROPIC_API_KEY", None)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    return env


def count_git(root: Path, cycles: int) -> tuple[Counter, int, int, int]:
    """Every git process of one session, by subcommand; and the jails they ran in."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        spec, work = prepare(tmp, cycles)
        log = tmp / "git.log"
        counting_git(tmp / "bin", log)
        done = subprocess.run(
            command(root, spec),
            cwd=work,
            env=environment(tmp, tmp / "bin"),
            capture_output=True,
            text=True,
        )
        if done.returncode:
            sys.exit(f"the session with {root} failed: {done.stderr[-2000:]}")
        calls: Counter = Counter()
        jails = 0
        for line in log.read_text().splitlines():
            if not line.startswith("jailed "):
                calls[_subcommand(line)] += 1
                continue
            # A jail runs one git call, or several in a row (git.worktree_batch): each is
            # a process. A jail without git is a target command's (`true`).
            jails += " git -C " in line
            for part in line.split(" git -C ")[1:]:
                calls[_subcommand("-C " + part.split(" && ")[0])] += 1
        common = tmp / "target/.git"
        # Each worktree's own git directory (the box writes nothing else of the common one
        # since it grants no ref nor object); older checkouts: the top, or objects/.
        places = [*sorted(common.glob(f"worktrees/*/{CONFINED_LOG}")), common / CONFINED_LOG]
        places.append(common / "objects" / CONFINED_LOG)
        boxed = [line for p in places if p.is_file() for line in p.read_text().splitlines()]
        boxes = set()
        for line in boxed:
            # "box=<the launcher's pid> <git's arguments>": a batch's calls share a box.
            box, _, line = line.partition(" ")
            boxes.add(box)
            calls[_subcommand(line)] += 1
        return calls, jails, len(boxed), len(boxes)


# Where a git in the Landlock box logs itself: its worktree's own git directory ($GIT_DIR,
# which every box may write; a worktree removed before the session ends takes its lines
# with it, on both sides alike), else the common directory's top, else its objects/ folder
# (git reads only the two-digit folders and pack/ and info/ there).
CONFINED_LOG = "bench-boxed-git.log"


def counting_git(folder: Path, log: Path) -> None:
    """`logging_git`, whose git in the Landlock box, which may not write `log`, logs itself
    in its worktree's git directory (the harness binds every confined call to its worktree
    with GIT_DIR), or in the common one ($GIT_DIR/../..). One in a bwrap jail (which shows
    /proc; the box does not) logs nothing: its jail's line names it."""
    logging_git(folder, log)
    real = shutil.which("git", path=os.environ["PATH"])
    # (Opened, not tested with `-r`: Landlock answers access() by the file's mode only.)
    shown = "cat /proc/self/stat >/dev/null 2>&1"
    common = '"$GIT_DIR/../.."'
    said = '"box=$PPID $*"'  # the shell is the launcher's child, then execs git
    boxed = f'{shown} || echo {said} 2>/dev/null >> "$GIT_DIR/{CONFINED_LOG}"'
    boxed += f" || echo {said} 2>/dev/null >> {common}/{CONFINED_LOG}"
    boxed += f" || echo {said} >> {common}/objects/{CONFINED_LOG}"
    line = f'echo "$*" >> {log} 2>/dev/null || {{ {boxed}; }}'
    (folder / "git").write_text(f'#!/bin/sh\n{line}\nexec {real} "$@"\n')


def _subcommand(line: str) -> str:
    """The first word after the -C path and the -c settings."""
    words = line.split()
    rest = [w for i, w in enumerate(words) if not w.startswith("-") and not _is_value(words, i)]
    return rest[0] if rest else "?"


class Meter:
    """CPU of a process tree: a cpuacct cgroup of its own when we may make one, else
    rusage of our reaped children (which misses what ran in a jail)."""

    def __init__(self, name: str) -> None:
        self.group: Path | None = CGROUPS / name
        try:
            self.group.mkdir()
            (self.group / "cpuacct.usage").read_text()
        except OSError:
            self.group = None
        self.start = self._rusage()

    @property
    def whole_tree(self) -> bool:
        return self.group is not None

    def enter(self) -> None:  # in the child, before it runs Snakemake
        if self.group is not None:
            (self.group / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        return self._rusage() - self.start

    def close(self) -> None:
        if self.group is not None:
            for _ in range(50):  # the jails' last processes leave the group after their exit
                try:
                    self.group.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)

    @staticmethod
    def _rusage() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime


def cpu_run(root: Path, cycles: int, name: str) -> dict[str, float]:
    """One session; its CPU per cycle (the median of cycles 2..N), its whole CPU, and the
    stages' own figures from timings.tsv per cycle (median)."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        spec, work = prepare(tmp, cycles)
        meter = Meter(name)
        at: dict[int, float] = {}
        decisions = work / "sessions/bench/cycles"
        try:
            proc = subprocess.Popen(
                command(root, spec),
                cwd=work,
                env=environment(tmp),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=meter.enter,
            )
            while proc.poll() is None:
                for n in range(len(at) + 1, cycles + 1):
                    if not (decisions / f"{n:03d}/decision.json").exists():
                        break
                    at[n] = meter.seconds()
                time.sleep(0.05)
            whole = meter.seconds()
        finally:
            meter.close()
        if proc.returncode:
            sys.exit(f"the session with {root} failed (exit {proc.returncode})")
        steps = [at[n] - at[n - 1] for n in range(3, cycles + 1) if n in at and n - 1 in at]
        stages = _stages(work / "sessions/bench/timings.tsv")
        return {
            "cycle": statistics.median(steps) if steps else float("nan"),
            "whole": whole,
            "whole_tree": float(meter.whole_tree),
            **stages,
        }


def _stages(timings: Path) -> dict[str, float]:
    """Per cycle (median over cycles 2..N): the stages' own CPU, their commands' CPU, and
    the part of that run in a jail (a column turn 3's timings.tsv does not have: 0)."""
    own: Counter = Counter()
    cmds: Counter = Counter()
    jailed: Counter = Counter()
    with timings.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["cycle"] in ("000", "001"):
                continue
            own[row["cycle"]] += float(row["cpu_s"])
            cmds[row["cycle"]] += float(row["commands_cpu_s"])
            jailed[row["cycle"]] += float(row.get("jailed_cpu_s") or 0)
    cycles = sorted(own)
    if not cycles:
        return {"own": float("nan"), "commands": float("nan"), "jailed": float("nan")}
    return {
        "own": statistics.median(own[c] for c in cycles),
        "commands": statistics.median(cmds[c] for c in cycles),
        "jailed": statistics.median(jailed[c] for c in cycles),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout A (default: this one)")
    parser.add_argument("--vs", type=Path, help="checkout B (needed without --once)")
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument(
        "--once",
        action="store_true",
        help="run one session of --root and print its CPU a cycle (for a tool that times "
        "whole commands, paired: `--once --root A` against `--once --root B`)",
    )
    args = parser.parse_args()
    if args.once:
        run = cpu_run(args.root.resolve(), args.cycles, f"autoresearch-bench-{os.getpid()}")
        print(f"{run['cycle']:.3f} s CPU a cycle, {run['whole']:.1f} s the session")
        return
    if args.vs is None:
        parser.error("--vs CHECKOUT is needed (or --once)")
    sides = {"A": args.root.resolve(), "B": args.vs.resolve()}
    if shutil.which("bwrap") is None:
        print("note: no bwrap here: harness git runs unconfined on both sides")
    print(f"A = {sides['A']}\nB = {sides['B']}\n{args.cycles} cycles a session")

    print("(a) git processes per cycle (every process of the session / cycles):")
    counts = {side: count_git(root, args.cycles) for side, root in sides.items()}
    for side, (calls, jails, boxed, boxes) in counts.items():
        total = sum(calls.values())
        top = ", ".join(f"{sub} {n / args.cycles:.1f}" for sub, n in calls.most_common(8))
        print(f"    {side}: {total / args.cycles:.1f}  ({top})")
        print(
            f"       in {jails / args.cycles:.1f} bwrap jails and "
            f"{boxes / args.cycles:.1f} Landlock boxes ({boxed / args.cycles:.1f} calls) a cycle"
        )

    print("(b) CPU per cycle, paired runs A B A B ...:")
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for pair in range(args.pairs):
        for side in ("A", "B"):
            name = f"autoresearch-bench-{os.getpid()}-{pair}{side}"
            runs[side].append(cpu_run(sides[side], args.cycles, name))
        a, b = runs["A"][-1], runs["B"][-1]
        print(
            f"    pair {pair + 1}: A {a['cycle']:.3f} s, B {b['cycle']:.3f} s, "
            f"ratio {a['cycle'] / b['cycle']:.2f}; whole sessions A {a['whole']:.1f} s, "
            f"B {b['whole']:.1f} s"
        )
    how = "whole process tree, jails included (cpuacct cgroup)"
    if not all(r["whole_tree"] for side in runs.values() for r in side):
        how = "rusage: what ran in a jail is NOT counted (no cpuacct cgroup here)"
    ratios = [a["cycle"] / b["cycle"] for a, b in zip(runs["A"], runs["B"], strict=True)]
    for side in ("A", "B"):
        med = {k: statistics.median(r[k] for r in runs[side]) for k in runs[side][0]}
        print(
            f"    {side}: {med['cycle']:.3f} s a cycle ({how}); timings.tsv a cycle: stages' "
            f"own {med['own']:.3f} s, their commands {med['commands']:.3f} s "
            f"(of which jailed {med['jailed']:.3f} s)"
        )
    print(f"    A/B a cycle: median ratio {statistics.median(ratios):.2f} over {len(ratios)} pairs")


if __name__ == "__main__":
    main()

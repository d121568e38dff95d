"""Orchestration overhead of the sweep loop: what the harness itself costs per cycle.

An instant agent (the script backend, its script parsed once: Refactor writes one line
per cycle, so the loop never stops early) and an instant test command (`true`) leave only
the workflow's own cost. CPU, not wall time, is the measure. Prints
  (a) the stages' own CPU per cycle (timings.tsv) at cycles 2-11 and at the last 10 of one
      long session, and their ratio, with the CPU of the commands they ran (git, tests).
      These two windows run minutes apart, so a change in the machine's load moves them;
  (a') the same growth measured paired: once the long session has run `--cycles` cycles, a
      new session starts beside it, and its first cycles are set against the long one's
      next ones, run at the same time on the same machine;
  (b) the whole Snakemake process's CPU per cycle (scheduler, DAG, our code, children);
  (c) a no-op rerun of the finished session: `snakemake -n` and the plain command;
  (d) the process's peak memory;
  (e) each stage's median CPU in those windows, so a growth can be pinned on a stage.

    python bench/bench_sweep_overhead.py [--cycles 200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PAIRED = 20  # cycles compared side by side


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command(spec: Path, name: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--cores",
        "1",
        f"sessions/{name}/done",
        "--configfile",
        str(spec),
        "--quiet",
        "all",
        *extra,
    ]


def snakemake(workdir: Path, spec: Path, *extra: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of Snakemake and everything it ran)."""
    start, cpu = time.perf_counter(), children_cpu()
    subprocess.run(command(spec, "bench", *extra), cwd=workdir, check=True, capture_output=True)
    return time.perf_counter() - start, children_cpu() - cpu


def per_cycle(timings: Path) -> dict[int, tuple[float, float]]:
    """cycle -> (the stages' own CPU, the CPU of the commands they ran)."""
    out: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    with timings.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["cycle"] != "000":
                out[int(row["cycle"])][0] += float(row["cpu_s"])
                out[int(row["cycle"])][1] += float(row["commands_cpu_s"])
    return {k: (v[0], v[1]) for k, v in out.items()}


def make_target(repo: Path) -> None:
    repo.mkdir(parents=True)
    (repo / "a.txt").write_text("start\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")


def make_script(path: Path, cycles: int) -> None:
    script = {
        "refactor": {
            n: [
                {"tool": "write_file", "args": {"path": "a.txt", "content": f"cycle {n}\n"}},
                {"tool": "finish_refactor", "args": {"summary": f"cycle {n}"}},
            ]
            for n in range(1, cycles + 1)
        }
    }
    # Refactor needs a changed file from Green: a one-line fix every cycle, of a new
    # finding each cycle (Red may not report a fixed one again).
    script["red"] = {
        n: [
            {
                "tool": "report_finding",
                "args": {
                    "severity": "low",
                    "title": f"t{n}",
                    "location": "a.txt:1",
                    "issue": "i",
                    "impact": "m",
                },
            }
        ]
        for n in range(1, cycles + 1)
    }
    script["green"] = {
        n: [
            {"tool": "write_file", "args": {"path": "a.txt", "content": f"green {n}\n"}},
            {"tool": "finish_fix", "args": {"finding_id": f"F-{n:03d}", "summary": "g"}},
        ]
        for n in range(1, cycles + 1)
    }
    path.write_text(yaml.safe_dump(script))


def make_spec(path: Path, repo: Path, script: Path, cycles: int) -> None:
    spec = {
        "mode": "sweep",
        "target": str(repo),
        "test_command": "true",
        "max_cycles": cycles,
        # Low findings only: stop 7 ("goal satisfied") would end the loop at once.
        "stop_below": None,
        "agent": {"backend": "script", "script": str(script)},
    }
    path.write_text(yaml.safe_dump(spec))


def median_own(costs: dict[int, tuple[float, float]], cycles: range) -> float:
    return statistics.median(costs[n][0] for n in cycles)


def per_stage(timings: Path) -> dict[str, dict[int, float]]:
    """stage -> cycle -> the stage's own CPU."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    with timings.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["cycle"] != "000":
                out[row["stage"]][int(row["cycle"])] = float(row["cpu_s"])
    return out


def stage_table(windows: dict[str, tuple[dict[str, dict[int, float]], range]]) -> list[str]:
    """Each stage's median own CPU (ms) in each window, and the sum of those medians: a
    cycle's typical cost, steadier than the median of whole cycles when one stage is noisy."""
    first = next(iter(windows.values()))[0]
    names = list(windows)
    lines = ["stage       " + "".join(f"{n:>16}" for n in names)]
    sums = dict.fromkeys(names, 0.0)
    for stage in first:
        cells = []
        for name, (costs, cycles) in windows.items():
            values = [costs.get(stage, {}).get(n) for n in cycles]
            values = [v for v in values if v is not None]
            med = statistics.median(values) if values else 0.0
            sums[name] += med
            cells.append(f"{med * 1000:16.1f}")
        lines.append(f"{stage:12}" + "".join(cells))
    lines.append("sum         " + "".join(f"{sums[n] * 1000:16.1f}" for n in names))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="work in this (new) folder and keep it")
    args = parser.parse_args()
    cycles = args.cycles
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        make_target(tmp / "target")
        make_target(tmp / "target-fresh")
        # The long session runs PAIRED cycles past `cycles`: those are paired with the
        # fresh session's first ones.
        make_script(tmp / "script.yaml", cycles + PAIRED)
        spec, fresh_spec = tmp / "spec.yaml", tmp / "fresh.yaml"
        make_spec(spec, tmp / "target", tmp / "script.yaml", cycles + PAIRED)
        make_spec(fresh_spec, tmp / "target-fresh", tmp / "script.yaml", PAIRED + 1)
        work = tmp / "work"
        work.mkdir()
        session = work / "sessions/bench"
        start, cpu = time.perf_counter(), children_cpu()
        log = tmp / "long-session.log"
        with log.open("w") as stderr:  # a pipe nobody reads would fill and stall the run
            long_run = subprocess.Popen(
                command(spec, "bench"), cwd=work, stdout=subprocess.DEVNULL, stderr=stderr
            )
            # Start the fresh session once the long one has made its `cycles`-th decision.
            reached = session / f"cycles/{cycles:03d}/decision.json"
            while not reached.exists() and long_run.poll() is None:
                time.sleep(0.2)
            subprocess.run(command(fresh_spec, "fresh"), cwd=work, check=True, capture_output=True)
            if long_run.wait() != 0:
                sys.exit(f"the long session failed: {log.read_text()[-2000:]}")
        total, total_cpu = time.perf_counter() - start, children_cpu() - cpu
        costs = per_cycle(session / "timings.tsv")
        fresh = per_cycle(work / "sessions/fresh/timings.tsv")
        window = min(10, (cycles - 1) // 2) or 1
        early = [costs[n] for n in range(2, 2 + window)]
        late = [costs[n] for n in range(cycles - window + 1, cycles + 1)]
        own_early = statistics.median(c[0] for c in early)
        own_late = statistics.median(c[0] for c in late)
        cmd_early = statistics.median(c[1] for c in early)
        cmd_late = statistics.median(c[1] for c in late)
        paired_long = median_own(costs, range(cycles + 1, cycles + PAIRED + 1))
        paired_fresh = median_own(fresh, range(2, PAIRED + 2))
        dry = [snakemake(work, spec, "-n") for _ in range(3)]
        plain = [snakemake(work, spec) for _ in range(3)]
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        last = json.loads((session / f"cycles/{cycles + PAIRED:03d}/decision.json").read_text())
        print(f"cycles run: {cycles + PAIRED} (last decision: {last['reason']})")
        print(
            f"whole session (and the fresh one beside it): {total:.1f} s wall, "
            f"{total_cpu:.1f} s CPU"
        )
        print(
            f"(a) stages' own CPU per cycle: cycles 2-{window + 1} {own_early:.3f} s, "
            f"cycles {cycles - window + 1}-{cycles} {own_late:.3f} s, "
            f"ratio {own_late / own_early:.2f}"
        )
        print(
            f"(a) their commands' CPU per cycle (git, tests): {cmd_early:.3f} s early, "
            f"{cmd_late:.3f} s late"
        )
        print(
            f"(a') paired, at the same time: cycles {cycles + 1}-{cycles + PAIRED} "
            f"{paired_long:.3f} s, a new session's cycles 2-{PAIRED + 1} {paired_fresh:.3f} s, "
            f"ratio {paired_long / paired_fresh:.2f}"
        )
        print(f"(b) whole process CPU per cycle: {total_cpu / (cycles + 2 * PAIRED + 1):.3f} s")
        print(
            f"(c) no-op rerun at {cycles + PAIRED} cycles, snakemake -n: "
            f"{statistics.median(w for w, _ in dry):.2f} s wall, "
            f"{statistics.median(c for _, c in dry):.2f} s CPU"
        )
        print(
            f"(c) no-op rerun at {cycles + PAIRED} cycles, plain command: "
            f"{statistics.median(w for w, _ in plain):.2f} s wall, "
            f"{statistics.median(c for _, c in plain):.2f} s CPU"
        )
        print(f"(d) peak memory of a Snakemake process: {peak_mib:.0f} MiB")
        long_stages = per_stage(session / "timings.tsv")
        fresh_stages = per_stage(work / "sessions/fresh/timings.tsv")
        windows = {
            f"long {2}-{window + 1}": (long_stages, range(2, 2 + window)),
            f"long {cycles - window + 1}-{cycles}": (
                long_stages,
                range(cycles - window + 1, cycles + 1),
            ),
            f"long {cycles + 1}-{cycles + PAIRED}": (
                long_stages,
                range(cycles + 1, cycles + PAIRED + 1),
            ),
            f"new 2-{PAIRED + 1}": (fresh_stages, range(2, PAIRED + 2)),
        }
        print("(e) each stage's median own CPU, ms (the last two columns ran at the same time):")
        for line in stage_table(windows):
            print("    " + line)


if __name__ == "__main__":
    main()

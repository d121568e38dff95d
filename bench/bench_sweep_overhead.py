"""Orchestration overhead of the sweep loop: what the harness itself costs per cycle.

An instant agent (the script backend, its script parsed once: Refactor writes one line
per cycle, so the loop never stops early) and an instant test command (`true`) leave only
the workflow's own cost. CPU, not wall time, is the measure: it holds still on a loaded
machine. Prints
  (a) the stages' own CPU per cycle (timings.tsv) at cycles 2-11 and at the last 10, and
      their ratio (growth), with the CPU of the commands they ran (git, tests);
  (b) the whole Snakemake process's CPU per cycle (scheduler, DAG, our code, children);
  (c) a no-op rerun of the finished session: `snakemake -n` and the plain command;
  (d) the process's peak memory.

    python bench/bench_sweep_overhead.py [--cycles 200]
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


def snakemake(workdir: Path, spec: Path, *extra: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of Snakemake and everything it ran)."""
    start, cpu = time.perf_counter(), children_cpu()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--cores",
            "1",
            "sessions/bench/done",
            "--configfile",
            str(spec),
            "--quiet",
            "all",
            *extra,
        ],
        cwd=workdir,
        check=True,
        capture_output=True,
    )
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=200)
    cycles = parser.parse_args().cycles
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repo = tmp / "target"
        repo.mkdir()
        (repo / "a.txt").write_text("start\n")
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "init")
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
        (tmp / "script.yaml").write_text(yaml.safe_dump(script))
        spec = tmp / "spec.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "mode": "sweep",
                    "target": str(repo),
                    "test_command": "true",
                    "max_cycles": cycles,
                    # Low findings only: stop 7 ("goal satisfied") would end the loop at once.
                    "stop_below": None,
                    "agent": {"backend": "script", "script": str(tmp / "script.yaml")},
                }
            )
        )
        work = tmp / "work"
        work.mkdir()
        total, total_cpu = snakemake(work, spec)
        session = work / "sessions/bench"
        cycles_dir = session / "cycles"
        costs = per_cycle(session / "timings.tsv")
        window = min(10, (cycles - 1) // 2) or 1
        early = [costs[n] for n in range(2, 2 + window)]
        late = [costs[n] for n in range(cycles - window + 1, cycles + 1)]
        own_early = statistics.median(c[0] for c in early)
        own_late = statistics.median(c[0] for c in late)
        cmd_early = statistics.median(c[1] for c in early)
        cmd_late = statistics.median(c[1] for c in late)
        dry = [snakemake(work, spec, "-n") for _ in range(3)]
        plain = [snakemake(work, spec) for _ in range(3)]
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        last = json.loads((cycles_dir / f"{cycles:03d}/decision.json").read_text())
        print(f"cycles run: {cycles} (last decision: {last['reason']})")
        print(f"whole session: {total:.1f} s wall, {total_cpu:.1f} s CPU")
        print(
            f"(a) stages' own CPU per cycle: cycles 2-{window + 1} {own_early:.3f} s, "
            f"last {window} {own_late:.3f} s, ratio {own_late / own_early:.2f}"
        )
        print(
            f"(a) their commands' CPU per cycle (git, tests): {cmd_early:.3f} s early, "
            f"{cmd_late:.3f} s late"
        )
        print(f"(b) whole process CPU per cycle: {total_cpu / cycles:.3f} s")
        print(
            f"(c) no-op rerun at {cycles} cycles, snakemake -n: "
            f"{statistics.median(w for w, _ in dry):.2f} s wall, "
            f"{statistics.median(c for _, c in dry):.2f} s CPU"
        )
        print(
            f"(c) no-op rerun at {cycles} cycles, plain command: "
            f"{statistics.median(w for w, _ in plain):.2f} s wall, "
            f"{statistics.median(c for _, c in plain):.2f} s CPU"
        )
        print(f"(d) peak memory of a Snakemake process: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()

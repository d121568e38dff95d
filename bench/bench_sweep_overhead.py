"""Orchestration overhead of the sweep loop (issue 2's benchmark).

An instant agent (the script backend: Refactor writes one line per cycle, so the loop
never stops early) and an instant test command (`true`) leave only the workflow's own
cost. Prints (a) seconds per cycle near cycle 1 and near the last cycle, and (b) the
time of a no-op rerun of the finished session: `snakemake -n` and the plain command.

    python bench/bench_sweep_overhead.py [--cycles 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
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


def snakemake(workdir: Path, spec: Path, *extra: str) -> float:
    start = time.perf_counter()
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
    return time.perf_counter() - start


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
        # Refactor needs a changed file from Green: a one-line fix every cycle.
        script["red"] = {
            "*": [
                {
                    "tool": "report_finding",
                    "args": {
                        "severity": "low",
                        "title": "t",
                        "location": "a.txt:1",
                        "issue": "i",
                        "impact": "m",
                    },
                }
            ]
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
                    "agent": {"backend": "script", "script": str(tmp / "script.yaml")},
                }
            )
        )
        work = tmp / "work"
        work.mkdir()
        total = snakemake(work, spec)
        cycles_dir = work / "sessions/bench/cycles"
        done_at = [
            (cycles_dir / f"{n:03d}/decision.json").stat().st_mtime for n in range(1, cycles + 1)
        ]
        per_cycle = [b - a for a, b in zip(done_at, done_at[1:], strict=False)]
        window = min(10, len(per_cycle) // 2) or 1
        early = statistics.median(per_cycle[:window])
        late = statistics.median(per_cycle[-window:])
        dry = statistics.median(snakemake(work, spec, "-n") for _ in range(3))
        plain = statistics.median(snakemake(work, spec) for _ in range(3))
        last = json.loads((cycles_dir / f"{cycles:03d}/decision.json").read_text())
        print(f"cycles run: {cycles} (last decision: {last['reason']})")
        print(f"whole session: {total:.1f} s")
        print(f"(a) seconds per cycle, median of cycles 2-{window + 1}: {early:.2f}")
        print(f"(a) seconds per cycle, median of the last {window} cycles: {late:.2f}")
        print(f"(a) late/early ratio: {late / early:.2f}")
        print(f"(b) no-op rerun at {cycles} cycles, snakemake -n: {dry:.2f} s")
        print(f"(b) no-op rerun at {cycles} cycles, plain command: {plain:.2f} s")


if __name__ == "__main__":
    main()

"""Parallel broad tracks (issue 5's benchmark): wall time with --cores 3 against --cores 1.

Three hypotheses (given in the spec, so no strategist), two cycles per track, and an agent
that takes a fixed time per stage: the script backend's `{sleep: SECONDS}` step for Red,
Green and Refactor, with one real test-gated fix per cycle so the track goes on. The same
session runs once with --cores 1 and once with --cores 3, each on a fresh copy of the
target. Prints both wall times and their ratio (target: <= 0.45).

    python bench/bench_broad_parallel.py [--sleep 2.0] [--cycles 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TRACKS = ("h1", "h2", "h3")
HYPOTHESES = [
    {"id": "h1", "category": "obvious", "name": "guard", "statement": "Guard the inputs."},
    {"id": "h2", "category": "bold", "name": "drop", "statement": "Drop the helpers."},
    {"id": "h3", "category": "creative", "name": "mark", "statement": "Mark the intent."},
]


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def make_target(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (path / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def script(sleep: float, cycles: int) -> dict:
    """Per track and cycle: Red reports one finding, Green fixes it (a comment line, so
    the tests pass and the track never stops early), Refactor only thinks."""
    pause = {"sleep": sleep}
    red, green, refactor = {}, {}, {}
    for hid in TRACKS:
        for n in range(1, cycles + 1):
            key = f"{hid}/{n}"
            red[key] = [
                pause,
                {
                    "tool": "report_finding",
                    "args": {
                        "severity": "high",
                        "title": f"note {n}",
                        "location": "calc.py:1",
                        "issue": "add is undocumented.",
                        "impact": "Readers guess.",
                    },
                },
            ]
            green[key] = [
                pause,
                {
                    "tool": "edit_file",
                    "args": {
                        "path": "calc.py",
                        "old_str": "def add(a, b):",
                        "new_str": f"def add(a, b):  # {hid} {n}",
                    }
                    if n == 1
                    else {
                        "path": "calc.py",
                        "old_str": f"# {hid} {n - 1}",
                        "new_str": f"# {hid} {n}",
                    },
                },
                {"tool": "finish_fix", "args": {"finding_id": f"F-{n:03d}", "summary": "note"}},
            ]
            refactor[key] = [pause]
    return {"red": red, "green": green, "refactor": refactor}


def run(cores: int, sleep: float, cycles: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-broad-") as tmp:
        base = Path(tmp)
        target = make_target(base / "target")
        work = base / "work"
        work.mkdir()
        (work / "script.json").write_text(json.dumps(script(sleep, cycles)))
        spec = {
            "mode": "broad",
            "target": str(target),
            "test_command": "python -m pytest -q",
            "hypotheses": HYPOTHESES,
            "max_cycles": cycles,
            "agent": {"backend": "script", "script": str(work / "script.json")},
        }
        # YAML, not JSON: Snakemake reads a JSON configfile into OrderedDicts, which the
        # spec freezer's yaml.safe_dump cannot write (see the issue 5 report).
        (work / "spec.yaml").write_text(yaml.safe_dump(spec))
        start = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "snakemake",
                "--snakefile",
                str(ROOT / "Snakefile"),
                "--cores",
                str(cores),
                "sessions/bench/done",
                "--configfile",
                str(work / "spec.yaml"),
                "--quiet",
                "all",
            ],
            cwd=work,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            sys.exit(f"snakemake --cores {cores} failed:\n{proc.stderr[-4000:]}")
        elapsed = time.perf_counter() - start
        done = (work / "sessions" / "bench" / "done").read_text()
        assert "winner:" in done, done
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds per agent stage")
    parser.add_argument("--cycles", type=int, default=2, help="cycles per track")
    args = parser.parse_args()
    stages = len(TRACKS) * args.cycles * 3
    print(
        f"3 tracks x {args.cycles} cycles, agent stages sleep {args.sleep:.1f} s "
        f"({stages * args.sleep:.0f} s of agent time in all)"
    )
    serial = run(1, args.sleep, args.cycles)
    print(f"--cores 1: {serial:6.1f} s wall")
    parallel = run(3, args.sleep, args.cycles)
    print(f"--cores 3: {parallel:6.1f} s wall")
    ratio = parallel / serial
    verdict = "met" if ratio <= 0.45 else "NOT met"
    print(f"ratio --cores 3 / --cores 1: {ratio:.2f} (target <= 0.45: {verdict})")


if __name__ == "__main__":
    main()

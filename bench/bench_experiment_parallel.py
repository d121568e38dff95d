"""Experiment batches (issue 14's benchmark): wall time of an experiment session with
`experiment.parallel: 3`, --cores 3 against --cores 1.

Six iterations of three candidates each; the metric command sleeps a fixed time (2 s by
default) before printing, so each measurement job takes that long, and the scripted
agent hands in a distinct one-line change per candidate at once. The same session runs
with --cores 1 and with --cores 3, each on a fresh copy of the target; its setup (the
same for both) runs first, untimed, and the six iterations to `done` are timed. Prints
both wall times and their ratio (target: <= 0.5, issue 38; issue 14 asked 0.45).

    python bench/bench_experiment_parallel.py [--sleep 2.0] [--iterations 6] [--k 3] [--pairs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["cache", "unroll", "inline", "hoist", "vectorize", "memoize", "prune", "batch"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def make_target(path: Path, sleep: float) -> Path:
    path.mkdir(parents=True)
    (path / "fast.py").write_text("def steps():\n    return 100000\n")
    (path / "measure.py").write_text(
        f"import json, time\nimport fast\n\ntime.sleep({sleep})\n"
        "print(json.dumps({'ops': fast.steps()}))\n"
    )
    (path / "test_fast.py").write_text("def test_nothing():\n    pass\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def script(iterations: int, k: int) -> dict:
    """Candidate c of iteration i sets steps() to a value that differs from every other
    candidate's, with a hypothesis no duplicate check mistakes for another."""
    steps = {}
    for i in range(1, iterations + 1):
        for c in range(1, k + 1):
            value = 100000 - 1000 * i - 10 * c
            hypothesis = f"{WORDS[(i + c) % len(WORDS)]} pass {i * 10 + c} of the counter"
            steps[f"c{c}/{i}"] = [
                {
                    "tool": "write_file",
                    "args": {"path": "fast.py", "content": f"def steps():\n    return {value}\n"},
                },
                {
                    "tool": "finish_experiment",
                    "args": {"hypothesis": hypothesis, "change_summary": f"returns {value}"},
                },
            ]
    return {"experiment": steps}


def phases(session: Path, iterations: int, start: float) -> list[tuple[float, float, float]]:
    """Per iteration, from the files' times: (candidates, measurements, decide) seconds,
    each from the end of the phase before (the last of the k jobs) to the end of its own;
    what the scheduler does between jobs falls in the phase after it."""
    out, before = [], start
    for i in range(1, iterations + 1):
        folder = session / "iterations" / f"{i:03d}"
        proposed = max(p.stat().st_mtime for p in folder.glob("c*/proposal.json"))
        measured = max(p.stat().st_mtime for p in folder.glob("c*/measurement.json"))
        decided = (folder / "decision.json").stat().st_mtime
        out.append((proposed - before, measured - proposed, decided - measured))
        before = decided
    return out


def run(cores: int, sleep: float, iterations: int, k: int, keep: Path | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-exp-") as tmp:
        # --keep: the session's files stay for a profile, under KEEP/cores-N.
        base = keep / f"cores-{cores}" if keep else Path(tmp)
        target = make_target(base / "target", sleep)
        work = base / "work"
        work.mkdir()
        (work / "script.yaml").write_text(yaml.safe_dump(script(iterations, k)))
        spec = {
            "mode": "experiment",
            "target": str(target),
            "test_command": "python -m pytest -q",
            "experiment": {
                "goal": "fewer steps",
                "scope": ["fast.py"],
                "metric": {"command": "python measure.py", "key": "ops", "direction": "minimize"},
                "parallel": k,
                "max_iterations": iterations,
            },
            "agent": {"backend": "script", "script": str(work / "script.yaml")},
        }
        (work / "spec.yaml").write_text(yaml.safe_dump(spec))
        command = [
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
        ]
        # The setup (worktree, baseline tests, baseline measurement) is the same for any
        # number of cores: it runs first, and only the iterations are timed.
        setup = subprocess.run(
            [*command, "--until", "session"], cwd=work, capture_output=True, text=True
        )
        if setup.returncode != 0:
            sys.exit(f"setup failed:\n{setup.stderr[-4000:]}")
        start, started = time.perf_counter(), time.time()
        proc = subprocess.run(command, cwd=work, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"snakemake --cores {cores} failed:\n{proc.stderr[-4000:]}")
        elapsed = time.perf_counter() - start
        done = (work / "sessions" / "bench" / "done").read_text()
        assert f"iterations: {iterations}" in done, done
        spans = phases(work / "sessions" / "bench", iterations, started)
        sums = [sum(s[j] for s in spans) for j in range(3)]
        rest = elapsed - sum(sums)
        print(
            f"  --cores {cores}: candidates {sums[0]:.1f} s, measurements {sums[1]:.1f} s, "
            f"decide {sums[2]:.1f} s, after the last decide (report, done) {rest:.1f} s"
        )
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sleep", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--k", type=int, default=3, help="candidates per iteration")
    parser.add_argument("--keep", type=Path, help="keep both sessions' files under this folder")
    parser.add_argument("--pairs", type=int, default=1, help="pairs of runs (median ratio)")
    args = parser.parse_args()
    measuring = args.iterations * args.k * args.sleep
    print(
        f"{args.iterations} iterations x {args.k} candidates, measurements sleep "
        f"{args.sleep:.1f} s ({measuring:.0f} s of measuring in all); the session's setup "
        "runs first and is not timed"
    )
    # On a shared machine the load drifts between the two runs: --pairs N runs N pairs, the
    # --cores order swapped every other pair, and the median ratio is the figure to quote.
    ratios = []
    for pair in range(args.pairs):
        times = {}
        for cores in (1, args.k) if pair % 2 == 0 else (args.k, 1):
            times[cores] = run(cores, args.sleep, args.iterations, args.k, args.keep)
            print(f"--cores {cores}: {times[cores]:6.1f} s wall")
        ratios.append(times[args.k] / times[1])
        print(f"ratio --cores {args.k} / --cores 1: {ratios[-1]:.2f}")
    ratio = statistics.median(ratios)
    verdict = "met" if ratio <= 0.5 else "NOT met"
    spread = f" (pairs: {', '.join(f'{r:.2f}' for r in ratios)})" if len(ratios) > 1 else ""
    print(f"median ratio: {ratio:.2f}{spread} (target <= 0.5: {verdict})")


if __name__ == "__main__":
    main()

"""Lens orchestration (issue 12's benchmark).

(a) Overhead per lens iteration: a security session with an instant scripted auditor that
reports nothing and an instant test command, run to 4 and to 19 iterations; the difference
divided by 15 is what one more iteration (lens_red + lens_check) costs the workflow.
(b) predict with 5 personas whose every agent stage sleeps 2 s, one debate round, on
--cores 5 and on --cores 1: the wall-time ratio.

    python bench/bench_lens.py [--sleep 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PERSONAS = ["architecture", "security", "performance", "reliability", "devils-advocate"]


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
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def run(workdir: Path, name: str, spec: dict, cores: int = 1) -> float:
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
         "--cores", str(cores), f"sessions/{name}/done", "--configfile", str(path),
         "--quiet", "all"],
        cwd=workdir, check=True, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - start


def iteration_overhead(base: Path) -> None:
    target = make_target(base / "target")
    script = base / "instant.yaml"
    script.write_text(yaml.safe_dump({"auditor": {"*": []}}))
    times = {}
    for n in (4, 19):
        spec = {
            "mode": "security",
            "target": str(target),
            "test_command": "true",
            "linter_command": "true",
            "max_cycles": n,
            "security": {"critical_assets": ["app"]},
            "agent": {"backend": "script", "script": str(script)},
        }
        times[n] = run(base, f"it{n}", spec)
    per = (times[19] - times[4]) / 15
    print(f"security, 4 iterations: {times[4]:.2f} s wall; 19 iterations: {times[19]:.2f} s")
    print(f"overhead per lens iteration (lens_red + lens_check): {per:.3f} s (target <= 1 s)")


def predict_parallel(base: Path, sleep: float) -> None:
    """Each setting runs twice, with sleeping and with instant agents: the difference is the
    agent phase alone (the session's setup and report cost the same on any --cores)."""
    target = make_target(base / "ptarget")
    walls = {}
    for pause in (sleep, 0.0):
        steps = {f"{p}/{r}": [{"sleep": pause}] for p in PERSONAS for r in (0, 1)}
        script = base / f"slow{pause}.yaml"
        script.write_text(yaml.safe_dump({"persona": steps, "debate": steps}))
        for cores in (5, 1):
            spec = {
                "mode": "predict",
                "target": str(target),
                "test_command": "true",
                "predict": {"personas": PERSONAS, "rounds": 1},
                "agent": {"backend": "script", "script": str(script)},
            }
            walls[cores, pause] = run(base, f"p{cores}-{int(pause * 1000)}", spec, cores)
    stages = 2 * len(PERSONAS)
    five, one = walls[5, sleep], walls[1, sleep]
    print(f"predict, 5 personas x 2 stages of {sleep:g} s ({stages * sleep:g} s of agent time):")
    print(f"  --cores 5: {five:.2f} s wall; --cores 1: {one:.2f} s wall; ratio {five / one:.2f}")
    print(
        f"  with instant agents: --cores 5 {walls[5, 0.0]:.2f} s, --cores 1 {walls[1, 0.0]:.2f} s"
    )
    phase5, phase1 = five - walls[5, 0.0], one - walls[1, 0.0]
    print(f"  agent phase alone: {phase5:.2f} s vs {phase1:.2f} s; ratio {phase5 / phase1:.2f}")
    print("  (target: ratio <= 0.3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sleep", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        iteration_overhead(Path(tmp))
        predict_parallel(Path(tmp), args.sleep)


if __name__ == "__main__":
    main()

"""How experiment mode's noise rules behave on a synthetic metric, and what a loop costs.

(a) No true effect, 200 iterations of the real keep loop (a kept change's samples become the
    incumbent; the incumbent is re-measured every K): the share of changes kept.
(b) A true 3% gain: the share of single comparisons that keep it (the detection rate).
(c) Orchestration overhead per iteration through Snakemake, with an instant scripted agent
    and an instant metric.
(d) The sequential keep test (experiment.sequential) under three noise models (independent
    5% noise, a drifting machine, load spikes): false keeps and candidate runs on no effect,
    detection and candidate runs under a true 3% gain, each with its standard error; the
    fresh pairs alone (pool: false) beside the random-effects pool; and the computed bounds
    no design can beat.

Noise: each sample is the true value times (1 + e), e ~ Normal(0, 0.05). Lower is better.
(a) and (b) call the pure decision function, policy.judge, directly; (d) calls
paired.compare, the decide stage's own comparison (guard, then pairs alternating which
side runs first, the incumbent's earlier runs pooled), with runs drawn from the noise model.

    .venv/bin/python bench/bench_experiment_noise.py [--trials 2000] [--skip-snakemake]
        [--skip-fixed] [--skip-sequential]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.measure.metrics import median  # noqa: E402
from autoresearch.modes.experiment import paired  # noqa: E402
from autoresearch.modes.experiment.policy import Sample, judge  # noqa: E402
from autoresearch.modes.experiment.program import ExperimentConfig  # noqa: E402
from autoresearch.modes.experiment.sequential import Design, Step  # noqa: E402

NOISE = 0.05
GAIN = 0.03


def draw(rng: random.Random, true: float, n: int) -> Sample:
    xs = [true * (1 + rng.gauss(0, NOISE)) for _ in range(n)]
    return Sample(median(xs), xs)


def config(repeats: int, alpha: float | None, min_effect: float | str = 0.0, k=None):
    return ExperimentConfig(
        goal="bench",
        scope=["x"],
        command="x",
        direction="minimize",
        max_iterations=200,
        repeats=repeats,
        rank_test_alpha=alpha,
        min_effect=min_effect,
        remeasure_every=k,
    )


def null_loop(cfg: ExperimentConfig, rng: random.Random, iterations: int = 200) -> float:
    """Share kept over one 200-iteration loop in which no change has any real effect."""
    incumbent = draw(rng, 100.0, cfg.repeats)
    kept = 0
    for i in range(1, iterations + 1):
        if cfg.remeasure_every and i % cfg.remeasure_every == 0:
            incumbent = draw(rng, 100.0, cfg.repeats)
        candidate = draw(rng, 100.0, cfg.repeats)
        if judge(candidate, incumbent, cfg).kept:
            kept += 1
            incumbent = candidate
    return kept / iterations


def detection(cfg: ExperimentConfig, rng: random.Random, trials: int, gain: float) -> float:
    """Share of single comparisons (fresh incumbent each time) that keep the candidate."""
    hits = 0
    for _ in range(trials):
        incumbent = draw(rng, 100.0, cfg.repeats)
        candidate = draw(rng, 100.0 * (1 - gain), cfg.repeats)
        hits += judge(candidate, incumbent, cfg).kept
    return hits / trials


def decision_figures(trials: int) -> None:
    rng = random.Random(20260319)
    rows = [
        ("repeats=1, strict median", config(1, None)),
        ("repeats=5, strict median", config(5, None)),
        ("repeats=5, min_effect 2%", config(5, None, "2%")),
        ("repeats=5, rank test a=0.05", config(5, 0.05)),
        ("repeats=5, rank test a=0.05, K=10", config(5, 0.05, k=10)),
        ("repeats=10, rank test a=0.05", config(10, 0.05)),
        ("repeats=20, rank test a=0.05", config(20, 0.05)),
        ("repeats=30, rank test a=0.05", config(30, 0.05)),
    ]
    loops = max(10, trials // 200)
    print(f"noise: Normal sd {NOISE:.0%} of the value; true gain in (b): {GAIN:.0%}")
    print(f"(a) {loops} loops x 200 iterations; (b) {trials} comparisons\n")
    print(f"{'rule':<36} {'(a) loop kept':>14} {'(a) per test':>13} {'(b) 3% gain kept':>17}")
    for label, cfg in rows:
        a = sum(null_loop(cfg, rng) for _ in range(loops)) / loops
        a1 = detection(cfg, rng, trials, 0.0)
        b = detection(cfg, rng, trials, GAIN)
        print(f"{label:<36} {a:>14.1%} {a1:>13.1%} {b:>17.1%}")
    print(
        "\n(a) loop kept: share of the 200 no-effect iterations kept in the real loop (a lucky"
        "\n    keep becomes the incumbent and is then hard to beat, which hides false keeps);"
        "\n(a) per test: the same comparison against a fresh incumbent (the false-keep rate)."
        "\ntargets: (a) <= 5% with repeats=5; (b) >= 80%"
    )


class Machine:
    """A noise model: what one run of a side whose true value is `true` measures.

    independent: each run is true * (1 + e), e ~ Normal(0, 5%).
    drift: as independent, on a machine whose speed is a random walk that moves by 5% (sd)
        over an iteration: a step after each of the iteration's 2 * cap run slots, the slots
        it leaves unused passing while the agent works (`between`).
    spikes: as independent, and 3% of the runs are hit by load, 2-5x slower.
    """

    def __init__(self, model: str, rng: random.Random, slots: int) -> None:
        self.model, self.rng, self.slots = model, rng, slots
        self.level, self.used = 1.0, 0

    def run(self, true: float) -> float:
        value = true * self.level * (1 + self.rng.gauss(0, NOISE))
        if self.model == "drift":
            self.used += 1
            self.level *= 1 + self.rng.gauss(0, NOISE / math.sqrt(self.slots))
        elif self.model == "spikes" and self.rng.random() < SPIKE_RATE:
            value *= self.rng.uniform(2, 5)
        return value

    def between(self) -> None:
        """The rest of the iteration: its unused run slots (the agent's turn)."""
        if self.model == "drift":
            for _ in range(max(0, self.slots - self.used)):
                self.level *= 1 + self.rng.gauss(0, NOISE / math.sqrt(self.slots))
        self.used = 0


def sequential_loop(design: Design, machine: Machine, gain: float, iterations: int) -> list[Step]:
    """One incumbent compared with `iterations` candidates in turn, as the decide stage does
    (paired.compare: the guard, then pairs whose first side alternates), each comparison
    pooling the incumbent's runs from the earlier ones, and restarting the pool where the
    drift test dropped it (pool.earlier_runs). The incumbent stays: the figures are those of
    the decision rule, one comparison at a time, with the pool a loop would have."""
    earlier: list[list[float]] = []
    steps = []
    for _ in range(iterations):
        measured = paired.compare(
            design,
            lambda: {"ok": True},
            lambda: (machine.run(100.0 * (1 - gain)), None),
            lambda: (machine.run(100.0), None),
            earlier=earlier,
        )
        step = measured["sequential"]
        steps.append(Step(**(step | {"ci": tuple(step["ci"]) if step["ci"] else None})))
        fresh = measured["incumbent_samples"]
        earlier = [list(fresh)] if step["pool_dropped"] else [*earlier, list(fresh)]
        machine.between()
    return steps


def share(hits: int, n: int) -> str:
    p = hits / n
    return f"{p:6.1%} ± {math.sqrt(p * (1 - p) / n):.1%}"


def mean_se(xs: list[int]) -> str:
    return f"{statistics.fmean(xs):5.1f} ± {statistics.stdev(xs) / math.sqrt(len(xs)):.1f}"


def sequential_cell(
    design: Design, model: str, rng: random.Random, loops: int, gain: float, iterations: int
) -> list[Step]:
    steps: list[Step] = []
    for _ in range(loops):
        machine = Machine(model, rng, 2 * design.max_samples)
        steps += sequential_loop(design, machine, gain, iterations)
    return steps


def bounds(alpha: float, power: float, runs: int, sd: float) -> tuple[float, float]:
    """(best detection of any level-alpha test on `runs` candidate runs, least mean candidate
    runs under no effect of any test with that alpha and `power`), both for a known noise sd
    `sd` of one comparison unit: the one-sided z-test (Neyman-Pearson) and Wald's bound
    E0[N] >= d(1-alpha || beta) / KL(P0 || P1)."""
    from scipy import stats

    delta = 100 * GAIN
    best = float(stats.norm.sf(stats.norm.isf(alpha) - delta / sd * math.sqrt(runs)))
    beta = 1 - power
    kl = delta**2 / (2 * sd**2)
    least = ((1 - alpha) * math.log((1 - alpha) / beta) + alpha * math.log(alpha / power)) / kl
    return best, least


MODELS = ("independent", "drift", "spikes")
SPIKE_RATE = 0.03
ITERATIONS = 10  # comparisons per incumbent in one simulated loop


def sequential_figures(trials: int) -> None:
    rng = random.Random(20260320)
    default = Design()
    rows = [
        ("pool: false (fresh pairs only)", Design(pool=False)),
        ("pool: true (random effects)", Design(pool=True)),
    ]
    rows = [(f"{label}{' [default]' * (d == default)}", d) for label, d in rows]
    loops = max(1, trials // ITERATIONS)
    n = loops * ITERATIONS
    print(
        f"\n(d) sequential keep test, alpha {default.alpha}; {loops} loops x {ITERATIONS} "
        f"comparisons against one incumbent = {n} comparisons per cell"
    )
    print("    (± one standard error; runs = the candidate's runs per comparison)")
    print(
        "    noise models: independent 5%; drift (a random walk of 5% sd per iteration);"
        f"\n    spikes ({SPIKE_RATE:.0%} of runs 2-5x slower)\n"
    )
    head = f"{'design':<42} {'noise':<12} {'no effect kept':>15} {'runs':>11}"
    print(head + f" {'3% gain kept':>15} {'runs':>11} {'pool dropped':>13}")
    measured = {}
    for label, design in rows:
        for model in MODELS:
            null = sequential_cell(design, model, rng, loops, 0.0, ITERATIONS)
            real = sequential_cell(design, model, rng, loops, GAIN, ITERATIONS)
            k0, k1 = sum(s.kept for s in null), sum(s.kept for s in real)
            n0, n1 = [s.samples for s in null], [s.samples for s in real]
            dropped = sum(s.pool_dropped for s in null) / n
            measured[label, model] = (k0 / n, statistics.fmean(n0), k1 / n, statistics.fmean(n1))
            print(
                f"{label:<42} {model:<12} {share(k0, n):>15} {mean_se(n0):>11} "
                f"{share(k1, n):>15} {mean_se(n1):>11} {dropped:>13.1%}"
            )

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    label = next(label for label, design in rows if design == default)
    print(f"\ntargets, default design ({label}):")
    for model in MODELS:
        false_keep, runs0, found, runs1 = measured[label, model]
        print(f"  {model}:")
        print(
            f"    false keeps on no effect <= 5%:  {false_keep:6.1%}  {verdict(false_keep <= 0.05)}"
        )
        detect = verdict(found >= 0.8) if model == "independent" else "(reported)"
        print(f"    true 3% gain kept >= 80%:        {found:6.1%}  {detect}")
        print(f"    mean candidate runs, no effect <= 12: {runs0:5.1f}  {verdict(runs0 <= 12)}")
        print(f"    mean candidate runs, 3% gain <= 20:   {runs1:5.1f}  {verdict(runs1 <= 20)}")
    cap = default.max_samples
    known = bounds(default.alpha, 0.8, cap, 100 * NOISE)
    pairs = bounds(default.alpha, 0.8, cap, math.hypot(100 * NOISE, 100 * (1 - GAIN) * NOISE))
    print(
        "bounds for the same design (computed for independent noise of known sd, not measured):"
        f"\n    incumbent known exactly (an infinite pool): any test at 5% on {cap} candidate "
        f"runs finds a 3% gain at most {known[0]:.0%} of the time, and one that finds it 80% "
        f"of the time\n    needs {known[1]:.1f} candidate runs on average under no effect;"
        f"\n    fresh pairs only (no pool): at most {pairs[0]:.0%}, and {pairs[1]:.1f} runs."
    )
    # Under the drift model the machine walks by one run's sd per iteration: even a test told
    # the walk's size and the incumbent's exact level at the last comparison knows today's
    # level only as well as one more fresh run would tell it.
    run_var, cand_var = (100 * NOISE) ** 2, (100 * (1 - GAIN) * NOISE) ** 2
    walk = math.sqrt(cap * (cand_var / cap + 1 / (cap / run_var + 1 / run_var)))
    drift = bounds(default.alpha, 0.8, cap, walk)
    print(
        f"    under drift, the walk's size and the last level known exactly: at most "
        f"{drift[0]:.0%}, and {drift[1]:.1f} runs\n    (a pool cannot beat fresh pairs by "
        "much on a machine that moves this much)."
    )


FAST = "def steps():\n    return {n}\n"


def orchestration(iterations: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-experiment-") as tmp:
        tmp_path = Path(tmp)
        target = tmp_path / "target"
        target.mkdir()
        (target / "fast.py").write_text(FAST.format(n=10_000))
        (target / "measure.py").write_text("import fast\nprint(fast.steps())\n")
        (target / "test_ok.py").write_text("def test_ok():\n    pass\n")
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "i"]):
            subprocess.run(
                ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=target, check=True
            )
        script = {
            "experiment": {
                i: [
                    {
                        "tool": "write_file",
                        "args": {"path": "fast.py", "content": FAST.format(n=10_000 - i)},
                    },
                    {
                        "tool": "finish_experiment",
                        "args": {
                            "hypothesis": f"idea number {i} " + "x" * i,
                            "change_summary": "s",
                        },
                    },
                ]
                for i in range(1, iterations + 1)
            }
        }
        (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
        spec = {
            "mode": "experiment",
            "target": str(target),
            "test_command": "true",
            "experiment": {
                "goal": "bench",
                "scope": ["fast.py"],
                "max_iterations": iterations,
                "metric": {
                    "command": "python measure.py",
                    "format": "last_line",
                    "direction": "minimize",
                },
            },
            "agent": {"backend": "script", "script": str(tmp_path / "script.yaml")},
        }
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        env = dict(
            os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
        )

        def cmd(target: str) -> list[str]:
            # --configfile takes several values: the target must come before it.
            return [
                sys.executable,
                "-m",
                "snakemake",
                "--snakefile",
                str(ROOT / "Snakefile"),
                "--cores",
                "1",
                target,
                "--configfile",
                str(tmp_path / "spec.yaml"),
            ]

        t0 = time.monotonic()
        setup = subprocess.run(
            cmd("sessions/b/setup.json"), cwd=tmp_path, env=env, capture_output=True, text=True
        )
        if setup.returncode:
            sys.exit(f"setup failed:\n{setup.stderr[-3000:]}")
        t1 = time.monotonic()
        subprocess.run(
            cmd("sessions/b/done"), cwd=tmp_path, env=env, check=True, capture_output=True
        )
        t2 = time.monotonic()
        proc = subprocess.run(
            cmd("sessions/b/done"),
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        t3 = time.monotonic()
        session = tmp_path / "sessions" / "b"
        jobs = 0.0
        for bench in (session / "benchmarks").rglob("*.tsv"):
            if "experiment_propose" in str(bench) or "experiment_decide" in str(bench):
                jobs += float(bench.read_text().splitlines()[1].split("\t")[0])
        kept = sum(json.loads(line)["kept"] for line in (session / "experiments.jsonl").open())
        print(f"\n(c) {iterations} iterations through Snakemake (instant agent and metric)")
        print(
            f"    setup: {t1 - t0:.1f}s; loop + report + plot: {t2 - t1:.1f}s "
            f"= {(t2 - t1) / iterations:.2f}s per iteration"
        )
        print(
            f"    of which inside the propose/decide jobs: {jobs / iterations:.2f}s per iteration "
            f"(the rest is Snakemake: DAG, checkpoints, job start)"
        )
        print(
            f"    kept {kept}/{iterations}; no-op rerun: {t3 - t2:.1f}s "
            f"({'nothing to do' if 'Nothing to be done' in proc.stderr else 'ran something'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--skip-snakemake", action="store_true")
    parser.add_argument("--skip-fixed", action="store_true", help="skip (a) and (b)")
    parser.add_argument("--skip-sequential", action="store_true", help="skip (d)")
    args = parser.parse_args()
    if not args.skip_fixed:
        decision_figures(args.trials)
    if not args.skip_sequential:
        sequential_figures(args.trials)
    if not args.skip_snakemake:
        orchestration(args.iterations)


if __name__ == "__main__":
    main()

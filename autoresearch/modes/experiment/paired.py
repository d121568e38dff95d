"""The sequential keep decision (`experiment.sequential`): the guard first, then the
candidate and the incumbent measured pair by pair until sequential.next_step decides.

Each pair is one run of each side, in two worktrees: the candidate's (its patch applied)
and the incumbent's (a detached worktree at the best kept commit). The side that runs first
alternates (incumbent then candidate, then candidate then incumbent, ...), so warm-up and
drift fall on both sides alike. A guard that fails discards the change before a single
metric run is spent.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch.engine.stage import StageEnv
from autoresearch.measure import metrics
from autoresearch.safety.jail import Jail

from . import holdout, sequential
from .candidates import CandidateEnv, candidate_env, candidate_of, ensure_worktree
from .policy import CRASH, DISCARDED, GUARD_FAILED, KEPT
from .program import ExperimentConfig

INCUMBENT = "incumbent"  # the worktree slot the incumbent is measured in

Run = Callable[[], tuple[float, Any]]  # one metric run: (value, raw output)


def compare(
    design: sequential.Design,
    guard: Callable[[], dict[str, Any]],
    run_candidate: Run,
    run_incumbent: Run,
    earlier: sequential.Earlier | None = None,
    machine: str | None = None,
) -> dict[str, Any]:
    """The guard, then paired runs until the design decides: the measurement record.
    `earlier` are the incumbent's runs from earlier comparisons on this `machine` class,
    one block per comparison (pool.py): the design pools them with the fresh ones.

    Without a passing guard no metric run is taken. A metric run that fails ends the
    comparison with `error` (and the pairs taken so far)."""
    record: dict[str, Any] = {"guard": guard()}
    if record["guard"]["ok"] is False:
        return record
    xs: list[float] = []
    ys: list[float] = []
    last_raw: list[Any] = [None]

    def take(i: int) -> tuple[float, float]:
        if i % 2 == 0:
            y, _ = run_incumbent()
            x, last_raw[0] = run_candidate()
        else:
            x, last_raw[0] = run_candidate()
            y, _ = run_incumbent()
        xs.append(x)  # kept as taken, so a failure still reports the pairs before it
        ys.append(y)
        return x, y

    try:
        result = sequential.compare(design, take, earlier=earlier or ())
    except metrics.MetricError as err:
        return record | {"error": str(err), "samples": xs, "incumbent_samples": ys}
    step = result.step
    return record | {
        "value": statistics.fmean(result.candidate),
        "samples": result.candidate,
        # Of what the candidate was compared with: the pool, or the fresh runs alone.
        "incumbent_value": (
            step.incumbent_mean
            if step.incumbent_mean is not None
            else statistics.fmean(result.incumbent)
        ),
        "machine": machine,
        "incumbent_samples": result.incumbent,
        "passed": None,
        "notes": None,
        "raw": last_raw[0],
        "sequential": result.step.to_record(),
    }


def metric_run(
    cfg: ExperimentConfig, cwd: Path, secrets, jail: Jail | None, deadline: float | None
) -> Run:
    """One run of the metric command in `cwd`, the holdout's files hidden from it; its
    timeout is cut to what is left before `deadline` (an epoch time, or None)."""
    jail = holdout.blind(jail, cfg)

    def run() -> tuple[float, Any]:
        timeout = cfg.verify_timeout_s
        if deadline is not None:
            timeout = max(1.0, min(timeout, deadline - time.time()))
        m = metrics.measure(
            cfg.command, cwd, cfg.format, cfg.key, 1, timeout, secrets=secrets, jail=jail
        )
        return m.value, m.raw

    return run


def incumbent_env(env: StageEnv, commit: str) -> CandidateEnv:
    """The stage context of the incumbent's worktree (made on first use), reset to `commit`.
    A batch's candidate `cK` has its own (`cK-incumbent`): candidates are measured at once."""
    mine = candidate_of(env)
    inc = candidate_env(env, f"{mine}-{INCUMBENT}" if mine else INCUMBENT)
    ensure_worktree(inc, commit)
    inc.pristine(commit)  # measured like the candidate: the commit alone
    return inc


def judge(measured: dict[str, Any], rec: dict[str, Any], guard_cmd: str | None) -> tuple[str, str]:
    """(status, why) of a sequential measurement; fills `rec` with what was measured and
    the test's figures (p-value, effect and its interval, pairs)."""
    guard = measured.get("guard") or {"ok": None}
    rec["guard_ok"] = guard["ok"]
    if guard.get("tests"):  # the default guard's run (guard.py): a later change's reference
        rec["guard_tests"] = guard["tests"]
    rec["pairs"] = 0
    if guard["ok"] is False:
        rec["guard"] = guard
        if guard.get("timed_out"):
            took = guard.get("duration_s")
            after = f" after {took:.0f}s" if took is not None else ""
            rec["error"] = f"guard `{guard_cmd}` timed out{after} (before any metric run)"
            return CRASH, ""
        why = guard.get("reason") or f"exit code {guard['exit_code']}"  # by test id, or code
        return GUARD_FAILED, f"guard `{guard_cmd}` failed ({why}); no metric run spent"
    if "error" in measured:
        rec["error"] = measured["error"]
        rec["pairs"] = len(measured.get("samples") or [])
        return CRASH, ""
    step = measured["sequential"]
    kept = step["action"] == sequential.KEEP
    rec.update(
        metric_value=measured["value"],
        samples=measured["samples"],
        incumbent_value=measured["incumbent_value"],
        incumbent_samples=measured["incumbent_samples"],
        raw=measured["raw"],  # passed and notes stay None: the metric is a number
        **{k: step[k] for k in ("p_value", "effect", "relative_effect", "ci", "ci_level")},
        pairs=step["samples"],
        sequential=step,
        machine=measured.get("machine"),
        improved=kept,
    )
    return (KEPT if kept else DISCARDED), describe(step)


def describe(step: dict[str, Any]) -> str:
    """The verdict line: the reason, the interval, the pairs (as Step.describe)."""
    return sequential.Step(**(step | {"ci": tuple(step["ci"]) if step["ci"] else None})).describe()


def pick(batch: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A batch's winner under the sequential test: of the candidates it kept, the largest
    gain over the incumbent measured next to it (each candidate had its own pairs); the
    lowest candidate on a tie. None when it kept none."""
    kept = [c for c in batch if c["status"] == KEPT]
    if not kept:
        return None
    return max(kept, key=lambda c: (c["effect"], -batch.index(c)))

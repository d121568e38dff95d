"""The holdout: a second evaluator the agent never sees (`experiment.holdout`).

A change the metric would keep is measured again by the holdout command, which prints a
number the way the metric does (same format, key and direction, same repeats). It is
kept only when the holdout is not worse than the incumbent's holdout by more than the
noise, and otherwise discarded as `holdout_disagrees`. The rule, on purpose simple:

    worse = (candidate - incumbent) in the metric's bad direction
    noise = 2 x the sample standard deviation of the incumbent's holdout runs (0 with one run)
    keep only if worse <= noise

So with `repeats: 1` the holdout may not get worse at all. And a holdout must confirm, not
only not contradict: when the metric improves by more than its own noise (the same rule on
the incumbent's metric runs), the holdout must improve by more than its noise too, else the
change is discarded as `holdout_unconfirmed`, with both figures (a 1000x gain the holdout
does not see is a change that special-cases the metric's input).
`experiment.holdout_confirms: false` goes back to "no worse" alone, for a holdout that
cannot see every gain.

Hidden means: the holdout's files (found by watching its run at setup, less the files the
metric or guard run too) are protected, refused by the agent's file tools as if absent,
covered by an unreadable empty file in the jail of every metric, guard and run_tests run
(which run the agent's code), and their names are redacted from the command output and
errors the agent is shown. Its command and numbers are written only under sessions/,
which no tool reaches; the agent's history shows a holdout discard as a plain
`discarded`. program.md and mission.md are the agent's to read, so they may not name a
holdout (program.py refuses it there).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoresearch.engine.loop import Status
from autoresearch.measure import measured, metrics
from autoresearch.safety import git
from autoresearch.safety.command_files import measurement_scripts
from autoresearch.safety.jail import Jail
from autoresearch.safety.patch import apply_patch
from autoresearch.safety.sandbox import redact

from .log import each_experiment, fmt
from .policy import NOISE_SDS, ref
from .program import ExperimentConfig

HOLDOUT_DISAGREES = Status.HOLDOUT_DISAGREES
HOLDOUT_UNCONFIRMED = Status.HOLDOUT_UNCONFIRMED
KEY = "experiment.holdout"


# --- setup ----------------------------------------------------------------------------


def private_files(
    cfg: ExperimentConfig,
    worktree: Path,
    base: str,
    shared: list[str],
    secrets: list[str] | None,
    jail: Jail | None,
) -> tuple[list[str], list[str]]:
    """(files, notes): what the holdout runs or reads outside the editable scope, less
    `shared` (the metric's and guard's, which the agent may read), watched in a run of its
    own; plus the mission's evaluator.json, which names the holdout."""
    assert cfg.holdout is not None
    watcher = measured.Watcher(worktree, base, measured.scope_rule(cfg.scope), measurement_scripts)
    watcher.run(KEY, cfg.holdout, timeout_s=timeout_of(cfg), secrets=secrets, jail=jail)
    # Paths kept absent for the imports (measured.import_paths) are no file of the
    # holdout's: hiding them would redact module names (`json`) from every output.
    by_import = (measured.IMPORT_ABSENT, measured.IMPORT_SHADOW)
    own = [w.path for w in watcher.watch.files if w.protected and w.source not in by_import]
    files = [p for p in dict.fromkeys(own) if p not in set(shared)]
    human = [p for p in cfg.human_files() if p.endswith("evaluator.json")]
    return list(dict.fromkeys([*files, *human])), list(watcher.watch.notes)


def timeout_of(cfg: ExperimentConfig) -> float:
    return cfg.holdout_timeout_s or cfg.verify_timeout_s


# --- running it -----------------------------------------------------------------------


def blind(jail: Jail | None, cfg: ExperimentConfig) -> Jail | None:
    """`jail` with the holdout's files covered: for every run of the agent's code but the
    holdout's own. (A jail of mode none hides nothing: see docs/experiment.md.)"""
    if jail is None or not cfg.holdout_files:
        return jail
    paths = tuple(jail.worktree / p for p in cfg.holdout_files)
    return replace(jail, hide=jail.hide + paths)


def measure(
    cfg: ExperimentConfig, cwd: Path, secrets: list[str] | None, jail: Jail | None
) -> dict[str, Any]:
    """One holdout measurement in `cwd`: {"value", "samples"} or {"error"}."""
    assert cfg.holdout is not None
    try:
        m = metrics.measure(
            cfg.holdout,
            cwd,
            cfg.format,
            cfg.key,
            repeats=cfg.repeats,
            timeout_s=timeout_of(cfg),
            secrets=secrets,
            jail=jail,
        )
    except metrics.MetricError as err:
        return {"error": str(err)}
    return {"value": m.value, "samples": m.samples}


def measure_patch(
    cfg: ExperimentConfig,
    worktree: Path,
    patch: Path,
    start: str,
    secrets: list[str] | None,
    jail: Jail | None,
) -> dict[str, Any]:
    """The holdout of `patch` applied to `start` in `worktree`, which is left at `start`
    with no ignored file either: the agent's code saw the holdout's files in this run, and
    what it wrote where git does not look would be there for the next propose to read."""
    git.reset_to(worktree, start, ignored=True)
    refused = apply_patch(worktree, patch)
    try:
        if refused is not None:
            return {"error": f"the patch does not apply to {start[:12]}: {refused}"}
        return measure(cfg, worktree, secrets, jail)
    finally:
        git.reset_to(worktree, start, ignored=True)


# --- the keep rule --------------------------------------------------------------------


def noise(samples: list[float]) -> float:
    """The change the holdout is allowed to get worse by: NOISE_SDS sample SDs."""
    return NOISE_SDS * statistics.stdev(samples) if len(samples) >= 2 else 0.0


def compare(candidate: dict[str, Any], incumbent: dict[str, Any], direction: str) -> dict[str, Any]:
    """What the holdout says of a candidate against the incumbent (both {"value",
    "samples"}): the record decision.json keeps under `holdout`."""
    out: dict[str, Any] = {
        "value": candidate.get("value"),
        "samples": candidate.get("samples", []),
        "incumbent_value": incumbent["value"],
        "incumbent_samples": incumbent["samples"],
        "noise": noise(incumbent["samples"]),
        "error": candidate.get("error"),
    }
    if out["error"] is not None:
        out["agrees"] = False
        return out
    sign = 1 if direction == "minimize" else -1
    out["worse_by"] = sign * (candidate["value"] - incumbent["value"])
    out["agrees"] = out["worse_by"] <= out["noise"]
    return out


def judge(
    cfg: ExperimentConfig,
    rec: dict[str, Any],
    best: dict[str, Any],
    status: str,
    verdict: str,
    run: Callable[[], dict[str, Any]],
) -> tuple[str, str]:
    """A change the metric keeps, measured by the holdout (`run`) and compared with the
    incumbent's holdout; (status, verdict) and `rec["holdout"]`."""
    if not cfg.holdout or status != Status.KEPT or best.get("holdout") is None:
        return status, verdict
    said = compare(run(), best["holdout"], cfg.direction)
    rec["holdout"] = said
    if not said["agrees"]:
        return HOLDOUT_DISAGREES, f"the metric said keep ({verdict}); the holdout did not: " + (
            describe(said)
        )
    gain = metric_gain(cfg, rec, best)
    said["metric_gain"], said["metric_noise"] = gain
    said["confirms"] = -said["worse_by"] > said["noise"]
    if cfg.holdout_confirms and gain[0] > gain[1] and not said["confirms"]:
        # A gain the holdout does not see: the code may special-case the metric's input.
        return HOLDOUT_UNCONFIRMED, (
            f"the metric said keep ({verdict}): better by {gain[0]:g} against its noise "
            f"{gain[1]:g}; the holdout did not confirm it: {describe(said)} "
            "(experiment.holdout_confirms: false keeps a change the holdout is no worse on)"
        )
    return status, f"{verdict}; the holdout agrees ({describe(said)})"


def metric_gain(
    cfg: ExperimentConfig, rec: dict[str, Any], best: dict[str, Any]
) -> tuple[float, float]:
    """(how much better the metric says the change is, the metric's noise): the incumbent
    as measured in this comparison when it was (paired runs), else the incumbent's record;
    the noise is NOISE_SDS sample SDs of the incumbent's runs, as for the holdout."""
    incumbent = rec.get("baseline_value", best["value"])
    samples = rec.get("incumbent_samples") or best.get("samples") or []
    sign = 1 if cfg.direction == "minimize" else -1
    return sign * (incumbent - rec["metric_value"]), noise(list(samples))


def describe(said: dict[str, Any]) -> str:
    if said.get("error"):
        return "it could not measure the change: " + said["error"].strip().splitlines()[0][:200]
    return (
        f"holdout {said['incumbent_value']:g} → {said['value']:g}, worse by "
        f"{said['worse_by']:g} (allowed noise {said['noise']:g})"
    )


def carry(best: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    """The new incumbent `best` with the holdout its change was measured at."""
    if value_of(rec) is not None:
        best["holdout"] = {"value": rec["holdout"]["value"], "samples": rec["holdout"]["samples"]}
    return best


def for_agent(rec: dict[str, Any], cfg: ExperimentConfig) -> dict[str, Any]:
    """An experiment as the agent's history shows it: a holdout discard is a discard, with
    neither the holdout's verdict nor its numbers; an error (what the agent's code printed
    when the metric ran it) without the holdout's file names."""
    if rec.get("error") and cfg.holdout_files:  # a record read back is a Mapping, not a dict
        rec = dict(rec) | {"error": redact(rec["error"], cfg.holdout_files)}
    if rec.get("status") not in (HOLDOUT_DISAGREES, HOLDOUT_UNCONFIRMED):
        return rec
    return {k: v for k, v in rec.items() if k != "holdout"} | {
        "status": Status.DISCARDED,
        "verdict": "",
    }


def value_of(rec: dict[str, Any]) -> float | None:
    """The holdout figure of an experiment's record: its own measurement, None without one."""
    said = rec.get("holdout")
    if said and said.get("value") is not None:
        return said["value"]
    return None


# --- the two series, for status and the report -----------------------------------------


def series(records: list[dict[str, Any]], key: str, last: int | None = None) -> list[str]:
    """The metric and the holdout per experiment, side by side (a markdown table); no
    lines when the session has no holdout. `last`: only the latest experiments."""
    if not any(r.get("holdout") for r in records):
        return []
    rows = [
        f"| {ref(r)} | {fmt(r.get('metric_value'))} | {fmt(value_of(r))} | {r['status']} |"
        for r in each_experiment(records)
    ]
    head = [f"| iteration | {key} | holdout | status |", "|---|---|---|---|"]
    return head + rows[-last:] if last else head + rows

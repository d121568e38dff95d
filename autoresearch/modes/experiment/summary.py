"""A run's summary.md: the score trend, the best result and the next steps the data
suggest (a plateau: widen the scope; many crashes: fix the evaluator), rewritten after
every decided iteration."""

from __future__ import annotations

import math
from typing import Any

from . import log as logs
from .log import fmt
from .policy import ERRORS, GUARD_FAILED, KEPT, improvement, ref

# The latest experiments the advice looks at, and the share of them that is "many".
WINDOW = 5
MANY = 0.5
TREND_SHOWN = 20


def best_trend(records: list[dict[str, Any]]) -> list[float | None]:
    """The best value after each iteration, the baseline first."""
    return [(r.get("best") or {}).get("value") for r in records]


def gain_so_far(records: list[dict[str, Any]], direction: str) -> float | None:
    """The best's gain over the baseline (0.05 = 5% better); None when either is unknown
    or the gain is infinite (a baseline of 0)."""
    base, best = records[0].get("metric_value"), records[-1]["best"]["value"]
    if base is None or best is None:
        return None
    gain = improvement(base, best, direction)
    return gain if math.isfinite(gain) else None


def next_steps(
    records: list[dict[str, Any]], direction: str, target_reached: bool = False
) -> list[str]:
    """What the record says to do next, most pressing first; never empty."""
    tried = logs.each_experiment(records)[1:]
    recent = tried[-WINDOW:]
    steps: list[str] = []
    if target_reached:
        steps.append("the target is reached: review the kept commits and merge the branch")
    crashes = [r for r in recent if r["status"] in ERRORS]
    if len(recent) >= 2 and len(crashes) >= MANY * len(recent):
        last = next((r for r in reversed(crashes) if r.get("error")), None)
        why = f" (last: {last['error'].strip().splitlines()[0][:120]})" if last else ""
        steps.append(
            f"many crashes: {len(crashes)} of the last {len(recent)} experiments failed to run "
            f"or measure{why}; fix the evaluator or the environment before running longer"
        )
    guards = [r for r in recent if r["status"] == GUARD_FAILED]
    if len(recent) >= 2 and len(guards) >= MANY * len(recent):
        steps.append(
            f"the guard failed {len(guards)} of the last {len(recent)} times: say in the "
            "research prose what the guard checks, or narrow the scope"
        )
    kept_recent = [r for r in recent if r["status"] == KEPT]
    if len(recent) >= WINDOW and not kept_recent and not crashes:
        steps.append(
            f"plateau: nothing kept in the last {len(recent)} experiments; widen the scope "
            "(more files), give a new research direction in the prose, or stop here"
        )
    elif kept_recent and not target_reached:
        gain = gain_so_far(records, direction)
        so_far = f" ({gain:+.1%} over the baseline so far)" if gain is not None else ""
        steps.append(
            f"still improving: {len(kept_recent)} kept of the last {len(recent)}{so_far}; "
            "run longer"
        )
    if not tried:
        steps.append("no experiment has been decided yet")
    if not steps:
        steps.append(
            "keep going: the latest experiments were discarded, too few yet to call a plateau"
        )
    return steps


def render(
    records: list[dict[str, Any]],
    key: str,
    direction: str,
    run_id: str,
    status: str,
    branch: str,
    target_reached: bool = False,
) -> str:
    """summary.md."""
    base = records[0]
    best = records[-1]["best"]
    c = logs.counts(records)
    trend = best_trend(records)
    shown = trend[-TREND_SHOWN:]
    skipped = "… → " if len(trend) > len(shown) else ""
    gain = gain_so_far(records, direction)
    lines = [
        f"# Run {run_id}",
        "",
        f"- Status: {status}",
        f"- Iterations decided: {len(records) - 1}",
        f"- Baseline: {key} = {fmt(base['metric_value'])}",
        f"- Best: {key} = {fmt(best['value'])} (experiment {logs.best_name(best)}, commit "
        f"{(best.get('commit') or '')[:12]})"
        + (f", {gain:+.1%} over the baseline ({direction})" if gain is not None else ""),
        f"- Experiments: {c['total']} | kept {c['improvements']} | discarded "
        f"{c['regressions']} | errors {c['errors']}",
        f"- Branch: {branch}",
        "",
        "## Score trend (best after each iteration)",
        "",
        skipped + " → ".join(fmt(v) for v in shown),
        "",
        "| iteration | " + key + " | status |",
        "|---|---|---|",
    ]
    for rec in logs.each_experiment(records)[-TREND_SHOWN:]:
        lines.append(f"| {ref(rec)} | {fmt(rec['metric_value'])} | {rec['status']} |")
    lines += ["", "## Recommended next steps", ""]
    lines += [f"- {step}" for step in next_steps(records, direction, target_reached)]
    return "\n".join(lines) + "\n"

"""The experiment audit trail: experiments.jsonl, results-data.json, experiments.tsv,
evaluations/, decision-log.md and goal-progress.md.

Every file here is derived from iteration records (the `decision.json` of each cycle
plus the setup record for experiment 0), so a rerun of an iteration rewrites rather
than duplicates: experiments.jsonl is append-only and skips an id it already holds.
An iteration of a batch (`experiment.parallel`) holds one record per candidate under
`candidates`: the per-experiment files get one entry per candidate, the per-iteration
ones (evaluations/, decision-log.md, goal-progress.md) one per iteration.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from autoresearch.session.files import read_json, write_json, write_text

from .policy import (
    DISCARDED,
    ERRORS,
    GUARD_FAILED,
    HOLDOUT_DISAGREES,
    HOLDOUT_UNCONFIRMED,
    KEPT,
    REGRESSIONS,
    ref,
)

TSV_COLUMNS = [
    "run_id",
    "iteration",
    "commit",
    "metric",
    "delta",
    "guard",
    "status",
    "description",
    "timestamp",
]


# What experiments.jsonl records of the sequential keep test (experiment.sequential).
SEQUENTIAL_FIELDS = ("p_value", "effect", "relative_effect", "ci", "ci_level", "pairs")


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def best_name(best: dict[str, Any]) -> str:
    """The experiment that set the best value: `N`, or `N/cK` for a batch's candidate."""
    which = best.get("candidate")
    return f"{best['experiment_id']}/{which}" if which else str(best["experiment_id"])


def each_experiment(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with every batch opened into its candidates."""
    out: list[dict[str, Any]] = []
    for rec in records:
        out.extend(rec.get("candidates") or [rec])
    return out


# --- per-iteration records ------------------------------------------------------------


def jsonl_entry(rec: dict[str, Any]) -> dict[str, Any]:
    """The experiments.jsonl fields, plus status and commit."""
    return {
        "id": rec["iteration"],
        "timestamp": rec["timestamp"],
        "hypothesis": rec["hypothesis"],
        "change_summary": rec["change_summary"],
        "metric_value": rec["metric_value"],
        "baseline_value": rec["baseline_value"],
        "improved": rec["improved"],
        "kept": rec["status"] == KEPT,
        "duration_seconds": rec["duration_seconds"],
        "error": rec["error"],
        "status": rec["status"],
        "commit": rec["end_commit"],
    } | _extras(rec)


def _extras(rec: dict[str, Any]) -> dict[str, Any]:
    """A candidate's name, a retry's origin and the sequential test's figures, only where
    they apply."""
    out: dict[str, Any] = {}
    if rec.get("candidate"):
        out["candidate"] = rec["candidate"]
    if rec.get("retry_of") is not None:
        out["retry_of"] = rec["retry_of"]
    if "pairs" in rec:  # the sequential keep test's figures
        out |= {key: rec.get(key) for key in SEQUENTIAL_FIELDS}
    return out


def append_jsonl(path: Path, entry: dict[str, Any]) -> bool:
    """Append unless this experiment is already logged (the rerun of an interrupted
    iteration): an id, or an id and candidate."""
    ident = (entry["id"], entry.get("candidate"))
    if any((e.get("id"), e.get("candidate")) == ident for e in read_jsonl(path)):
        return False
    with path.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
    return True


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def upsert_results_data(path: Path, recs: list[dict[str, Any]]) -> None:
    """The raw output of these experiments (one iteration's), replacing earlier entries."""
    data = read_json(path) or []
    mine = {(r["iteration"], r.get("candidate")) for r in recs}
    data = [d for d in data if (d.get("experiment_id"), d.get("candidate")) not in mine]
    for rec in recs:
        data.append(
            {
                "experiment_id": rec["iteration"],
                **({"candidate": rec["candidate"]} if rec.get("candidate") else {}),
                "timestamp": rec["timestamp"],
                "raw_eval_output": rec.get("raw"),
                "samples": rec.get("samples") or [],
                "hypothesis": rec["hypothesis"],
            }
        )
    data.sort(key=lambda d: (d["experiment_id"], d.get("candidate") or ""))
    write_json(path, data)


def evaluation_record(rec: dict[str, Any]) -> dict[str, Any]:
    """The evaluator contract {"pass", "score"?, "notes"?} plus what the harness decided."""
    passed = rec.get("passed")
    if passed is None:
        passed = rec["metric_value"] is not None and rec.get("guard_ok") is not False
    notes = rec.get("notes") or rec.get("error") or rec.get("verdict") or ""
    out: dict[str, Any] = {"pass": bool(passed)}
    if rec["metric_value"] is not None:
        out["score"] = rec["metric_value"]
    out["notes"] = notes
    out |= {"iteration": rec["iteration"], "status": rec["status"], "raw": rec.get("raw")}
    if rec.get("candidates"):
        out["candidate"] = rec.get("candidate")
        out["candidates"] = [
            {"candidate": c["candidate"]} | evaluation_record(c) for c in rec["candidates"]
        ]
    return out


def write_tsv(path: Path, run_id: str, records: list[dict[str, Any]]) -> None:
    """One row per experiment; batches add a `candidate` column."""
    out = io.StringIO()
    batch = any(rec.get("candidates") for rec in records)
    columns = TSV_COLUMNS[:2] + ["candidate"] + TSV_COLUMNS[2:] if batch else TSV_COLUMNS
    writer = csv.DictWriter(
        out, columns, delimiter="\t", lineterminator="\n", extrasaction="ignore"
    )
    writer.writeheader()
    for rec in each_experiment(records):
        delta = (
            rec["metric_value"] - rec["baseline_value"]
            if rec["metric_value"] is not None and rec["baseline_value"] is not None
            else None
        )
        guard = rec.get("guard_ok")
        writer.writerow(
            {
                "run_id": run_id,
                "iteration": rec["iteration"],
                "candidate": rec.get("candidate") or "",
                "commit": (rec["end_commit"] or "")[:12],
                "metric": fmt(rec["metric_value"]),
                "delta": "" if delta is None else f"{delta:+g}",
                "guard": "—" if guard is None else ("pass" if guard else "fail"),
                "status": rec["status"],
                "description": " ".join((rec["hypothesis"] or "").split())[:200],
                "timestamp": rec["timestamp"],
            }
        )
    write_text(path, out.getvalue())


def decision_log(records: list[dict[str, Any]], key: str) -> str:
    """decision-log.md, one section per iteration."""
    lines = ["# Decision log", ""]
    for rec in records:
        ev = evaluation_record(rec)
        score = f", score={ev['score']:g}" if "score" in ev else ""
        batch = rec.get("candidates") or []
        if batch:
            tried = "; ".join(f"{c['candidate']}: {tried_text(c)}" for c in batch)
            seen = "; ".join(f"{c['candidate']}: {observation(c, key)}" for c in batch)
        else:
            tried, seen = tried_text(rec), observation(rec, key)
        lines += [
            f"## Iteration {rec['iteration']:04d} — {rec['timestamp']}",
            f"**Tried**: {tried}",
            f"**Evaluator result**: pass={str(ev['pass']).lower()}{score}",
            f"**Observation**: {seen}",
            f"**Next**: {next_step(rec)}",
        ]
        kept_aside = [e["preserved"] for e in batch or [rec] if e.get("preserved")]
        if kept_aside:  # preserve_on_fail
            lines.append(f"**Preserved**: {', '.join(kept_aside)} (`git show <ref>`)")
        lines.append("")
    return "\n".join(lines)


def tried_text(rec: dict[str, Any]) -> str:
    text = rec["hypothesis"] + (f" ({rec['change_summary']})" if rec.get("change_summary") else "")
    if rec.get("retry_of") is not None:
        text += f" [retry of #{rec['retry_of']}]"
    return text


def observation(rec: dict[str, Any], key: str) -> str:
    status = rec["status"]
    if rec["iteration"] == 0:
        return f"baseline {key} = {fmt(rec['metric_value'])}"
    change = f"{key} {fmt(rec['baseline_value'])} → {fmt(rec['metric_value'])}"
    if status == KEPT:
        return f"{change}; kept ({rec['verdict']})"
    if status in (HOLDOUT_DISAGREES, HOLDOUT_UNCONFIRMED):  # the verdict says what each said
        return f"{change}; {status} ({rec['verdict']})"
    if status in REGRESSIONS:
        return f"{change}; discarded ({rec['verdict']})"
    text = (rec.get("error") or rec.get("verdict") or "").strip()
    return f"{status}: {text.splitlines()[0] if text else 'no details'}"


def next_step(rec: dict[str, Any]) -> str:
    if rec["iteration"] == 0:
        return "first experiment"
    if rec["status"] == KEPT:
        return "build on this change"
    if rec["status"] in ERRORS:
        return "fix the cause or try a different change"
    return "try a different approach; this one is recorded as discarded"


def goal_progress(records: list[dict[str, Any]], key: str) -> str:
    """goal-progress.md: iteration | value | Δ baseline | Δ previous best."""
    lines = [
        f"# Goal progress: {key}",
        "",
        "| iteration | value | Δ baseline | Δ previous | status |",
        "|---|---|---|---|---|",
    ]
    base = records[0]["metric_value"] if records else None
    for rec in records:
        value = rec["metric_value"]
        d_base = "" if value is None or base is None else f"{value - base:+g}"
        prev = rec["baseline_value"]
        d_prev = (
            "" if value is None or prev is None or rec["iteration"] == 0 else f"{value - prev:+g}"
        )
        lines.append(
            f"| {rec['iteration']} | {fmt(value)} | {d_base} | {d_prev} | {rec['status']} |"
        )
    return "\n".join(lines) + "\n"


def status_line(rec: dict[str, Any], key: str) -> str:
    """The status line `#24 [kept]     val_loss 0.991 -> 0.987  "Reduce weight decay"` line."""
    labels = {
        KEPT: "kept",
        DISCARDED: "reverted",
        GUARD_FAILED: "guard",
        HOLDOUT_DISAGREES: "holdout",
        HOLDOUT_UNCONFIRMED: "holdout",
    }
    label = labels.get(rec["status"], "error")
    if rec["metric_value"] is not None:
        what = f"{key} {fmt(rec['baseline_value'])} -> {fmt(rec['metric_value'])}"
    else:
        what = (rec.get("error") or rec["status"]).strip().splitlines()[0][:60]
    name = str(ref(rec))
    return f'#{name:<3} [{label}]{" " * (9 - len(label))}{what}  "{rec["hypothesis"]}"'


def counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Experiments run and their outcomes (every candidate of a batch counts)."""
    iterations = [r for r in each_experiment(records) if r["iteration"] > 0]
    return {
        "total": len(iterations),
        "improvements": sum(r["status"] == KEPT for r in iterations),
        "regressions": sum(r["status"] in REGRESSIONS for r in iterations),
        "errors": sum(r["status"] in ERRORS for r in iterations),
    }

"""The experiment audit trail: experiments.jsonl, results-data.json, experiments.tsv,
evaluations/, decision-log.md and goal-progress.md.

Every file here is derived from iteration records (the `decision.json` of each cycle
plus the setup record for experiment 0), so a rerun of an iteration rewrites rather
than duplicates: experiments.jsonl is append-only and skips an id it already holds.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ...files import write_json, write_text
from .policy import ERRORS, KEPT, REGRESSIONS

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


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


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
    }


def append_jsonl(path: Path, entry: dict[str, Any]) -> bool:
    """Append unless this id is already logged (the rerun of an interrupted iteration)."""
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and json.loads(line).get("id") == entry["id"]:
                return False
    with path.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
    return True


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def upsert_results_data(path: Path, rec: dict[str, Any]) -> None:
    data = json.loads(path.read_text()) if path.exists() else []
    data = [d for d in data if d.get("experiment_id") != rec["iteration"]]
    data.append(
        {
            "experiment_id": rec["iteration"],
            "timestamp": rec["timestamp"],
            "raw_eval_output": rec.get("raw"),
            "samples": rec.get("samples") or [],
            "hypothesis": rec["hypothesis"],
        }
    )
    data.sort(key=lambda d: d["experiment_id"])
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
    return out


def write_tsv(path: Path, run_id: str, records: list[dict[str, Any]]) -> None:
    out = io.StringIO()
    writer = csv.DictWriter(out, TSV_COLUMNS, delimiter="\t", lineterminator="\n")
    writer.writeheader()
    for rec in records:
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
        lines += [
            f"## Iteration {rec['iteration']:04d} — {rec['timestamp']}",
            f"**Tried**: {rec['hypothesis']}"
            + (f" ({rec['change_summary']})" if rec.get("change_summary") else ""),
            f"**Evaluator result**: pass={str(ev['pass']).lower()}{score}",
            f"**Observation**: {observation(rec, key)}",
            f"**Next**: {next_step(rec)}",
            "",
        ]
    return "\n".join(lines)


def observation(rec: dict[str, Any], key: str) -> str:
    status = rec["status"]
    if rec["iteration"] == 0:
        return f"baseline {key} = {fmt(rec['metric_value'])}"
    change = f"{key} {fmt(rec['baseline_value'])} → {fmt(rec['metric_value'])}"
    if status == KEPT:
        return f"{change}; kept ({rec['verdict']})"
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
    label = {KEPT: "kept", "discarded": "reverted", "guard_failed": "guard"}.get(
        rec["status"], "error"
    )
    if rec["metric_value"] is not None:
        what = f"{key} {fmt(rec['baseline_value'])} -> {fmt(rec['metric_value'])}"
    else:
        what = (rec.get("error") or rec["status"]).strip().splitlines()[0][:60]
    return f'#{rec["iteration"]:<3} [{label}]{" " * (9 - len(label))}{what}  "{rec["hypothesis"]}"'


def counts(records: list[dict[str, Any]]) -> dict[str, int]:
    iterations = [r for r in records if r["iteration"] > 0]
    return {
        "total": len(iterations),
        "improvements": sum(r["status"] == KEPT for r in iterations),
        "regressions": sum(r["status"] in REGRESSIONS for r in iterations),
        "errors": sum(r["status"] in ERRORS for r in iterations),
    }

"""The experiment audit trail (seeds 001, 003, 004) and the end-of-run report and plot.

Every file here is derived from iteration records (the `decision.json` of each cycle
plus the setup record for experiment 0), so a rerun of an iteration rewrites rather
than duplicates: experiments.jsonl is append-only and skips an id it already holds.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .experiment_policy import ERRORS, KEPT, REGRESSIONS
from .session import write_json, write_text

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


@dataclass(frozen=True)
class ExperimentFiles:
    root: Path  # sessions/<name>

    @property
    def setup(self) -> Path:
        return self.root / "experiment-setup.json"

    @property
    def baseline(self) -> Path:
        return self.root / "baseline.json"

    @property
    def jsonl(self) -> Path:
        return self.root / "experiments.jsonl"

    @property
    def results_data(self) -> Path:
        return self.root / "results-data.json"

    @property
    def tsv(self) -> Path:
        return self.root / "experiments.tsv"

    @property
    def decision_log(self) -> Path:
        return self.root / "decision-log.md"

    @property
    def progress(self) -> Path:
        return self.root / "goal-progress.md"

    def evaluation(self, iteration: int) -> Path:
        return self.root / "evaluations" / f"iteration-{iteration:04d}.json"


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


# --- per-iteration records ------------------------------------------------------------


def jsonl_entry(rec: dict[str, Any]) -> dict[str, Any]:
    """Seed 004's experiments.jsonl fields, plus status and commit."""
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
    """Seed 003's contract {"pass", "score"?, "notes"?} plus what the harness decided."""
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


def write_tsv(files: ExperimentFiles, run_id: str, records: list[dict[str, Any]]) -> None:
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
    write_text(files.tsv, out.getvalue())


def decision_log(records: list[dict[str, Any]], key: str) -> str:
    """Seed 003's decision-log.md, one section per iteration."""
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
    """goal-progress.md (DESIGN §3): iteration | value | Δ baseline | Δ previous best."""
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
    """Seed 004's `#24 [kept]     val_loss 0.991 -> 0.987  "Reduce weight decay"` line."""
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


# --- the end of the run ------------------------------------------------------------------


def report(records: list[dict[str, Any]], key: str, branch: str, reason: str | None) -> str:
    """Seed 004's "Autoresearch Complete" summary."""
    c = counts(records)
    start = records[0]["metric_value"]
    final = records[-1]["best_value"]
    rel = ""
    if start not in (None, 0) and final is not None:
        word = "improvement" if final != start else "change"
        rel = f" ({abs(final - start) / abs(start):.1%} {word})"
    lines = [
        "## Autoresearch Complete",
        "",
        f"- Experiments run: {c['total']}",
        f"- Improvements found: {c['improvements']}",
        f"- Failed experiments: {c['errors']}",
        f"- Starting baseline: {key} = {fmt(start)}",
        f"- Final baseline: {key} = {fmt(final)}{rel}",
        f"- Branch: {branch}",
        f"- Stopped: {reason or 'finished'}",
        "",
        "### Improvements (chronological)",
    ]
    kept = [r for r in records if r["status"] == KEPT]
    lines += [
        f"{i}. Exp {r['iteration']}: {r['hypothesis']} -- {key} {fmt(r['baseline_value'])} -> "
        f"{fmt(r['metric_value'])}"
        for i, r in enumerate(kept, 1)
    ] or ["(none)"]
    lines += ["", "### Notable Failed Experiments"]
    failed = [r for r in records if r["iteration"] > 0 and r["status"] != KEPT]
    for r in failed[-10:]:
        if r["metric_value"] is not None:
            lines.append(
                f"- Exp {r['iteration']}: {r['hypothesis']} -- {key} {fmt(r['baseline_value'])} -> "
                f"{fmt(r['metric_value'])} ({r['status']})"
            )
        else:
            err = (r.get("error") or r["status"]).strip().splitlines()[0][:120]
            lines.append(f"- Exp {r['iteration']}: {r['hypothesis']} -- {r['status']} ({err})")
    if not failed:
        lines.append("(none)")
    return "\n".join(lines) + "\n"


def plot(records: list[dict[str, Any]], key: str, direction: str, out: Path) -> None:
    """Metric per iteration, kept ones highlighted, the running best as a step line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    measured = [r for r in records if r["metric_value"] is not None]
    others = [r for r in measured if r["status"] != KEPT and r["iteration"] > 0]
    kept = [r for r in measured if r["status"] == KEPT]
    ax.scatter(
        [r["iteration"] for r in others],
        [r["metric_value"] for r in others],
        color="0.6",
        s=18,
        label="discarded",
    )
    ax.scatter(
        [r["iteration"] for r in kept],
        [r["metric_value"] for r in kept],
        color="tab:green",
        s=40,
        zorder=3,
        label="kept",
    )
    best = [(r["iteration"], r["best_value"]) for r in records if r["best_value"] is not None]
    if best:
        ax.step(
            [b[0] for b in best],
            [b[1] for b in best],
            where="post",
            color="tab:blue",
            label="running best",
        )
        ax.axhline(best[0][1], color="0.3", linestyle="--", linewidth=0.8, label="baseline")
    errors = [r["iteration"] for r in records if r["metric_value"] is None and r["iteration"] > 0]
    if errors and best:
        ax.scatter(
            errors,
            [best[0][1]] * len(errors),
            marker="x",
            color="tab:red",
            label="error (no value)",
        )
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"{key} ({'lower' if direction == 'minimize' else 'higher'} is better)")
    ax.set_title("Experiment progress")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)

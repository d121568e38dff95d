"""The cost ledger: what each stage's model calls used and cost, in `usage.tsv`.

One row per (track, cycle, team). Rerunning a stage replaces its row rather than adding
one, so the session total counts what the finished session consists of; the spend of
abandoned attempts is visible in the stage logs, not double-counted here.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from pathlib import Path

from .backends.base import StageRun, Usage
from .files import locked, write_text

USAGE_FILE = "usage.tsv"
COLUMNS = [
    "track",
    "cycle",
    "team",
    "model",
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "cost_usd",
    "stop_reason",
    "timestamp",
]
_PRICE_KEYS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_creation_input_tokens": "cache_write",
    "cache_read_input_tokens": "cache_read",
}


def model_prices(model: str, prices: dict) -> dict | None:
    """The price entry for a model; a dated id (claude-x-4-5-20250929) uses its alias's entry."""
    if model in prices:
        return prices[model]
    aliases = [key for key in prices if model.startswith(f"{key}-")]
    return prices[max(aliases, key=len)] if aliases else None


def price(model: str, usage: Usage, prices: dict) -> float:
    """USD for `usage` at the spec's prices (per million tokens); 0.0 for an unknown model."""
    entry = model_prices(model, prices)
    if not entry:
        return 0.0
    total = sum(
        getattr(usage, field) * float(entry.get(key, 0.0) or 0.0)
        for field, key in _PRICE_KEYS.items()
    )
    return total / 1_000_000


def read_rows(session_dir: Path) -> list[dict[str, str]]:
    path = Path(session_dir) / USAGE_FILE
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def record_stage(
    session_dir: Path, *, track: str, cycle: str, team: str, model: str, run: StageRun
) -> None:
    """Write the stage's row to usage.tsv, replacing an earlier row for the same stage."""
    session_dir = Path(session_dir)
    usage = run.usage
    row = {
        "track": track,
        "cycle": cycle,
        "team": team,
        "model": model,
        "requests": str(usage.requests),
        "input_tokens": str(usage.input_tokens),
        "output_tokens": str(usage.output_tokens),
        "cache_write_tokens": str(usage.cache_creation_input_tokens),
        "cache_read_tokens": str(usage.cache_read_input_tokens),
        "cost_usd": f"{usage.cost_usd:.6f}",
        "stop_reason": run.stop_reason,
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    key = (track, cycle, team)
    # Broad-mode tracks may finish stages at the same moment; serialise the rewrite.
    with locked(session_dir / f"{USAGE_FILE}.lock"):
        rows = [r for r in read_rows(session_dir) if (r["track"], r["cycle"], r["team"]) != key]
        rows.append(row)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, COLUMNS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows({c: r.get(c, "") for c in COLUMNS} for r in rows)
        write_text(session_dir / USAGE_FILE, buffer.getvalue())


def session_totals(session_dir: Path) -> Usage:
    """Usage and cost summed over every stage recorded so far."""
    total = Usage()
    for row in read_rows(session_dir):
        total.add(
            Usage(
                input_tokens=int(row["input_tokens"] or 0),
                output_tokens=int(row["output_tokens"] or 0),
                cache_creation_input_tokens=int(row["cache_write_tokens"] or 0),
                cache_read_input_tokens=int(row["cache_read_tokens"] or 0),
                cost_usd=float(row["cost_usd"] or 0.0),
                requests=int(row["requests"] or 0),
            )
        )
    return total


def budget_exceeded(session_dir: Path, max_cost_usd: float | None) -> str | None:
    """Why the session must stop for budget, or None while it is under `budget.max_cost_usd`."""
    if max_cost_usd is None:
        return None
    spent = session_totals(session_dir).cost_usd
    if spent >= max_cost_usd:
        return (
            f"session cost ${spent:.4f} has reached budget.max_cost_usd = ${max_cost_usd:.4f}; "
            "raise budget.max_cost_usd in the session spec to continue"
        )
    return None

"""The cost ledger: what every model request used and cost, in `usage.tsv`.

Rows are appended as they happen and never rewritten: one per model request (written by
the backend as each reply arrives) and one that ends each agent run (its stop reason, and
any usage a backend reported without streaming it per request). So the spend of a stage
that fails, is rerun or redone still counts in the totals and in the budget.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime
from pathlib import Path

from autoresearch.agents.backends.base import StageRun, Usage
from autoresearch.session.files import append_line, locked

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
REQUEST = "request"  # the stop_reason column of a request's row
_TOKENS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
}
_PRICE_KEYS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_creation_input_tokens": "cache_write",
    "cache_read_input_tokens": "cache_read",
}


def model_prices(model: str, prices: dict) -> dict | None:
    """The entry for a model in a per-model table (`prices`, `models`); a dated id
    (claude-x-4-5-20250929) uses its alias's entry."""
    if model in prices:
        return prices[model]
    aliases = [key for key in prices if model.startswith(f"{key}-")]
    return prices[max(aliases, key=len)] if aliases else None


def price(model: str, usage: Usage, prices: dict) -> float | None:
    """USD for `usage` at the spec's prices (per million tokens); None for a model without
    a price: its cost is unknown, never $0."""
    entry = model_prices(model, prices)
    if not entry:
        return None
    # A count below zero (a server's arithmetic, not usage) costs nothing, never a refund.
    total = sum(
        max(0, getattr(usage, field)) * float(entry.get(key, 0.0) or 0.0)
        for field, key in _PRICE_KEYS.items()
    )
    # 1-hour cache writes cost more than the 5-minute writes counted above at cache_write:
    # the difference, at cache_write_1h (Anthropic's price list: twice the input price).
    one_hour = min(max(0, usage.cache_write_1h_tokens), max(0, usage.cache_creation_input_tokens))
    if one_hour:
        input_price = float(entry.get("input", 0.0) or 0.0)
        rate = float(entry.get("cache_write_1h", 2 * input_price) or 0.0)
        total += one_hour * (rate - float(entry.get("cache_write", 0.0) or 0.0))
    return total / 1_000_000


def _row(track: str, cycle: str, team: str, model: str, usage: Usage, stop: str) -> dict:
    row = {"track": track, "cycle": cycle, "team": team, "model": model}
    row |= {column: str(getattr(usage, field)) for field, column in _TOKENS.items()}
    row["requests"] = str(usage.requests)
    # A request to a model without a price has no cost, not a cost of 0.
    row["cost_usd"] = "" if usage.unpriced else f"{usage.cost_usd:.6f}"
    row["stop_reason"] = stop
    row["timestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return row


def _append(session_dir: Path, row: dict) -> None:
    path = Path(session_dir) / USAGE_FILE
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, delimiter="\t", lineterminator="\n")
    # Broad tracks finish requests at the same moment: one writer at a time.
    with locked(Path(session_dir) / f"{USAGE_FILE}.lock"):
        if not path.exists():
            writer.writeheader()
        writer.writerow(row)
        append_line(path, buffer.getvalue().rstrip("\n"))


def record_request(
    session_dir: Path, *, track: str, cycle: str, team: str, model: str, usage: Usage
) -> None:
    """One model request's usage, as soon as its reply is in."""
    _append(session_dir, _row(track, cycle, team, model, usage, REQUEST))


def record_stage(
    session_dir: Path,
    *,
    track: str,
    cycle: str,
    team: str,
    model: str,
    run: StageRun,
    streamed: Usage | None = None,
) -> None:
    """The row that ends an agent run: its stop reason, and whatever of `run.usage` was
    not already recorded request by request (`streamed`)."""
    rest = run.usage.minus(streamed) if streamed is not None else run.usage
    _append(session_dir, _row(track, cycle, team, model, rest, run.stop_reason))


def session_totals(session_dir: Path) -> Usage:
    """Usage and cost summed over every row so far (requests of unpriced models counted)."""
    path = Path(session_dir) / USAGE_FILE
    if not path.exists():
        return Usage()
    # A few rows a cycle, read with the csv module that wrote them (pandas cost a third of
    # a second to import, in the stage that asks for the budget left).
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    tokens = dict.fromkeys(_TOKENS, 0)
    costs: list[float] = []
    requests = unpriced = 0
    for row in rows:
        for field, column in _TOKENS.items():
            tokens[field] += _whole(row.get(column))
        asked = _whole(row.get("requests"))
        requests += asked
        cost = (row.get("cost_usd") or "").strip()
        if cost:
            costs.append(float(cost))
        else:
            unpriced += max(0, asked)  # a model without a price: its cost is unknown
    return Usage(**tokens, cost_usd=math.fsum(costs), requests=requests, unpriced=unpriced)


def _whole(cell: str | None) -> int:
    """A count cell (an empty one: 0)."""
    return int(cell) if cell and cell.strip() else 0


def budget_exceeded(session_dir: Path, max_cost_usd: float | None) -> str | None:
    """Why the session must stop for budget, or None while it is under `budget.max_cost_usd`."""
    if max_cost_usd is None:
        return None
    spent = session_totals(session_dir)
    if spent.unpriced:
        return (
            f"{spent.unpriced} model requests have no price in the spec's `prices`, so the "
            f"session's cost is unknown and budget.max_cost_usd = ${max_cost_usd:.4f} cannot "
            "be kept; add the model's prices to continue"
        )
    if spent.cost_usd >= max_cost_usd:
        return (
            f"session cost ${spent.cost_usd:.4f} has reached budget.max_cost_usd = "
            f"${max_cost_usd:.4f}; raise budget.max_cost_usd in the session spec to continue"
        )
    return None


def describe(usage: Usage) -> str:
    """Tokens and cost for people: an unknown cost is said, never shown as $0."""
    if not usage.requests and not usage.tokens:
        return "no model requests"  # the ruff or script backend: nothing was spent, not "$0"
    cost = f"${usage.cost_usd:.4f}"
    if usage.unpriced:
        cost += f" + unknown ({usage.unpriced} requests to a model without a price)"
    return f"{usage.tokens} tokens, {cost}"

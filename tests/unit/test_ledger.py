"""The cost ledger: prices from the spec, one row per stage, totals and the session budget."""

from __future__ import annotations

import csv

import pytest

from autoresearch.agents.backends.base import StageRun, Usage
from autoresearch.agents.ledger import (
    COLUMNS,
    budget_exceeded,
    describe,
    price,
    record_request,
    record_stage,
    session_totals,
)

PRICES = {
    "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3},
    "claude-sonnet-4": {"input": 99.0, "output": 99.0, "cache_write": 99.0, "cache_read": 99.0},
}
MILLION = Usage(
    input_tokens=1_000_000,
    output_tokens=1_000_000,
    cache_creation_input_tokens=1_000_000,
    cache_read_input_tokens=1_000_000,
)


def run(cost: float = 0.5, tokens: int = 100, stop: str = "finished") -> StageRun:
    usage = Usage(
        input_tokens=tokens,
        output_tokens=tokens // 2,
        cache_creation_input_tokens=tokens * 3,
        cache_read_input_tokens=tokens * 10,
        cost_usd=cost,
        requests=4,
    )
    return StageRun(usage=usage, turns=4, stop_reason=stop)


def test_price_uses_per_million_rates_for_each_token_kind():
    assert price("claude-sonnet-4-5", MILLION, PRICES) == pytest.approx(3.0 + 15.0 + 3.75 + 0.3)
    assert price("claude-sonnet-4-5", Usage(input_tokens=2000), PRICES) == pytest.approx(0.006)


def test_unknown_model_has_no_price_rather_than_a_price_of_zero():
    assert price("some-local-llama", MILLION, PRICES) is None
    assert price("claude-sonnet-4-5", MILLION, {}) is None


def test_a_dated_model_id_uses_its_alias_price_and_the_longest_alias_wins():
    dated = price("claude-sonnet-4-5-20250929", MILLION, PRICES)
    assert dated == pytest.approx(price("claude-sonnet-4-5", MILLION, PRICES))


def test_a_negative_token_count_is_never_a_negative_cost():
    # As a proxy reports input when it counts more cache reads than prompt tokens.
    odd = Usage(input_tokens=-1_500_000, cache_read_input_tokens=2_000_000)
    assert price("claude-sonnet-4-5", odd, PRICES) == pytest.approx(0.6)


def test_record_stage_writes_the_documented_columns(tmp_path):
    record_stage(tmp_path, track="", cycle="001", team="red", model="m", run=run())
    with open(tmp_path / "usage.tsv", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert list(rows[0]) == COLUMNS
    assert COLUMNS == [
        "track", "cycle", "team", "model", "requests", "input_tokens", "output_tokens",
        "cache_write_tokens", "cache_read_tokens", "cost_usd", "stop_reason", "timestamp",
    ]  # fmt: skip
    row = rows[0]
    assert (row["team"], row["requests"], row["input_tokens"], row["cache_read_tokens"]) == (
        "red", "4", "100", "1000",
    )  # fmt: skip
    assert row["stop_reason"] == "finished" and row["timestamp"].endswith("Z")


def test_rerunning_a_stage_adds_its_spend_and_keeps_the_first_attempts(tmp_path):
    record_stage(tmp_path, track="", cycle="001", team="green", model="m", run=run(cost=1.0))
    record_stage(tmp_path, track="", cycle="001", team="green", model="m", run=run(cost=0.25))
    lines = (tmp_path / "usage.tsv").read_text().splitlines()
    assert len(lines) == 3  # the header and both attempts: that money was spent
    assert session_totals(tmp_path).cost_usd == pytest.approx(1.25)


def test_requests_are_on_record_before_their_stage_ends(tmp_path):
    where = {"track": "", "cycle": "001", "team": "green", "model": "m"}
    one = Usage(input_tokens=10, cost_usd=0.5, requests=1)
    record_request(tmp_path, usage=one, **where)
    record_request(tmp_path, usage=one, **where)
    assert session_totals(tmp_path).cost_usd == pytest.approx(1.0)  # the stage may die now
    both = Usage(input_tokens=20, cost_usd=1.0, requests=2)
    streamed = Usage(input_tokens=20, cost_usd=1.0, requests=2)
    record_stage(tmp_path, run=StageRun(both, 2, "finished"), streamed=streamed, **where)
    total = session_totals(tmp_path)
    assert total.cost_usd == pytest.approx(1.0) and total.requests == 2  # not counted twice


def test_requests_to_an_unpriced_model_make_the_cost_unknown_and_stop_a_budget(tmp_path):
    where = {"track": "", "cycle": "001", "team": "red", "model": "local"}
    record_request(tmp_path, usage=Usage(input_tokens=5, requests=1, unpriced=1), **where)
    total = session_totals(tmp_path)
    assert total.unpriced == 1 and "unknown" in describe(total)
    reason = budget_exceeded(tmp_path, 100.0)
    assert reason is not None and "prices" in reason


def test_totals_sum_over_stages_tracks_and_cycles(tmp_path):
    record_stage(tmp_path, track="", cycle="001", team="red", model="m", run=run(0.5, 100))
    record_stage(tmp_path, track="", cycle="001", team="green", model="m", run=run(0.25, 10))
    record_stage(tmp_path, track="h1", cycle="001", team="red", model="m", run=run(0.125, 1))
    total = session_totals(tmp_path)
    assert total.cost_usd == pytest.approx(0.875)
    assert total.input_tokens == 111
    assert total.cache_read_input_tokens == 1110
    assert total.requests == 12


def test_totals_of_an_empty_session_are_zero(tmp_path):
    assert session_totals(tmp_path) == Usage()


def test_budget(tmp_path):
    assert budget_exceeded(tmp_path, 1.0) is None
    record_stage(tmp_path, track="", cycle="001", team="red", model="m", run=run(0.6))
    assert budget_exceeded(tmp_path, None) is None
    assert budget_exceeded(tmp_path, 1.0) is None
    record_stage(tmp_path, track="", cycle="001", team="green", model="m", run=run(0.4))
    reason = budget_exceeded(tmp_path, 1.0)
    assert reason is not None and "budget.max_cost_usd" in reason and "$1.0000" in reason


def test_a_session_with_no_model_request_says_so_instead_of_a_cost_of_zero():
    assert describe(Usage()) == "no model requests"
    assert describe(Usage(input_tokens=10, requests=1)).startswith("10 tokens, $0.0000")


def test_one_hour_cache_writes_cost_twice_the_input_price_unless_the_spec_says_otherwise():
    usage = Usage(cache_creation_input_tokens=1_000_000, cache_write_1h_tokens=400_000)
    prices = {"m": {"input": 2.0, "output": 10.0, "cache_write": 2.5, "cache_read": 0.2}}
    assert price("m", usage, prices) == pytest.approx(0.6 * 2.5 + 0.4 * 4.0)
    prices["m"]["cache_write_1h"] = 5.0
    assert price("m", usage, prices) == pytest.approx(0.6 * 2.5 + 0.4 * 5.0)

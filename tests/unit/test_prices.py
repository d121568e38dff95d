"""The spec's default price table (config/config.yaml `prices`) against Anthropic's
published prices, entry by entry, and the multipliers docs/cost.md states.

PUBLISHED is copied from each model's page of Anthropic's model documentation (the
`Pricing` box: input, output, 5-minute cache write, 1-hour cache write, cache read, USD
per million tokens), checked 2026-12-04; SOURCES names the page of each entry. When a
price changes, both tables change together, so the test names the entry and the key that
differs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"
PAGES = "https://platform.claude.com/docs/en/models/{}/overview"
PRICING = "https://platform.claude.com/docs/en/about-claude/pricing"

# model -> (input, output, cache_write, cache_write_1h, cache_read)
PUBLISHED: dict[str, tuple[float, float, float, float, float]] = {
    "claude-sonnet-5-5": (2.0, 10.0, 2.5, 4.0, 0.2),
    # Opus 5.5's cache hits are 0.05x its input price, not the usual 0.1x.
    "claude-opus-5-5": (4.0, 20.0, 5.0, 8.0, 0.2),
    "claude-sonnet-5": (2.0, 10.0, 2.5, 4.0, 0.2),
    "claude-opus-5": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 2.0, 0.1),
    "claude-sonnet-4-6": (3.0, 15.0, 3.75, 6.0, 0.3),
    "claude-opus-4-6": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-opus-4-5": (5.0, 25.0, 6.25, 10.0, 0.5),
    "claude-sonnet-4-5": (3.0, 15.0, 3.75, 6.0, 0.3),
}
SOURCES = {
    "claude-sonnet-5-5": PAGES.format("sonnet-5-5"),
    "claude-opus-5-5": PAGES.format("opus-5-5"),
    "claude-sonnet-5": PAGES.format("sonnet-5"),
    "claude-opus-5": PAGES.format("opus-5"),
    **dict.fromkeys(
        ["claude-haiku-4-5", "claude-sonnet-4-6", "claude-opus-4-6", "claude-opus-4-5"], PRICING
    ),
    "claude-sonnet-4-5": PRICING,
}
# Cache hits at other than 0.1x input, as published (docs/cost.md names them).
CACHE_READ_EXCEPTIONS = {"claude-opus-5-5": 0.05}
KEYS = ("input", "output", "cache_write", "cache_write_1h", "cache_read")


def _table() -> dict[str, dict[str, float]]:
    return yaml.safe_load(CONFIG.read_text())["prices"]


def test_every_entry_has_a_published_price_and_its_source():
    assert set(_table()) == set(PUBLISHED) == set(SOURCES)


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_the_entry_is_the_published_price(model):
    entry = _table()[model]
    for key, published in zip(KEYS, PUBLISHED[model], strict=True):
        assert entry[key] == pytest.approx(published), (
            f"prices.{model}.{key} is {entry[key]}; {SOURCES[model]} says {published}"
        )


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_the_entry_keeps_the_multipliers_docs_cost_states(model):
    entry = _table()[model]
    assert entry["cache_write"] == pytest.approx(1.25 * entry["input"])
    assert entry["cache_write_1h"] == pytest.approx(2 * entry["input"])
    read = CACHE_READ_EXCEPTIONS.get(model, 0.1)
    assert entry["cache_read"] == pytest.approx(read * entry["input"])


def test_docs_cost_names_every_cache_read_exception():
    text = (CONFIG.parents[1] / "docs" / "cost.md").read_text()
    for model, factor in CACHE_READ_EXCEPTIONS.items():
        assert model in text and f"{factor:g}x" in text

"""The sequential keep test: looks, levels, decisions, resumption, and its spec keys."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from scipy import stats

from autoresearch.modes.experiment.program import from_frozen, resolve
from autoresearch.modes.experiment.sequential import (
    DISCARD,
    KEEP,
    MEASURE_MORE,
    Design,
    DesignError,
    compare,
    next_step,
)
from autoresearch.session.spec import SpecError


def pairs_with_gains(gains: list[float], base: float = 100.0) -> tuple[list[float], list[float]]:
    """(candidate, incumbent) for a metric to minimise whose per-pair gains are `gains`."""
    return [base - g for g in gains], [base] * len(gains)


def standardised(n: int, seed: int) -> list[float]:
    """n values with mean exactly 0 and sample sd exactly 1."""
    xs = random.Random(seed).choices(range(-50, 51), k=n)
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return [(x - mean) / sd for x in xs]


def noise_source(seed: int, gain: float = 0.0):
    rng = random.Random(seed)

    def take(_: int) -> tuple[float, float]:
        return 100 * (1 - gain) * (1 + rng.gauss(0, 0.05)), 100 * (1 + rng.gauss(0, 0.05))

    return take


# --- looks and levels ---


def test_no_pairs_yet_asks_for_the_screen():
    step = next_step(Design(screen=5), [], [])
    assert (step.action, step.pairs, step.looks) == (MEASURE_MORE, 5, 0)


def test_looks_go_in_batches_and_end_at_the_cap():
    assert Design().looks == (5, 10, 15, 20, 25, 30, 35, 40)
    assert Design(screen=5, max_samples=22, batch=5).looks == (5, 10, 15, 20, 22)
    assert Design(screen=5, max_samples=30, batch=25).looks == (5, 30)


def test_screen_spends_the_pocock_type_share_of_alpha():
    design = Design(screen=5, max_samples=30, alpha=0.05)
    assert design.levels[0] == pytest.approx(0.05 * math.log(1 + (math.e - 1) * 5 / 30))
    assert design.levels[0] < design.final_level < design.alpha


@pytest.mark.parametrize("design", [Design(screen=5, max_samples=30, batch=25), Design()])
def test_the_keep_looks_together_spend_exactly_alpha(design):
    rng = np.random.default_rng(7)
    steps = rng.standard_normal((400_000, design.max_samples))
    sums = steps.cumsum(1)
    kept = np.zeros(len(steps), dtype=bool)
    for n, level in zip(design.looks, design.levels, strict=True):
        kept |= sums[:, n - 1] / math.sqrt(n) > stats.norm.isf(level)
    assert kept.mean() == pytest.approx(0.05, abs=0.0015)  # 4 standard errors


def test_each_look_spends_its_pocock_type_share():
    design = Design()  # looks at 5, 10, ..., 40 pairs
    assert design.levels[0] == pytest.approx(0.05 * math.log(1 + (math.e - 1) * 5 / 40))
    assert list(design.levels) == sorted(design.levels)  # later looks ask less, as Pocock's
    assert design.final_level < design.alpha


# --- decisions at a look ---


def test_clear_winner_is_kept_at_the_screen():
    step = next_step(Design(), *pairs_with_gains([5, 5.2, 4.8, 5.1, 4.9]))
    assert (step.action, step.samples, step.looks) == (KEEP, 5, 1)
    assert "at the screen" in step.reason


def test_clear_loser_is_dropped_at_the_screen():
    step = next_step(Design(), *pairs_with_gains([-1, 0.5, -2, -0.3, -0.8]))
    assert (step.action, step.samples) == (DISCARD, 5)
    assert step.p_value > 0.5 and "dropped" in step.reason


def test_promising_candidate_is_confirmed_with_another_batch():
    step = next_step(Design(), *pairs_with_gains([1, -0.5, 2, 0.3, 0.8]))
    assert (step.action, step.pairs) == (MEASURE_MORE, 5)
    assert Design().levels[0] < step.p_value < 0.5


def test_a_confirm_look_keeps_at_its_own_level():
    gains = [5 + 0.1 * g for g in standardised(10, seed=1)]
    step = next_step(Design(), *pairs_with_gains(gains))
    assert step.p_value < 1e-6
    assert (step.action, step.looks, step.level) == (KEEP, 2, Design().levels[1])
    assert "at look 2 (10 pairs)" in step.reason


def test_p_value_is_the_one_sided_paired_t_test():
    candidate, incumbent = pairs_with_gains([1, -0.5, 2, 0.3, 0.8])
    expected = stats.ttest_rel(incumbent, candidate, alternative="greater").pvalue
    assert next_step(Design(), candidate, incumbent).p_value == pytest.approx(expected)


def test_at_the_cap_a_p_between_the_final_level_and_alpha_is_discarded():
    design = Design(max_samples=30, batch=25)
    t = stats.t.isf(0.045, 29)  # p = 0.045: a fixed 5% test would keep it
    gains = [t / math.sqrt(30) + r for r in standardised(30, seed=3)]
    step = next_step(design, *pairs_with_gains(gains))
    assert step.p_value == pytest.approx(0.045)
    assert step.action == DISCARD and "within noise after 30 pairs" in step.reason


def test_at_the_cap_a_p_below_the_final_level_is_kept():
    t = stats.t.isf(0.03, 29)
    gains = [t / math.sqrt(30) + r for r in standardised(30, seed=3)]
    step = next_step(Design(max_samples=30, batch=25), *pairs_with_gains(gains))
    assert (step.action, step.looks) == (KEEP, 2) and "at the cap" in step.reason


def test_kept_interval_clears_min_effect_and_a_discarded_one_does_not():
    t_keep, t_drop = stats.t.isf(0.03, 29), stats.t.isf(0.045, 29)
    noise = standardised(30, seed=3)
    kept = next_step(
        Design(max_samples=30, batch=25),
        *pairs_with_gains([t_keep / math.sqrt(30) + r for r in noise]),
    )
    dropped = next_step(
        Design(max_samples=30, batch=25),
        *pairs_with_gains([t_drop / math.sqrt(30) + r for r in noise]),
    )
    assert kept.ci[0] > 0 >= dropped.ci[0]
    assert kept.ci[0] < kept.effect < kept.ci[1]
    assert kept.ci_level == pytest.approx(1 - 2 * Design(max_samples=30, batch=25).final_level)


def test_maximize_counts_a_higher_candidate_as_the_gain():
    candidate, incumbent = pairs_with_gains([5, 5.2, 4.8, 5.1, 4.9])
    assert next_step(Design(direction="maximize"), candidate, incumbent).action == DISCARD
    assert next_step(Design(direction="maximize"), incumbent, candidate).action == KEEP


def test_percent_min_effect_raises_the_bar_to_that_share_of_the_incumbent():
    gains = [1.5 + 0.01 * r for r in standardised(5, seed=2)]  # 1.5% of 100, little noise
    assert next_step(Design(), *pairs_with_gains(gains)).action == KEEP
    strict = next_step(Design(min_effect="2%"), *pairs_with_gains(gains))
    assert strict.action == DISCARD and "needed more than 2" in strict.reason


def test_deterministic_metric_is_decided_by_the_sign():
    assert next_step(Design(), [99.0] * 5, [100.0] * 5).action == KEEP
    same = next_step(Design(), [100.0] * 5, [100.0] * 5)
    assert same.action == DISCARD and same.p_value == 1.0


def test_effect_is_reported_in_units_and_relative_to_the_incumbent():
    step = next_step(Design(), *pairs_with_gains([5, 5.2, 4.8, 5.1, 4.9], base=200.0))
    assert step.effect == pytest.approx(5.0)
    assert step.relative_effect == pytest.approx(0.025)


# --- callers' mistakes ---


def test_unequal_sides_are_refused():
    with pytest.raises(ValueError, match="paired samples"):
        next_step(Design(), [1.0] * 5, [1.0] * 4)


def test_more_pairs_than_the_cap_are_refused():
    with pytest.raises(ValueError, match="max_samples"):
        next_step(Design(max_samples=10), [1.0] * 11, [1.0] * 11)


def test_a_non_finite_sample_is_refused():
    with pytest.raises(ValueError, match="finite"):
        next_step(Design(), [1.0, 2.0, math.nan, 1.0, 1.0], [1.0] * 5)


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"screen": 2}, "screen"),
        ({"max_samples": 5}, "max_samples"),
        ({"alpha": 0.5}, "alpha"),
        ({"futility_p": 0}, "futility_p"),
        ({"batch": 0}, "batch"),
        ({"sreen": 5}, "sreen"),
        ("yes", "sequential"),
    ],
)
def test_bad_design_values_name_the_key(spec, key):
    with pytest.raises(DesignError) as err:
        Design.from_spec(spec)
    assert err.value.key == key


# --- the comparison loop ---


def test_pairs_between_looks_are_completed_to_the_next_look():
    step = next_step(Design(), *pairs_with_gains([1, -0.5, 2, 0.3, 0.8, 1, 0.2]))
    assert (step.action, step.pairs, step.looks) == (MEASURE_MORE, 3, 1)


def test_resumed_comparison_measures_only_the_missing_pairs_and_decides_the_same():
    source = noise_source(seed=11, gain=0.03)
    drawn = [source(i) for i in range(40)]
    whole = compare(Design(), lambda i: drawn[i])
    asked: list[int] = []

    def take(i: int) -> tuple[float, float]:
        asked.append(i)
        return drawn[i]

    resumed = compare(Design(), take, [c for c, _ in drawn[:7]], [inc for _, inc in drawn[:7]])
    assert resumed.step == whole.step
    assert asked == list(range(7, whole.step.samples))


def test_false_keeps_on_pure_noise_stay_at_alpha():
    design = Design()
    trials = 1000
    kept = sum(compare(design, noise_source(seed)).step.kept for seed in range(trials))
    assert kept / trials <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / trials)


def test_description_names_the_interval_and_the_samples():
    step = next_step(Design(), *pairs_with_gains([5, 5.2, 4.8, 5.1, 4.9]))
    line = step.describe()
    assert line.startswith(step.reason) and "interval for the gain" in line
    assert line.endswith("5 samples per side over 1 look")


def test_step_record_is_plain_json():
    step = next_step(Design(), *pairs_with_gains([5, 5.2, 4.8, 5.1, 4.9]))
    record = json.loads(json.dumps(step.to_record()))
    assert record["action"] == KEEP and len(record["ci"]) == 2 and record["samples"] == 5


# --- the spec keys ---

BASE = {
    "goal": "g",
    "scope": ["a"],
    "metric": {"command": "m", "direction": "minimize"},
    "max_iterations": 2,
}


def test_sequential_true_takes_the_default_design_and_survives_freezing(tmp_path):
    cfg = resolve({"experiment": BASE | {"sequential": True, "min_effect": "1%"}}, tmp_path, "s")
    assert cfg.sequential == {
        "screen": 5,
        "max_samples": 40,
        "alpha": 0.05,
        "batch": 5,
        "futility_p": 0.5,
        "pool": True,
        "drift_alpha": 0.01,
    }
    thawed = from_frozen(json.loads(json.dumps(cfg.to_spec())))
    assert thawed.sequential_design() == cfg.sequential_design() == Design(min_effect="1%")


def test_no_sequential_key_leaves_the_fixed_repeats_rules(tmp_path):
    cfg = resolve({"experiment": BASE}, tmp_path, "s")
    assert cfg.sequential is None and cfg.sequential_design() is None


def test_a_bad_sequential_value_names_the_nested_key(tmp_path):
    with pytest.raises(SpecError, match=r"key 'experiment\.sequential\.max_samples': must be"):
        resolve({"experiment": BASE | {"sequential": {"max_samples": 4}}}, tmp_path, "s")


@pytest.mark.parametrize("key", ["repeats", "rank_test_alpha"])
def test_sequential_with_fixed_repeats_keys_is_refused(tmp_path, key):
    extra = {"sequential": True, key: 5 if key == "repeats" else 0.05}
    with pytest.raises(SpecError, match=f"key 'experiment.{key}': remove it"):
        resolve({"experiment": BASE | extra}, tmp_path, "s")

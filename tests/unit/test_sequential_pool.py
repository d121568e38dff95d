"""The pooled incumbent: earlier runs narrow the comparison, the drift test drops them when
the machine has moved, trimming keeps load spikes from flattering a candidate, and the loop
hands the right runs to the next comparison."""

from __future__ import annotations

import math
import random

import pytest

from autoresearch.modes.experiment import paired, pool
from autoresearch.modes.experiment.sequential import (
    DISCARD,
    KEEP,
    PAIRED_TEST,
    POOLED_TEST,
    Design,
    compare,
    next_step,
)

NOISE = 0.05


# Pooling is on by default; spelled out, as these tests are about the pool.
POOLED = Design(pool=True)


def noisy(rng: random.Random, true: float, n: int) -> list[float]:
    return [true * (1 + rng.gauss(0, NOISE)) for _ in range(n)]


def no_effect(seed: int, true: float = 100.0):
    """take_pair for a change with no effect: both sides drawn from the same machine."""
    rng = random.Random(seed)
    return lambda i: (true * (1 + rng.gauss(0, NOISE)), true * (1 + rng.gauss(0, NOISE)))


# --- the pool narrows the comparison ---


def test_earlier_incumbent_runs_are_pooled_and_narrow_the_interval():
    rng = random.Random(1)
    candidate, fresh, earlier = noisy(rng, 97, 10), noisy(rng, 100, 10), noisy(rng, 100, 60)
    alone = next_step(POOLED, candidate, fresh)
    pooled = next_step(POOLED, candidate, fresh, earlier)
    assert (alone.test, alone.pooled) == (PAIRED_TEST, 0)
    assert (pooled.test, pooled.pooled) == (POOLED_TEST, 60)
    width = lambda s: s.ci[1] - s.ci[0]  # noqa: E731
    assert width(pooled) < 0.8 * width(alone)
    assert "70 of the incumbent (60 pooled from earlier comparisons)" in pooled.describe()


def test_by_default_the_earlier_runs_are_pooled():
    """The random-effects pool meets alpha under drift and spikes (bench_experiment_noise)."""
    rng = random.Random(2)
    candidate, fresh, earlier = noisy(rng, 97, 10), noisy(rng, 100, 10), noisy(rng, 100, 60)
    step = next_step(Design(), candidate, fresh, earlier)
    assert step.test == POOLED_TEST and step.pooled == 60


def test_pool_false_ignores_the_earlier_runs():
    rng = random.Random(2)
    candidate, fresh, earlier = noisy(rng, 97, 10), noisy(rng, 100, 10), noisy(rng, 100, 60)
    step = next_step(Design(pool=False), candidate, fresh, earlier)
    assert step == next_step(Design(pool=False), candidate, fresh)
    assert step.test == PAIRED_TEST and step.drift_p is None


def test_pooled_incumbent_mean_is_what_the_candidate_was_compared_with():
    step = next_step(
        POOLED, [95.0, 96, 94, 95, 95.5], [100.0, 99, 101, 100, 100.5], [99.5, 100, 100.5] * 7
    )
    assert step.incumbent_mean == pytest.approx(100.0, abs=0.3)
    assert step.kept


# --- drift: the fresh runs disagree with the pool ---


def test_a_machine_that_got_faster_drops_the_pool_and_the_fresh_pairs_decide():
    # The earlier runs were taken on a machine 10% slower: against them a change with no
    # effect would look 10% faster. The fresh incumbent runs show the machine moved.
    rng = random.Random(3)
    earlier = noisy(rng, 110, 40)
    result = compare(POOLED, no_effect(4), earlier=earlier)
    step = result.step
    assert step.pool_dropped and step.drift_p < POOLED.drift_alpha
    assert step.test == PAIRED_TEST and step.pooled == 0
    assert step.action == DISCARD
    assert "pool of 40 earlier incumbent runs from 1 comparison dropped" in step.reason
    assert "drift test at the screen" in step.reason


def test_without_the_drift_test_the_random_effects_pool_gives_a_moved_pool_little_weight():
    # The same runs with the drift test off: the spread between the earlier block and the
    # fresh runs is itself the evidence that the pool describes another machine.
    rng = random.Random(3)
    earlier = noisy(rng, 110, 40)
    step = compare(Design(pool=True, drift_alpha=1e-300), no_effect(4), earlier=earlier).step
    assert step.test == POOLED_TEST and step.action == DISCARD
    assert step.pool_weight < 0.1 and step.between_sd > 5


def test_once_dropped_the_pool_stays_dropped_at_later_looks():
    earlier = [110.0 + (i % 5) for i in range(40)]
    fresh = [100.0, 101, 99, 100.5, 99.5]  # far from the pool at the screen
    fresh += [112.0, 111, 110, 113, 109]  # back in line with it at the next look
    candidate = [c + 1 for c in fresh]
    step = next_step(Design(pool=True, futility_p=1.0), candidate, fresh, earlier)
    assert step.samples == 10 and step.pool_dropped and step.test == PAIRED_TEST


def test_a_random_walk_drift_is_caught_more_often_the_further_it_went():
    # The pool holds the runs of one iteration; the machine then walks by `shift` before the
    # next comparison. Small shifts keep the pool, large ones drop it.
    def dropped(shift: float, seed: int) -> bool:
        rng = random.Random(seed)
        earlier = noisy(rng, 100, 20)
        xs, ys = noisy(rng, 100 * (1 + shift), 10), noisy(rng, 100 * (1 + shift), 10)
        return next_step(Design(pool=True, futility_p=1.0), xs, ys, earlier).pool_dropped

    assert sum(dropped(0.0, s) for s in range(200)) <= 8  # drift_alpha 0.01, some looks
    assert sum(dropped(0.15, s) for s in range(200)) >= 190


# --- load spikes ---


def test_load_spikes_in_the_pool_do_not_make_a_change_with_no_effect_look_better():
    rng = random.Random(5)
    earlier = noisy(rng, 100, 40)
    for i in (3, 17, 29):
        earlier[i] *= 4  # three runs hit by load, 4x slower
    result = compare(POOLED, no_effect(6), earlier=earlier)
    assert result.step.test == POOLED_TEST and not result.step.kept
    assert result.step.incumbent_mean == pytest.approx(100, abs=2.5)  # trimmed: no spike in it


def spiky_comparisons(design: Design, seed: int, gain: float, loops: int) -> list:
    """Comparisons against one incumbent, 10 per loop, the pool growing as in the loop."""
    rng = random.Random(seed)

    def run(true: float) -> tuple[float, None]:
        value = true * (1 + rng.gauss(0, NOISE))
        return (value * rng.uniform(2, 5) if rng.random() < 0.03 else value), None

    steps = []
    for _ in range(loops):
        earlier: list[list[float]] = []
        for _ in range(10):
            measured = paired.compare(
                design,
                lambda: {"ok": True},
                lambda: run(100 * (1 - gain)),
                lambda: run(100),
                earlier=earlier,
            )
            step = measured["sequential"]
            steps.append(step)
            fresh = measured["incumbent_samples"]
            earlier = [fresh] if step["pool_dropped"] else [*earlier, fresh]
    return steps


def test_false_keeps_under_load_spikes_stay_at_alpha():
    steps = spiky_comparisons(POOLED, seed=7, gain=0.0, loops=60)
    rate = sum(s["action"] == KEEP for s in steps) / len(steps)
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / len(steps))


# --- a drifting machine ---


def drifting_comparisons(design: Design, seed: int, gain: float, loops: int) -> list[dict]:
    """Comparisons against one incumbent, 10 per loop, on a machine whose speed is a random
    walk of 5% (sd) per iteration: a step after each of 80 run slots, the slots a comparison
    leaves unused passing while the agent works (bench_experiment_noise's drift model)."""
    rng = random.Random(seed)
    slots, step_sd = 80, NOISE / math.sqrt(80)
    level, used = [1.0], [0]

    def run(true: float) -> tuple[float, None]:
        value = true * level[0] * (1 + rng.gauss(0, NOISE))
        level[0] *= 1 + rng.gauss(0, step_sd)
        used[0] += 1
        return value, None

    steps = []
    for _ in range(loops):
        earlier: list[list[float]] = []
        for _ in range(10):
            measured = paired.compare(
                design,
                lambda: {"ok": True},
                lambda: run(100 * (1 - gain)),
                lambda: run(100),
                earlier=earlier,
            )
            step = measured["sequential"]
            steps.append(step)
            fresh = measured["incumbent_samples"]
            earlier = [fresh] if step["pool_dropped"] else [*earlier, fresh]
            for _ in range(max(0, slots - used[0])):
                level[0] *= 1 + rng.gauss(0, step_sd)
            used[0] = 0
    return steps


def test_false_keeps_on_a_drifting_machine_stay_near_alpha_with_the_pool():
    # 400 comparisons of a change that does nothing; the pool as flat runs kept 10% here.
    steps = drifting_comparisons(POOLED, seed=11, gain=0.0, loops=40)
    rate = sum(s["action"] == KEEP for s in steps) / len(steps)
    assert rate < 0.08


def test_the_random_effects_pool_follows_a_machine_that_moved_without_the_drift_test():
    # Four earlier comparisons a few percent apart, today's runs 6% faster than their mean:
    # the blocks' spread says the pool knows little about today, and it counts for little.
    rng = random.Random(12)
    earlier = [noisy(rng, level, 10) for level in (104, 98, 103, 99)]
    fresh, candidate = noisy(rng, 95, 10), noisy(rng, 95, 10)
    step = next_step(
        Design(pool=True, drift_alpha=1e-300, futility_p=1.0), candidate, fresh, earlier
    )
    assert step.test == POOLED_TEST and not step.pool_dropped
    assert step.incumbent_mean == pytest.approx(95, abs=2.5)
    assert not step.kept
    assert step.pool_weight < 0.5 and step.between_sd > 1


def test_a_steady_machines_blocks_count_in_full():
    rng = random.Random(13)
    earlier = [noisy(rng, 100, 10) for _ in range(6)]
    step = next_step(POOLED, noisy(rng, 97, 10), noisy(rng, 100, 10), earlier)
    assert step.between_sd == 0 and step.pool_weight > 0.8


def test_a_drift_seen_only_after_the_screen_does_not_switch_to_the_paired_test():
    # Switching tests at a later look gives a change two tries at a keep, each at the full
    # level; after the screen the random-effects weight follows today's runs instead.
    design = Design(screen=3, batch=7, max_samples=17, pool=True, futility_p=1.0)
    earlier = [[100.0 + (i % 5) - 2 for i in range(10)] for _ in range(3)]
    fresh = [100.0, 101, 99]  # in line with the pool at the screen
    fresh += [85.0, 86, 84, 85.5, 84.5, 85.2, 84.8]  # far from it at the next look
    candidate = [f - 0.5 for f in fresh]
    step = next_step(design, candidate, fresh, earlier)
    assert step.samples == 10 and not step.pool_dropped and step.test == POOLED_TEST
    assert step.pool_weight < 0.5


def test_the_decision_records_the_drop_and_says_so():
    rng = random.Random(3)
    earlier = [noisy(rng, 110, 20), noisy(rng, 111, 20)]
    take = no_effect(4)
    pairs = iter(take(i) for i in range(40))
    measured = paired.compare(
        POOLED,
        lambda: {"ok": True},
        lambda: (next(pairs)[0], None),
        lambda: (100 * (1 + random.Random(9).gauss(0, NOISE)), None),
        earlier=earlier,
    )
    rec: dict = {}
    status, why = paired.judge(measured, rec, None)
    assert rec["sequential"]["pool_dropped"] is True
    assert rec["sequential"]["test"] == PAIRED_TEST and rec["sequential"]["pooled"] == 0
    assert rec["sequential"]["drift_p"] < POOLED.drift_alpha
    assert "pool of 40 earlier incumbent runs from 2 comparisons dropped" in why
    assert "drift test at the screen p=" in why


def test_a_pooled_decision_says_how_much_the_pool_weighed():
    rng = random.Random(14)
    earlier = [noisy(rng, 100, 10) for _ in range(3)]
    step = next_step(POOLED, noisy(rng, 99, 5), noisy(rng, 100, 5), earlier)
    assert step.test == POOLED_TEST
    assert f"30 earlier incumbent runs from 3 comparisons weigh {step.pool_weight:.0%}" in (
        step.reason
    )
    assert set(step.to_record()) >= {"pool_weight", "between_sd"}


# --- which runs the next comparison pools ---


def record(commit: str, fresh: list[float], machine: str = "m", dropped: bool = False) -> dict:
    return {
        "start_commit": commit,
        "machine": machine,
        "incumbent_samples": fresh,
        "sequential": {"pool_dropped": dropped},
    }


def test_the_pool_holds_the_incumbents_runs_since_it_became_the_incumbent():
    recs = [record("a", [1.0, 2.0]), record("b", [3.0]), record("b", [4.0, 5.0])]
    assert pool.earlier_runs(recs, "b", "m") == [[3.0], [4.0, 5.0]]  # one block a comparison


def test_runs_on_another_machine_class_are_not_pooled():
    recs = [record("b", [3.0], machine="other"), record("b", [4.0])]
    assert pool.earlier_runs(recs, "b", "m") == [[4.0]]


def test_the_pool_restarts_where_the_drift_test_dropped_it():
    recs = [record("b", [3.0]), record("b", [4.0], dropped=True), record("b", [5.0])]
    assert pool.earlier_runs(recs, "b", "m") == [[4.0], [5.0]]


def test_a_batchs_candidates_each_add_their_incumbent_runs():
    batch = {
        "start_commit": "b",
        "candidates": [record("?", [1.0]), record("?", [2.0]), {"status": "crash"}],
    }
    assert pool.earlier_runs([batch], "b", "m") == [[1.0], [2.0]]


def test_a_comparison_without_the_sequential_test_adds_nothing():
    recs = [{"start_commit": "b", "machine": "m", "incumbent_samples": [9.0]}]
    assert pool.earlier_runs(recs, "b", "m") == []


def test_machine_class_names_the_architecture_and_the_cores():
    import os
    import platform

    assert platform.machine() in pool.machine_class()
    assert pool.machine_class().endswith(f"x{os.cpu_count()}")

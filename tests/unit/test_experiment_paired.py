"""The sequential keep decision's measuring: the guard before any metric run, the sides
alternating pair by pair, and the record the decide stage judges."""

from __future__ import annotations

import json
import random

from autoresearch.measure.metrics import MetricError
from autoresearch.modes.experiment import paired
from autoresearch.modes.experiment.policy import CRASH, DISCARDED, GUARD_FAILED, KEPT
from autoresearch.modes.experiment.sequential import Design

PASS = {"ok": True, "timed_out": False, "exit_code": 0, "tail": ""}
FAIL = {"ok": False, "timed_out": False, "exit_code": 1, "tail": "1 failed", "duration_s": 0.4}


def sides(calls: list[str], candidate: float, incumbent: float, noise: float = 0.02, seed=7):
    rng = random.Random(seed)

    def run(name: str, true: float):
        def one():
            calls.append(name)
            return true * (1 + rng.gauss(0, noise)), {"v": name}

        return one

    return run("candidate", candidate), run("incumbent", incumbent)


def guard_of(calls: list[str], result: dict):
    def guard():
        calls.append("guard")
        return result

    return guard


def test_the_guard_runs_before_any_metric_run():
    calls: list[str] = []
    cand, inc = sides(calls, 90.0, 100.0)
    paired.compare(Design(), guard_of(calls, PASS), cand, inc)
    assert calls[0] == "guard" and calls.count("guard") == 1


def test_a_failing_guard_spends_no_metric_run():
    calls: list[str] = []
    cand, inc = sides(calls, 90.0, 100.0)
    measured = paired.compare(Design(), guard_of(calls, FAIL), cand, inc)
    assert calls == ["guard"] and "samples" not in measured
    rec: dict = {}
    status, why = paired.judge(measured, rec, "pytest")
    assert status == GUARD_FAILED and "no metric run spent" in why


def test_pairs_alternate_which_side_runs_first():
    calls: list[str] = []
    cand, inc = sides(calls, 100.0, 100.0)
    paired.compare(Design(futility_p=1.0), guard_of(calls, PASS), cand, inc)
    runs = calls[1:]
    pairs = [tuple(runs[i : i + 2]) for i in range(0, len(runs), 2)]
    assert len(pairs) >= 10
    expected = [("incumbent", "candidate"), ("candidate", "incumbent")] * len(pairs)
    assert pairs == expected[: len(pairs)]


def test_a_clear_gain_is_kept_with_its_p_value_effect_interval_and_pairs():
    calls: list[str] = []
    cand, inc = sides(calls, 90.0, 100.0)
    measured = paired.compare(Design(), guard_of(calls, PASS), cand, inc)
    rec: dict = {}
    status, why = paired.judge(measured, rec, None)
    assert status == KEPT and rec["improved"] is True
    assert rec["pairs"] == 5 == len(rec["samples"]) == len(rec["incumbent_samples"])
    assert rec["p_value"] < rec["sequential"]["level"]
    low, high = rec["ci"]
    assert low < rec["effect"] < high and rec["effect"] > 0
    assert "interval for the gain" in why and "5 samples per side" in why
    json.dumps(rec)  # goes into decision.json as it is


def test_no_effect_is_discarded_and_logged_not_improved():
    calls: list[str] = []
    cand, inc = sides(calls, 100.0, 100.0, seed=3)
    measured = paired.compare(Design(), guard_of(calls, PASS), cand, inc)
    rec: dict = {}
    status, _ = paired.judge(measured, rec, None)
    assert status == DISCARDED and rec["improved"] is False
    assert rec["pairs"] == len(calls[1:]) // 2


def test_a_metric_run_that_fails_is_a_crash_with_the_pairs_taken_before_it():
    calls: list[str] = []
    cand, inc = sides(calls, 100.0, 100.0)

    def broken():
        if calls.count("candidate") >= 3:
            raise MetricError("`python measure.py` exited 1")
        return cand()

    measured = paired.compare(Design(), guard_of(calls, PASS), broken, inc)
    rec: dict = {}
    status, _ = paired.judge(measured, rec, None)
    assert status == CRASH and "exited 1" in rec["error"] and rec["pairs"] == 3


def test_a_batch_under_the_sequential_test_keeps_the_largest_paired_gain():
    batch = [
        {"candidate": "c1", "status": KEPT, "effect": 4.0},
        {"candidate": "c2", "status": KEPT, "effect": 9.0},
        {"candidate": "c3", "status": DISCARDED, "effect": 20.0},
        {"candidate": "c4", "status": KEPT, "effect": 9.0},
    ]
    assert paired.pick(batch)["candidate"] == "c2"
    assert paired.pick([batch[2]]) is None

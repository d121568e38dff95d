"""A run's summary.md: the score trend, the best result and next steps read from the data."""

from __future__ import annotations

from autoresearch.modes.experiment.summary import best_trend, next_steps, render


def rec(iteration, status, value, best, error=None):
    return {
        "iteration": iteration,
        "status": status,
        "metric_value": value,
        "baseline_value": None,
        "error": error,
        "best": {"value": best, "experiment_id": 0, "commit": "c" * 40},
    }


BASE = rec(0, "baseline", 100.0, 100.0)


def test_a_plateau_says_widen_the_scope():
    recs = [BASE, rec(1, "kept", 90.0, 90.0)] + [
        rec(i, "discarded", 95.0, 90.0) for i in range(2, 7)
    ]
    steps = next_steps(recs, "minimize")
    assert (
        steps[0].startswith("plateau: nothing kept in the last 5") and "widen the scope" in steps[0]
    )


def test_many_crashes_say_fix_the_evaluator_and_quote_the_last_error():
    recs = [BASE, rec(1, "kept", 90.0, 90.0), rec(2, "crash", None, 90.0, "boom\nmore")]
    recs.append(rec(3, "crash", None, 90.0, "ImportError: numpy"))
    steps = next_steps(recs, "minimize")
    assert "many crashes: 2 of the last 3" in steps[0] and "fix the evaluator" in steps[0]
    assert "ImportError: numpy" in steps[0]
    assert not any(s.startswith("plateau") for s in steps)  # crashes are not a plateau


def test_recent_keeps_say_run_longer_with_the_gain_so_far():
    recs = [BASE, rec(1, "discarded", 101.0, 100.0), rec(2, "kept", 80.0, 80.0)]
    assert next_steps(recs, "minimize") == [
        "still improving: 1 kept of the last 2 (+20.0% over the baseline so far); run longer"
    ]


def test_a_reached_target_comes_first_and_no_run_has_an_empty_advice():
    recs = [BASE, rec(1, "kept", 50.0, 50.0)]
    assert next_steps(recs, "minimize", target_reached=True)[0].startswith("the target is reached")
    assert next_steps([BASE], "minimize") == ["no experiment has been decided yet"]


def test_the_summary_shows_the_best_trend_and_the_best_result():
    recs = [BASE, rec(1, "kept", 90.0, 90.0), rec(2, "discarded", 95.0, 90.0)]
    assert best_trend(recs) == [100.0, 90.0, 90.0]
    text = render(recs, "ms", "minimize", "r-1", "running", "autoresearch/experiment/r")
    assert "100 → 90 → 90" in text
    assert "- Best: ms = 90 (experiment 0, commit cccccccccccc), +10.0% over the baseline" in text
    assert "| 2 | 95 | discarded |" in text and "## Recommended next steps" in text


def test_the_report_says_why_a_measured_experiment_was_not_kept():
    # wcwidth: "ns_per_lookup 385.06 -> 276.99 (discarded)" read as a 28% gain thrown away.
    from autoresearch.modes.experiment.report import report

    base = {**BASE, "hypothesis": "baseline", "best_value": 385.06, "metric_value": 385.06}
    why = "better median, but within noise (rank test p=0.095)"
    tried = {
        **rec(1, "discarded", 276.99, 385.06),
        "hypothesis": "Use bisect",
        "baseline_value": 385.06,
        "verdict": why,
        "best_value": 385.06,
    }
    text = report([base, tried], "ns", "b", None)
    assert f"- Exp 1: Use bisect -- ns 385.06 -> 276.99 (discarded: {why})" in text

"""Lens coverage and stopping: the saturation rule never ends a run while a category is untested
(except at the cap), and the security and scenario pickers choose the documented next target."""

from __future__ import annotations

import pytest

from autoresearch.agents.backends import ruff_security
from autoresearch.checks.finding_schema import OWASP_2021, SCENARIO_DIMENSIONS, STRIDE
from autoresearch.modes.lens.saturation import (
    Iteration,
    coverage,
    is_saturated,
    next_dimension,
    next_security_vector,
    nothing_new_streak,
    security_coverage,
    security_vectors,
    stop_reason,
)

CATEGORIES = ["a", "b", "c"]


def log_of(*pairs):
    return [Iteration(category, new) for category, new in pairs]


def test_stop_reason_goes_on_while_a_category_is_untested_even_after_empty_iterations():
    log = log_of(("a", 0), ("a", 0), ("b", 0), ("b", 0))
    assert nothing_new_streak(log) == 4
    assert stop_reason(log, CATEGORIES, cap=20) is None


def test_stop_reason_stops_after_window_empty_iterations_once_all_are_tested():
    log = log_of(("a", 2), ("b", 0), ("c", 0), ("a", 0))
    assert stop_reason(log, CATEGORIES, cap=20) == (
        "saturated: 3 iterations in a row added nothing new"
    )


def test_stop_reason_goes_on_when_a_recent_iteration_found_something():
    log = log_of(("a", 0), ("b", 0), ("c", 1), ("a", 0), ("b", 0))
    assert stop_reason(log, CATEGORIES, cap=20) is None


def test_stop_reason_window_comes_from_the_spec():
    log = log_of(("a", 1), ("b", 0), ("c", 0))
    assert stop_reason(log, CATEGORIES, cap=20, window=2) is not None
    assert stop_reason(log, CATEGORIES, cap=20, window=3) is None


def test_stop_reason_stops_at_the_cap_even_with_untested_categories():
    log = log_of(("a", 1), ("a", 1))
    assert stop_reason(log, CATEGORIES, cap=2) == "iteration cap (2) reached"


def test_stop_reason_stops_when_every_category_is_saturated_on_its_own():
    # Interleaved finds keep the global streak short; each category is still exhausted.
    log = log_of(("a", 0), ("a", 0), ("a", 0), ("b", 0), ("b", 0), ("b", 0))
    log += log_of(("z", 1), ("c", 0), ("c", 0), ("z", 1), ("c", 0))
    assert nothing_new_streak(log) < 3
    assert stop_reason(log, CATEGORIES, cap=50) == "every category saturated"


def test_stop_reason_for_a_to_do_list_stops_once_each_is_tried():
    log = log_of(("lead-1", 1), ("lead-2", 1))
    assert stop_reason(log, ["lead-1", "lead-2"], cap=15, stop_when_all_tested=True) == (
        "every category tested"
    )


def test_stop_reason_refuses_a_window_below_one():
    with pytest.raises(ValueError, match="at least 1"):
        stop_reason([], CATEGORIES, cap=5, window=0)


def test_coverage_counts_iterations_and_new_findings_per_category():
    counts = coverage(log_of(("a", 2), ("a", 0), ("c", 1)), CATEGORIES)
    assert [(c, n.iterations, n.new) for c, n in counts.items()] == [
        ("a", 2, 2),
        ("b", 0, 0),
        ("c", 1, 1),
    ]


def test_is_saturated_needs_window_empty_iterations_of_that_category():
    assert not is_saturated(log_of(("a", 0), ("a", 0)), "a")
    assert is_saturated(log_of(("a", 1), ("a", 0), ("b", 3), ("a", 0), ("a", 0)), "a")


# --- security ---


def test_security_vectors_put_stride_on_critical_assets_then_owasp_then_the_rest():
    keys = [v.key for v in security_vectors(["login"])]
    assert keys[:6] == [f"stride:login:{s}" for s in STRIDE]
    assert keys[6:16] == [f"owasp:{o}" for o in OWASP_2021]
    assert keys[16:] == ["dependencies", "config", "business-logic"]


def test_security_vectors_use_the_whole_system_when_no_asset_is_critical():
    assert security_vectors([])[0].key == "stride:system:S"


def test_next_security_vector_takes_the_first_untested_one():
    log = [Iteration(v.key, 0) for v in security_vectors(["db"])[:7]]
    assert next_security_vector(log, ["db"]).key == "owasp:A02"


def test_next_security_vector_after_all_tried_takes_the_least_tried_most_fruitful():
    vectors = security_vectors(["db"])
    log = [Iteration(v.key, 0) for v in vectors]
    log += [Iteration(v.key, 0) for v in vectors if v.key not in ("config", "owasp:A05")]
    log.append(Iteration("config", 2))
    assert next_security_vector(log, ["db"]).key == "owasp:A05"
    log.append(Iteration("owasp:A05", 0))
    assert next_security_vector(log, ["db"]).key == "config"


def test_security_coverage_counts_owasp_of_ten_and_stride_of_six():
    log = log_of(("stride:db:S", 0), ("stride:api:T", 1), ("owasp:A03", 2), ("owasp:A01", 0))
    measured = security_coverage(log)
    assert measured.owasp == ("A01", "A03")
    assert measured.stride == ("S", "T")
    assert str(measured) == "OWASP 2/10, STRIDE 2/6"


def test_vector_describe_names_the_category():
    assert security_vectors(["db"])[1].describe() == "STRIDE T (Tampering) on the asset 'db'"
    assert security_vectors(["db"])[8].describe() == "OWASP A03:2021 Injection"


# --- scenario ---


def test_next_dimension_starts_with_the_happy_path():
    assert next_dimension([]) == "happy-path"


def test_next_dimension_picks_the_least_covered_dimension():
    log = [Iteration(d, 1) for d in SCENARIO_DIMENSIONS]
    log[4] = Iteration("scale", 0)
    assert next_dimension(log) == "scale"


def test_next_dimension_never_picks_the_same_dimension_a_fourth_time_in_a_row():
    log = [Iteration(d, 5) for d in SCENARIO_DIMENSIONS if d != "abuse"]
    log += [Iteration("abuse", 0), Iteration("abuse", 1), Iteration("abuse", 1)]
    # abuse is still the least covered, but it ran the last three iterations.
    assert next_dimension(log) == "happy-path"
    assert next_dimension(log[:-1]) == "abuse"


def test_next_dimension_skips_a_saturated_dimension():
    log = [Iteration(d, 1) for d in SCENARIO_DIMENSIONS]
    log += [Iteration("time", 0), Iteration("errors", 1)] * 3
    assert is_saturated(log, "time")
    assert next_dimension(log) != "time"


def test_next_dimension_is_none_when_every_dimension_is_saturated():
    log = [Iteration(d, 0) for _ in range(3) for d in SCENARIO_DIMENSIONS]
    assert next_dimension(log) is None


def test_a_category_the_auditor_has_no_check_for_is_not_covered_by_trying_it():
    # The ruff backend's S rules map to no OWASP A04 (insecure design) at all.
    log = log_of(("owasp:A03", 0), ("owasp:A04", 0), ("stride:db:S", 0))
    measured = security_coverage(log, ruff_security.reach())
    assert measured.owasp == ("A03",) and measured.stride == ("S",)
    assert security_coverage(log).owasp == ("A03", "A04")  # a model reads the code for any

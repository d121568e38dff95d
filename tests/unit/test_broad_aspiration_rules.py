"""Broad mode's aspiration metric without Snakemake: the spec check, and how the metric
ranks the tracks and shows in comparison.md."""

from __future__ import annotations

import pytest
from test_broad_rules import GIVEN, base_values, full_result

from autoresearch.modes.broad import Broad
from autoresearch.modes.broad.comparison import ranking, render_comparison
from autoresearch.session.plan import check_values
from autoresearch.session.spec import SpecError

MINIMIZE = {"label": "TODOs", "command": "python measure.py", "direction": "minimize", "base": 5}


def started(tmp_path, values: dict) -> None:
    """The spec as a session start checks it: the schema, then broad's own keys."""
    check_values("s", {"target": str(tmp_path), **values}, Broad())


def measured(r: dict, value: float | None, error: str | None = None) -> dict:
    return r | {"aspiration_metric": {"value": value, "samples": [], "error": error}}


def compare(tracks: list[dict], metric: dict | None = MINIMIZE) -> tuple[dict, str]:
    data = ranking(tracks, "/repo", metric)
    ranked = [data["tracks"][hid] for hid in data["ranking"]]
    return data, render_comparison("s", "x", "abc", "/repo", ranked, data)


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ("python m.py", r"key 'aspiration_metric': 'python m.py' is not of type 'object'"),
        ({"direction": "minimize"}, r"required key 'aspiration_metric.command' is not set"),
        ({"command": "  ", "direction": "minimize"}, r"key 'aspiration_metric.command' is not"),
        ({"command": "python m.py"}, r"required key 'aspiration_metric.direction' is not set"),
        ({"command": "m", "direction": "lower"}, r"'aspiration_metric.direction'.*'lower'"),
        ({"command": "m", "direction": "maximize", "format": "xml"}, r"'aspiration_metric.format'"),
        ({"command": "m", "direction": "maximize", "repeats": 0}, r"'aspiration_metric.repeats'"),
        ({"command": "m", "direction": "maximize", "timeout_s": -1}, r"'aspiration_metric.timeout"),
    ],
)
def test_a_start_refuses_an_incomplete_aspiration_metric(tmp_path, metric, message):
    values = base_values(hypotheses=GIVEN, aspiration_metric=metric)
    with pytest.raises(SpecError, match=r"^(--config|config/sessions/s.yaml): .*" + message):
        started(tmp_path, values)


def test_the_metric_ranks_ahead_of_fixes_kept():
    data, text = compare(
        [
            measured(full_result("h1", "bold", 3, 5, "t1"), 4),
            measured(full_result("h2", "obvious", 1, 9, "t2"), 2),
        ]
    )
    assert data["ranking"] == ["h2", "h1"]
    assert data["decided_by"] == {
        "criterion": "the aspiration metric",
        "tie": False,
        "text": "decided by the aspiration metric (h2 over h1: 2 against 4)",
    }
    assert "Chosen by: decided by the aspiration metric (h2 over h1: 2 against 4)." in text


def test_maximize_ranks_the_higher_value_first():
    data, _ = compare(
        [
            measured(full_result("h1", "bold", 1, 5, "t1"), 4),
            measured(full_result("h2", "bold", 1, 5, "t2"), 7),
        ],
        MINIMIZE | {"direction": "maximize"},
    )
    assert data["ranking"] == ["h2", "h1"]


def test_a_failed_measurement_ranks_after_every_measured_track_and_is_no_number():
    data, text = compare(
        [
            measured(full_result("h1", "bold", 5, 5, "t1"), None, "exit status 1"),
            measured(full_result("h2", "obvious", 1, 9, "t2"), 1e9),
        ]
    )
    assert data["ranking"] == ["h2", "h1"]
    assert data["decided_by"]["text"] == (
        "decided by the aspiration metric "
        "(h2 over h1: 1e+09 against measurement failed (exit status 1))"
    )
    assert "| h1 | measurement failed (exit status 1) |  |" in text


def test_a_metric_tie_is_a_tie_decided_by_fixes_kept():
    data, text = compare(
        [
            measured(full_result("h1", "bold", 1, 5, "t1"), 3),
            measured(full_result("h2", "obvious", 2, 9, "t2"), 3),
        ]
    )
    assert data["decided_by"]["tie"] is True
    assert "Chosen by: tie on the aspiration metric, decided by fixes kept (h2 over h1)." in text


def test_a_tie_on_metric_and_fixes_names_both():
    _, text = compare(
        [
            measured(full_result("h1", "obvious", 2, 5, "t1"), 3),
            measured(full_result("h2", "bold", 2, 9, "t2"), 3),
        ]
    )
    assert "tie on the aspiration metric and fixes kept, decided by category (h2 over h1)" in text


def test_comparison_md_shows_the_base_and_each_tips_value():
    _, text = compare(
        [
            measured(full_result("h1", "bold", 1, 5, "t1"), 3),
            measured(full_result("h2", "obvious", 1, 9, "t2"), 6),
        ]
    )
    section = text.split("## Aspiration metric")[1].split("## Winner")[0]
    assert "`python measure.py` (TODOs, minimize)" in section
    assert "| base | 5 | |" in section
    assert "| h1 | 3 | -2 |" in section and "| h2 | 6 | +1 |" in section
    assert "reads 3 on its tip, 5 on the base" in text


def test_two_failed_measurements_are_no_tie_on_a_number():
    data, text = compare(
        [
            measured(full_result("h1", "bold", 1, 5, "t1"), None, "exit 1"),
            measured(full_result("h2", "obvious", 2, 9, "t2"), None, "exit 2"),
        ]
    )
    assert data["decided_by"]["text"] == (
        "tie on the aspiration metric (neither could be measured), decided by fixes kept "
        "(h2 over h1)"
    )


def test_a_winner_no_better_than_the_base_is_said_to_be():
    _, text = compare(
        [
            measured(full_result("h1", "bold", 1, 5, "t1"), 5),
            measured(full_result("h2", "obvious", 1, 9, "t2"), 8),
        ]
    )
    assert "No track improved on the base's value." in text
    _, text = compare([measured(full_result("h1", "bold", 1, 5, "t1"), 4)])
    assert "No track improved" not in text


def test_the_deciding_line_says_when_winner_and_runner_up_share_a_tree():
    data, text = compare(
        [
            measured(full_result("h1", "obvious", 2, 5, "same"), 3),
            measured(full_result("h2", "bold", 2, 5, "same"), 3),
        ]
    )
    assert data["decided_by"]["tie"] is True
    assert (
        "Chosen by: tie on the aspiration metric and fixes kept, decided by category "
        "(h2 over h1); both ended on the same tree, so the choice changes nothing in the code."
    ) in text


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"aspiration_judge": 3}, r"key 'aspiration_judge': 3 is not of type 'object'"),
        ({"aspiration_judge": {"panel": 0}}, r"key 'aspiration_judge.panel': 0 is less than"),
        ({"aspiration_judge": {"panel": 10}}, r"key 'aspiration_judge.panel': 10 is greater"),
        ({"aspiration_judge": {"panel": True}}, r"key 'aspiration_judge.panel': True is not"),
        ({"aspiration_judge": {}, "agent": {"backend": "ruff"}}, r"'ruff' cannot judge"),
    ],
)
def test_a_start_refuses_a_judge_panel_that_cannot_run(tmp_path, values, message):
    spec = base_values(hypotheses=GIVEN, aspiration="Be kind.") | values
    with pytest.raises(SpecError, match=r"^(--config|config/sessions/s.yaml): .*" + message):
        started(tmp_path, spec)


def test_a_judge_panel_needs_the_aspiration_it_weighs_against():
    spec = base_values(hypotheses=GIVEN, aspiration_judge={"panel": 3})
    with pytest.raises(SpecError, match=r"key 'aspiration_judge' needs key 'aspiration'"):
        Broad().setup.check_spec(spec, "s")


def judged(r: dict, met: int, panel: int = 3) -> dict:
    return r | {
        "judges": {"met": met, "not_met": panel - met, "panel": panel, "score": met / panel}
    }


def test_the_metric_ranks_ahead_of_the_judges_and_a_tie_on_both_names_both():
    tracks = [
        measured(judged(full_result("h1", "bold", 1, 5, "t1"), 3), 4),
        measured(judged(full_result("h2", "bold", 1, 5, "t2"), 0), 2),
    ]
    data = ranking(tracks, "/repo", MINIMIZE, True)
    assert data["ranking"] == ["h2", "h1"]  # the number first, the opinion after
    tracks = [
        measured(judged(full_result("h1", "bold", 2, 5, "t1"), 1), 3),
        measured(judged(full_result("h2", "bold", 1, 5, "t2"), 1), 3),
    ]
    data = ranking(tracks, "/repo", MINIMIZE, True)
    assert data["decided_by"]["text"] == (
        "tie on the aspiration metric and the judges' votes, decided by fixes kept (h1 over h2)"
    )


def test_why_names_every_tied_criterion_in_one_list():
    _, text = compare(
        [
            measured(full_result("h1", "bold", 2, 5, "t1"), 3),
            measured(full_result("h2", "bold", 2, 5, "t2"), 3),
        ]
    )
    assert "ties with h2 on the aspiration metric, fixes kept, category and diff size;" in text

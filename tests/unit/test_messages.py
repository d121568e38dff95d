"""The words of messages: an article that fits the mode, a noun that agrees with its count."""

from __future__ import annotations

import pytest

from autoresearch.safety.words import a_or_an, count
from autoresearch.session import spec
from autoresearch.session import start as session
from autoresearch.views import journal


def test_counts_and_articles_agree():
    assert [count(n, "refactor change") for n in (0, 1, 2)] == [
        "0 refactor changes",
        "1 refactor change",
        "2 refactor changes",
    ]
    assert count(1, "fix") == "1 fix" and count(3, "fix") == "3 fixes"
    assert [a_or_an(m) for m in ("experiment", "sweep", "ideas")] == [
        "an experiment",
        "a sweep",
        "an ideas",
    ]


def test_a_backend_refusal_says_an_experiment_session():
    merged = spec.Spec({"mode": "experiment", "agent": {"backend": "ruff"}}, {})
    with pytest.raises(spec.SpecError) as err:
        session.check_backend_plays(merged.values, {"experiment"}, merged)
    assert "an experiment session needs" in str(err.value)
    assert "a experiment" not in str(err.value)


def test_session_md_counts_one_refactor_change_and_one_reverted_commit():
    line = journal.cycle_line(
        {"cycle": 1, "fixed": [], "skipped": [], "refactor_changes": 1, "reverted": ["abc"]}
    )
    assert "1 refactor change," in line and "reverted 1 commit " in line


def test_the_review_line_quotes_a_target_path_with_spaces(tmp_path):
    import shlex

    from autoresearch.modes.base import review_line
    from autoresearch.session.record import SetupRecord

    target = tmp_path / "my repo"
    record = SetupRecord(
        name="s", mode="sweep", version="0", target=str(target), stack=None, test_command="t",
        linter_command=None, branch="autoresearch/s", base_commit="a" * 40, baseline={},
        date="d", config_file=None, conventions="",
    )  # fmt: skip
    line = review_line(record)
    words = shlex.split(line.removeprefix("review with: "))
    assert words[:3] == ["git", "-C", str(target)] and words[-1] == f"{'a' * 12}..autoresearch/s"

"""Learn keeps a doc only when everything it says about the code holds.

A higher score alone is not enough: a doc whose only reference is a function that does not
exist scores 0.50 (its size check passes, its symbol check fails), up from 0.00 for no doc.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoresearch.modes.learn.doc_checks import check_doc
from autoresearch.modes.learn.stages import verdict


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("def total(items):\n    return sum(items)\n")
    return tmp_path


def test_a_doc_naming_a_function_that_does_not_exist_is_not_kept(worktree):
    report = check_doc("docs/overview.md", "Call `shop.refund` to pay back.\n", worktree)
    assert report.score == 0.5  # the score rose from 0.00 all the same
    keep, why = verdict(True, report, 0.0, report.score)
    assert not keep
    assert why == "it names what the code does not have: symbol shop.refund"


def test_a_doc_whose_references_hold_is_kept_when_its_score_rose(worktree):
    report = check_doc("docs/overview.md", "Call `shop.total` for the sum.\n", worktree)
    assert verdict(True, report, 0.0, report.score) == (True, "score rose from 0.00 to 1.00")


def test_a_doc_too_long_but_true_is_judged_by_its_score(worktree):
    text = "Call `shop.total`.\n" + "more\n" * 10
    report = check_doc("docs/overview.md", text, worktree, max_lines=5)
    keep, why = verdict(True, report, 0.6, report.score)
    assert not keep and why.startswith("score did not rise")


def test_an_unwritten_doc_is_not_kept():
    assert verdict(False, None, 0.0, 0.0) == (False, "the doc was not written")

"""What `autoresearch finalize` prints for each review set: "tests pass" only when the set's
tests ran and passed; a set kept against a failing base says it brings no new failure."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from autoresearch.gate.testrun import FAILED, PASSED, TestRun
from autoresearch.gate.verdict import Verdict
from autoresearch.session.changesets import Commit, ReviewLoop
from autoresearch.session.finalize import ReviewSet, report


def run_of(outcome: str) -> TestRun:
    failed = 1 if outcome == FAILED else 0
    return TestRun(
        "pytest", "pytest", outcome, "", 1, failed, 0, 0,
        frozenset({"t::a"} if failed else ()), frozenset({"t::b"}), failed, 1.0, "", "junit",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("outcome", "label"), [(PASSED, "[tests pass]"), (FAILED, "[no new failures]")]
)
def test_a_kept_set_says_tests_pass_only_when_they_passed(tmp_path: Path, outcome, label):
    review = ReviewSet(
        loop=ReviewLoop("", "autoresearch/improve", "b" * 40),
        commits=[Commit("a" * 40, "fix: [F-001] Split imports", "", ("m.py",))],
        number=1,
        branch="autoresearch/s/review/1-split-imports",
        run=run_of(outcome),
        verdict=Verdict(True, "no test fails that did not fail before"),
    )
    session = SimpleNamespace(folder=tmp_path, target=tmp_path, layout=SimpleNamespace(name="s"))
    said: list[str] = []
    report(session, [review], False, "origin", said.append)
    assert label in "\n".join(said)

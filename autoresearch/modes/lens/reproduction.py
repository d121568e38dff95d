"""The debug lens's mechanical confirmation: whether a reproduction test's run confirms a bug,
and a hypothesis's identity.

Rule: a bug is confirmed only when its reproduction — a scratch test run by the harness with the
target's test runner — ran and failed on the current tree: the runner exited non-zero, its
output reports at least one failed test, and nothing failed to load (a collection error, a
suite that could not run, a build failure). A passing reproduction leaves the hypothesis
unconfirmed; one that did not run is inconclusive. Either way the finding stays a lead, and after
MAX_ATTEMPTS unconfirmed reproductions the hypothesis is abandoned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autoresearch.checks.finding_schema import title_key
from autoresearch.session.stack import parse_test_output

MAX_ATTEMPTS = 3
# Signs that the test did not run at all, per runner (pytest, Jest, Go, cargo).
_DID_NOT_LOAD = re.compile(
    r"^ERROR\s|\berrors? during collection\b|\bTest suite failed to run\b|"
    r"\[(?:build|setup) failed\]|^error(?:\[E\d+\])?: could not compile",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Reproduction:
    verdict: str  # confirmed | not-reproduced | inconclusive
    reason: str

    @property
    def confirmed(self) -> bool:
        return self.verdict == "confirmed"


def judge_reproduction(output: str, exit_code: int | None) -> Reproduction:
    """The verdict on one run of a reproduction test (see the module docstring)."""
    counts = parse_test_output(output, exit_code)
    if exit_code is None:
        return Reproduction("inconclusive", "the reproduction timed out")
    if _DID_NOT_LOAD.search(output):
        return Reproduction("inconclusive", "the reproduction did not load: " + counts.summary)
    if exit_code == 0:
        return Reproduction("not-reproduced", "the reproduction passes on the current tree")
    if counts.parsed and counts.failed:
        return Reproduction("confirmed", f"the reproduction fails: {counts.summary}")
    return Reproduction("inconclusive", f"no failed test in the output ({counts.summary})")


def hypothesis_key(hypothesis: str) -> str:
    """A hypothesis's identity: its normalized text (case and punctuation do not count)."""
    return title_key(hypothesis)

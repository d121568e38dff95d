"""Which files make up narrow mode's measurement, so that no agent can edit them.

A goal met by editing the benchmark is no goal met: the script a measurement command
runs, the Makefile of `make bench`, and (by default) the target's tests are protected.
"""

from __future__ import annotations

from autoresearch.session.stack import TEST_RUNNER_FILES

from .goal import Goal

# What counts as a test file when `goal.protect_tests` is on (an agent must not
# make the goal "met" by weakening them), with what decides which tests run.
TEST_GLOBS = [
    *TEST_RUNNER_FILES,
    "tests",
    "test",
    "spec",
    "__tests__",
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*_spec.rb",
]


def protected_paths(goal: Goal, existing: list[str], measurement: list[str]) -> list[str]:
    """The session's protected paths: the spec's, the measurement's files (measured.py),
    and the tests unless `goal.protect_tests` is off."""
    extra = list(measurement)
    if goal.protect_tests:
        extra += TEST_GLOBS
    return list(dict.fromkeys([*existing, *extra]))


def labels(goal: Goal, existing: list[str]) -> dict[str, str]:
    """Where each protected path that no command ran came from, for `status`."""
    out = {p: "test files (goal.protect_tests)" for p in TEST_GLOBS if goal.protect_tests}
    return out | {p: "spec key protected" for p in existing}

"""What a cycle of red → sanitize → green → refactor → evaluate adds to its decision: the
record evaluate makes (the full test run, the reverts, what was fixed, skipped and left
open), which sweep writes as it is and narrow and broad extend (modes/narrow, modes/broad).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoresearch.engine.loop import Extra, absent


@dataclass(frozen=True)
class CycleStep(Extra):
    """A cycle's keys of decision.json beyond the common ones (loop.Decision)."""

    tests_pass: bool  # the gate's word, not the exit code's
    test_summary: str
    test_verdict: str
    tests_removed: list[str]  # test ids gone, allowed by allow_test_removal
    broken: bool  # the tests broke and reverting did not bring them back
    reverted: list[dict[str, Any]]  # {commit, subject, how, why?}, in the order undone
    findings: int  # Red's count
    red_categories: list[str]  # the checklist categories Red found something in
    next_finding_id: int
    fixed: list[dict[str, Any]]  # {id, key, commit, summary, message}, kept on the branch
    skipped: list[dict[str, Any]]  # {id, key, reason}
    refactor_changes: int
    files_changed: list[str]
    commits_total: int  # on the loop's branch since its base
    session_stop: str | None  # a stage's or the budget's reason to end the session
    open: list[dict[str, Any]]  # {id, key, reason}: skipped findings carried forward
    open_rechecked: bool  # `open` was re-checked on the tree (a backend that can look again)
    open_issues: list[str]  # `open` as session.md lists it
    # The cycle's own run, before reverts: its summary and the gate's word on it.
    first_test_summary: str | None = absent()
    first_test_verdict: str | None = absent()
    goal_check: str | None = absent()  # stop 7's answer (a qualitative goal)
    judge_votes: list[dict[str, Any]] | None = absent()  # stop 7's panel, when it was asked
    # Refactor had no file it may change (the ruff backend, a target without the formatter)
    refactor_idle: bool | None = absent()

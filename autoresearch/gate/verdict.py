"""The test gate's judgement: whether a change whose run is `after` may be kept, by test
identity against the run where the change started (`acceptable`), and what it lost."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from autoresearch.gate.testrun import (
    FAILED,
    NOT_RUN,
    PASSED,
    TAMPERED,
    TIMED_OUT,
    UNCHECKED,
    TestRun,
    exit_text,
)

IDS_SHOWN = 10  # failing ids named in a reason before "and N more"


@dataclass(frozen=True)
class Verdict:
    """Whether a change may be kept, why, and the tests it was allowed to remove."""

    ok: bool
    reason: str
    removed: tuple[str, ...] = ()  # test ids let go by allow_test_removal


# What became of a test of the start that no longer passes.
FAILS_NOW = "failed or errored"
SKIPPED_NOW = "skipped or xfailed"
GONE = "not reported (deselected, not collected, renamed, or its parametrize id changed)"
# A failing id that names no test: a Go package that did not build, a crashed cargo binary, a
# Jest suite that did not load, a pytest collection error. Fixing it makes it go away.
_NOT_A_TEST = re.compile(r" \[[^\]]+\]$")


def regressions(baseline: TestRun, after: TestRun) -> set[str] | None:
    """Tests failing after a change that did not fail in the baseline, by id; None when either run
    has no ids (the caller then asks for a run that passes outright).

    A test the change added counts too: it did not fail before, and a change must not bring in a
    failing test any more than break a passing one.
    """
    usable = (PASSED, FAILED)
    if baseline.outcome not in usable or after.outcome not in usable:
        return None
    if baseline.failing_ids is None or after.failing_ids is None:
        return None
    return set(after.failing_ids - baseline.failing_ids)


def lost_tests(start: TestRun, after: TestRun) -> dict[str, str] | None:
    """The tests of `start` that `after` no longer has as it had them, each with what became of
    it: one that passed and does not pass now, one that failed and is neither failing nor
    passing now (a known-bad test deleted is no fix). None when either run names no passing
    tests."""
    if start.passing_ids is None or after.passing_ids is None:
        return None
    failing_now = after.failing_ids or frozenset()
    skipped_now = after.skipped_ids or frozenset()

    def fate(test_id: str) -> str:
        if test_id in failing_now:
            return FAILS_NOW
        return SKIPPED_NOW if test_id in skipped_now else GONE

    lost = {t: fate(t) for t in start.passing_ids - after.passing_ids}
    for test_id in (start.failing_ids or frozenset()) - after.passing_ids - failing_now:
        if not _NOT_A_TEST.search(test_id):
            lost[test_id] = fate(test_id)
    return lost


def acceptable(
    after: TestRun,
    baseline: TestRun | None,
    allow_failing_baseline: bool = False,
    allow_test_removal: bool = False,
) -> Verdict:
    """Whether a change whose test run is `after` may be kept; `baseline` is the run of the
    tree the change started from.

    The gate judges test identity: every test that passed at the start must pass after, by id
    (a test skipped, deselected, no longer collected or renamed counts as gone), and only
    `allow_test_removal` lets one go, named in the verdict. With a green start the run must
    also pass outright; with a failing one (allowed only by `allow_failing_baseline`) no test
    may fail that did not fail at the start. Without ids the counts are compared (fewer passing
    tests is never a pass), and a runner that gives neither is said to be unchecked. A run that
    did not get to its tests, or timed out, is never acceptable.
    """
    if after.outcome == TIMED_OUT:
        return Verdict(False, f"the test run timed out after {after.duration_s:.0f} s")
    if after.outcome == NOT_RUN:
        return Verdict(False, f"no test ran: {after.cause} ({exit_text(after.exit_code)})")
    if after.outcome == TAMPERED:
        return Verdict(False, f"tampered run, not kept: {after.cause}")
    if after.outcome == UNCHECKED:
        return Verdict(False, f"unchecked run, not kept: {after.cause}")
    if after.outcome == PASSED:
        held = f"tests pass ({after.summary})"
    else:
        failing_before = (
            allow_failing_baseline and baseline is not None and baseline.outcome == FAILED
        )
        if not failing_before:
            return Verdict(False, f"tests fail: {failure_detail(after)}")
        new = regressions(baseline, after)
        if new is None:
            return Verdict(
                False,
                f"tests fail ({failure_detail(after)}) and the failing tests cannot be compared "
                "with the baseline's by id, so the suite must pass outright",
            )
        if new:
            return Verdict(False, f"tests that did not fail before fail now: {name_ids(new)}")
        still = len(after.failing_ids or ())
        held = f"no test fails that did not fail before ({still} still failing from the baseline)"
    if baseline is None:
        return Verdict(True, held)
    return _same_tests(after, baseline, held, allow_test_removal)


def graded_verdict(
    graded: TestRun,
    as_left: TestRun,
    reference: TestRun,
    edits: dict[str, str],
    allow_failing_baseline: bool = False,
    allow_test_removal: bool = False,
    allow_test_edits: bool = False,
    inputs: tuple[str, ...] = (),
) -> Verdict:
    """Whether a change may be kept on its graded runs (docs/safety.md "How the gate grades
    a change"): `graded`, the run with the start's tests laid over the change, and
    `as_left`, the run of the change as it left its tests. A test whose code the change
    edited (`edits`, by test) keeps it out unless `allow_test_edits`; the change's own
    tests must pass; every test of the start must pass in the graded run. `inputs`: files
    outside the test folders the start's tests read, laid over too (named when it fails)."""
    allow = (allow_failing_baseline, allow_test_removal)
    edited = ""
    if edits and not allow_test_edits:
        named = "; ".join(f"{test}: {why}" for test, why in sorted(edits.items())[:IDS_SHOWN])
        more = f" and {len(edits) - IDS_SHOWN} more" if len(edits) > IDS_SHOWN else ""
        edited = (
            f"the change edits the expectation of tests that existed where it started "
            f"({named}{more}); a test's expectation may change only with "
            "allow_test_edits: true"
        )
    also = f"; {edited}" if edited else ""
    own = acceptable(as_left, reference, *allow)
    if not own.ok:
        return Verdict(False, f"the change's tests, as it left them: {own.reason}{also}")
    # A test the change removed (allowed) is not held in the start's run either.
    held = _without(reference, frozenset(own.removed))
    start = acceptable(_start_tests_only(graded, held), held, *allow)
    if not start.ok:
        shown = ", ".join(inputs[:IDS_SHOWN]) + (" …" if len(inputs) > IDS_SHOWN else "")
        read = f" (with what they read as the start had it: {shown})" if inputs else ""
        return Verdict(
            False, f"the tests of the change's start, laid over it{read}: {start.reason}{also}"
        )
    if edited:
        return Verdict(False, edited)
    allowed = (
        f"; tests edited, allowed by allow_test_edits: {', '.join(sorted(edits))}" if edits else ""
    )
    return Verdict(
        True,
        f"{start.reason} (the tests of the change's start, laid over it); the change's "
        f"tests as it left them: {own.reason}{allowed}",
        own.removed,
    )


def _without(run: TestRun, removed: frozenset[str]) -> TestRun:
    """`run` with `removed` no longer among its tests."""
    if not removed:
        return run

    def drop(ids: frozenset[str] | None) -> frozenset[str] | None:
        return None if ids is None else ids - removed

    return replace(run, passing_ids=drop(run.passing_ids), failing_ids=drop(run.failing_ids))


def _start_tests_only(run: TestRun, start: TestRun) -> TestRun:
    """A graded run judged on the start's tests: a test the change added that fails there
    (it may need a helper the change extended, which the graded run has as the start had
    it) is the other run's to judge, run as the change left it."""
    known = (start.passing_ids or frozenset()) | (start.failing_ids or frozenset())
    if run.outcome != FAILED or run.failing_ids is None or start.passing_ids is None:
        return run
    failing = frozenset(
        i for i in run.failing_ids if i in known or i.endswith("[collection error]")
    )
    if failing == run.failing_ids:
        return run
    if failing:
        return replace(run, failing_ids=failing, failed=len(failing))
    return replace(
        run,
        outcome=PASSED,
        cause="the start's tests passed",
        failing_ids=failing,
        failed=0,
        errors=0,
    )


def _same_tests(after: TestRun, start: TestRun, held: str, allow_removal: bool) -> Verdict:
    """`held` (the run passes as it must) stands only if no test of `start` went missing."""
    lost = lost_tests(start, after)
    if lost:
        broken = any(fate == FAILS_NOW for fate in lost.values())
        if broken or not allow_removal:
            return Verdict(
                False,
                "tests that passed where the change started do not pass now: "
                + describe_lost(lost)
                + ("" if broken else "; removing a test needs allow_test_removal: true"),
            )
        removed = tuple(sorted(lost))
        return Verdict(
            True,
            f"{held}; {len(removed)} test(s) removed, allowed by allow_test_removal: "
            + describe_lost(lost),
            removed,
        )
    if lost is not None:
        return Verdict(True, held)
    if start.passing_ids is not None:
        # Whatever made this run stop naming its tests (a config that turns the report off)
        # also hides which of them are gone.
        return Verdict(
            False,
            f"this run names no tests where the run at the change's start named "
            f"{len(start.passing_ids)} passing, so whether they still pass cannot be checked",
        )
    before, now = start.passed, after.passed
    if before is not None and now is None:
        return Verdict(
            False,
            f"this run counts no tests where the run at the change's start counted {before} "
            "passing, so whether they still pass cannot be checked",
        )
    if before is not None and now is not None:
        if now < before:
            if not allow_removal:
                return Verdict(
                    False,
                    f"{now} tests pass where {before} passed at the change's start (the runner "
                    "names no tests, so which are gone cannot be said); removing a test needs "
                    "allow_test_removal: true",
                )
            return Verdict(
                True,
                f"{held}; {before - now} fewer passing tests than at the change's start, "
                "allowed by allow_test_removal (the runner names no tests)",
            )
        return Verdict(True, f"{held}; compared by count only: the runner names no tests")
    return Verdict(
        True,
        f"{held}, unchecked: the runner gives no test ids or counts, so a test skipped or "
        "removed would go unseen",
    )


def describe_lost(lost: dict[str, str]) -> str:
    """The lost tests grouped by what became of them, each group capped as name_ids caps."""
    groups: dict[str, set[str]] = {}
    for test_id, fate in lost.items():
        groups.setdefault(fate, set()).add(test_id)
    order = (FAILS_NOW, SKIPPED_NOW, GONE)
    return "; ".join(f"{fate}: {name_ids(groups[fate])}" for fate in order if fate in groups)


def name_ids(ids: set[str] | frozenset[str]) -> str:
    """At most IDS_SHOWN ids, sorted, then "and N more"."""
    shown = sorted(ids)[:IDS_SHOWN]
    text = ", ".join(shown)
    if len(ids) > IDS_SHOWN:
        text += f" and {len(ids) - IDS_SHOWN} more"
    return text


def failure_detail(run: TestRun) -> str:
    if run.failing_ids:
        return name_ids(run.failing_ids)
    return f"{exit_text(run.exit_code)}: {run.cause}"


def tests_word(decision: dict[str, Any], baseline: dict[str, Any]) -> str:
    """How `done` says a decision's tests went: pass or FAIL, and when what fails is only
    what already failed at the base (`baseline`, setup's record), that it is."""
    if decision.get("tests_pass"):
        return "pass"
    failing = set((decision.get("tests") or {}).get("failing_ids") or ())
    before = set(baseline.get("failing_ids") or ())
    if decision.get("broken") or not failing or not failing <= before:
        return "FAIL"
    n = len(failing)
    if failing == before:
        return f"FAIL (the same {n} test{'s' if n != 1 else ''} as at the base)"
    return f"FAIL ({n} of the {len(before)} tests that failed at the base; no other)"

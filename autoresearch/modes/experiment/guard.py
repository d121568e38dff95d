"""The experiment's guard: what a change must pass besides beating the metric.

- `experiment.guard: <command>`: the spec's own guard, judged by its exit code.
- No guard key: the target's test command (the session's `test_command`, set or
  detected) is the guard, judged as the test gate judges a change: by test identity
  against the run where the change started (verdict.acceptable). A test the change
  deletes, skips, renames or deselects is no pass, nor is a new failing test; a test that
  already failed there may stay failing (its ids are the baseline, not a refusal).
- `guard: none` turns the guard off, and session.md says so.

A metric is the agent's target; the target's own tests are what keeps a faster program
a correct one, so a session never runs without them unless the spec says so.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from autoresearch.gate import overlay
from autoresearch.gate.testrun import TIMED_OUT, TestRun, run_tests
from autoresearch.gate.verdict import acceptable, graded_verdict
from autoresearch.measure import metrics
from autoresearch.safety import commands
from autoresearch.safety.commands import CommandResult
from autoresearch.safety.jail import Jail
from autoresearch.session.record import SetupRecord

from . import holdout
from .program import GUARD_OFF, ExperimentConfig

TAIL_CHARS = 1500


def with_default(
    cfg: ExperimentConfig, record: SetupRecord, values: dict[str, Any]
) -> ExperimentConfig:
    """`cfg` with the target's test command as its guard when the spec names none and does
    not turn it off; unchanged when the session has no test command."""
    if cfg.guard or cfg.guard_off or not record.test_command:
        return cfg
    return dataclasses.replace(
        cfg,
        guard=record.test_command,
        # The suite's own timeout, not the metric's: the suite ran within it at setup.
        guard_timeout_s=cfg.guard_timeout_s or values.get("test_timeout_s"),
        guard_tests={
            "stack": record.stack,
            "allow_test_removal": bool(values.get("allow_test_removal")),
            "allow_test_edits": bool(values.get("allow_test_edits")),
        },
    )


def describe(cfg: ExperimentConfig) -> str:
    """What session.md says of the guard: which command, and where it came from."""
    if cfg.guard_tests is not None:
        return (
            f"`{cfg.guard}` (the default: the target's test command, judged by test "
            "identity as the test gate is)"
        )
    if cfg.guard:
        return f"`{cfg.guard}` (experiment.guard)"
    if cfg.guard_off:
        return f"{GUARD_OFF} (turned off by the spec)"
    return (
        f"{GUARD_OFF} (the target has no test command that could be detected and the spec "
        "names no experiment.guard)"
    )


def plain(
    cfg: ExperimentConfig,
    cwd: Path,
    secrets,
    jail: Jail | None = None,
    trace_to: Path | None = None,
) -> CommandResult | None:
    """The spec's guard run as a plain command, judged by its exit code, the holdout's
    files hidden from it; None without one, or for the default guard (the target's tests,
    whose base run is setup's test run)."""
    if not cfg.guard or cfg.guard_tests is not None:
        return None
    return commands.run(
        cfg.guard,
        cwd,
        timeout_s=cfg.guard_timeout,
        extra_secrets=secrets,
        jail=holdout.blind(jail, cfg),
        trace_to=trace_to,
    )


def run(
    cfg: ExperimentConfig,
    cwd: Path,
    secrets,
    jail: Jail | None,
    reference: TestRun | None,
    start: str | None = None,
) -> dict[str, Any]:
    """The guard's record on the tree in `cwd`: `ok` (None without a guard), and for a
    failing or default guard what became of it. `reference` is the test run the default
    guard is held to (where the change started: the commit `start`). When the change
    touched what defines or configures the tests of `start`, the default guard is graded as
    the test gate is: the start's tests laid over the change decide, and the change's own
    tests must pass too (overlay.py, verdict.graded_verdict)."""
    if not cfg.guard:
        return {"ok": None}
    metrics.pristine(cwd)  # nothing an earlier run left behind reaches this one
    result = plain(cfg, cwd, secrets, jail)
    if result is not None:
        return {
            "ok": result.ok,
            "timed_out": result.timed_out,
            "exit_code": result.exit_code,
            "duration_s": round(result.duration_s, 3),
            "tail": result.tail(TAIL_CHARS),
        }
    # The guard runs the agent's code: the holdout's files are hidden from it, as from the
    # metric's runs.
    jail = holdout.blind(jail, cfg)
    guard_tests = cfg.guard_tests or {}

    def suite() -> TestRun:
        return run_tests(
            cfg.guard,
            cwd,
            stack=guard_tests.get("stack"),
            timeout_s=cfg.guard_timeout,
            secrets=secrets,
            uncached=True,  # as setup ran it: a cached result is no run of this tree
            jail=jail,
        )

    tests = suite()
    removal = bool(guard_tests.get("allow_test_removal"))
    edits = bool(guard_tests.get("allow_test_edits"))
    laid = overlay.plan(cwd, start, reference, edits) if start and reference is not None else None
    if laid is not None and (not laid.empty or laid.edited):
        # Nothing to lay but an edited test (one inside a source file): the run as it is grades.
        graded = overlay.run_laid(cwd, laid, suite, cfg.guard) if not laid.empty else tests
        # setup already refused a failing base the spec forbids
        verdict = graded_verdict(
            graded, tests, reference, laid.edited, True, removal, edits, laid.inputs
        )
    else:
        verdict = acceptable(
            tests,
            reference,
            allow_failing_baseline=True,  # setup already refused a failing base the spec forbids
            allow_test_removal=removal,
        )
    return {
        "ok": verdict.ok,
        "timed_out": tests.outcome == TIMED_OUT,
        "exit_code": tests.exit_code,
        "duration_s": round(tests.duration_s, 3),
        "tail": tests.tail[-TAIL_CHARS:],
        "reason": verdict.reason,
        "tests": tests.to_record(),
    }


def failure(cfg: ExperimentConfig, guard: dict[str, Any]) -> str:
    """Why the guard failed, in a few words for a verdict."""
    if guard.get("reason"):
        return f"guard `{cfg.guard}` (the target's tests) failed: {guard['reason']}"
    return f"guard `{cfg.guard}` failed (exit code {guard['exit_code']})"

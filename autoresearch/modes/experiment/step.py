"""What an experiment iteration adds to its decision: what was proposed, what it measured
against the incumbent, why it was kept or not, and the incumbent it leaves (`best`).

Every iteration writes the required fields (stages.new_record, judge_proposal, close_record);
the sequential test (paired.judge), the holdout (holdout.judge), the guard, a batch
(batch.decide_batch) and preserve_on_fail add the `absent()` ones. A batch's `candidates`
stay the per-candidate dicts they are: each is an experiment record of its own, read by
log.each_experiment, and holding it to a second record would only repeat this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoresearch.engine.loop import Extra, Unset, absent


@dataclass(frozen=True, kw_only=True)
class ExperimentStep(Extra):
    """An iteration's keys of decision.json beyond the common ones (loop.Decision)."""

    iteration: int  # the same number as `cycle`: the experiment logs call it so
    hypothesis: str
    change_summary: str
    metric_value: float | None  # None: not measured (no change, crash, refused unmeasured)
    samples: list[float]
    passed: bool | None
    notes: str | None
    raw: dict[str, Any] | None
    error: str | None
    guard_ok: bool | None  # None: no guard ran
    p_value: float | None
    improved: bool  # the metric beat the incumbent, guard aside
    remeasured: float | None  # the incumbent measured afresh (remeasure_every)
    files: list[str]
    retry_of: int | None
    baseline_value: float | None  # the incumbent's value this experiment was held to
    flags: list[dict[str, Any]]  # tamper.py's, and max_gain's
    verdict: str
    best: dict[str, Any]  # the incumbent after this iteration: value, samples, commit, ...
    best_value: float | None
    files_changed: list[str]
    duration_seconds: float
    timestamp: str
    # Keys the shared session summary reads (journal.write_summary).
    tests_pass: bool
    fixed: list[Any]
    skipped: list[Any]
    refactor_changes: int
    open_issues: list[str]
    session_stop: str | None
    # The guard's run: the failed guard's result, the default guard's test run.
    guard: dict[str, Any] | None = absent()
    guard_tests: dict[str, Any] | None = absent()
    # The sequential test's figures (paired.judge): written together, some of them null
    # (no interval yet, an incumbent mean of 0), so read back as null, not as absent.
    incumbent_value: float | None | Unset = absent(null=True)
    incumbent_samples: list[float] | None | Unset = absent(null=True)
    effect: float | None | Unset = absent(null=True)
    relative_effect: float | None | Unset = absent(null=True)
    ci: list[float] | None | Unset = absent(null=True)
    ci_level: float | None | Unset = absent(null=True)
    pairs: int | None = absent()  # also a guard failure's or a crash's (0, or the pairs run)
    sequential: dict[str, Any] | None = absent()
    machine: str | None | Unset = absent(null=True)
    holdout: dict[str, Any] | None = absent()  # the holdout's comparison (holdout.judge)
    # A batch: the candidate that stands for it, its patch, and every candidate's record.
    candidate: str | None = absent()
    patch: str | None = absent()
    candidates: list[dict[str, Any]] | None = absent()
    preserved: str | None = absent()  # the ref of a change not kept (preserve_on_fail)

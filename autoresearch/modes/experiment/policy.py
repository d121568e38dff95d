"""Pure rules of the experiment loop: keep or discard, when to stop, duplicates, syntax.

No git, no files, no clock of their own: the stages hand in what they measured, so the
noise benchmark and the unit tests can drive these functions directly.
"""

from __future__ import annotations

import ast
import difflib
import re
import shutil
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch.engine.loop import Status
from autoresearch.measure import metrics
from autoresearch.safety import child_env, worktree_files

from .program import ExperimentConfig

# Iteration outcomes. Only `kept` changes the branch.
KEPT = Status.KEPT
DISCARDED = Status.DISCARDED  # measured, not strictly better
GUARD_FAILED = Status.GUARD_FAILED
HOLDOUT_DISAGREES = Status.HOLDOUT_DISAGREES  # the metric improved, the holdout got worse
HOLDOUT_UNCONFIRMED = Status.HOLDOUT_UNCONFIRMED  # the metric improved, the holdout did not
CRASH = Status.CRASH  # the metric or the guard could not run (failed, timed out, unparsable)
SYNTAX_ERROR = Status.SYNTAX_ERROR
NO_CHANGE = Status.NO_CHANGE  # the agent ended without handing in a change
# Failed iterations: nothing was measured against the incumbent (a propose stage whose
# agent errored hands in no change). A run of them is a crash loop.
ERRORS = (CRASH, SYNTAX_ERROR, NO_CHANGE)
REGRESSIONS = (DISCARDED, GUARD_FAILED, HOLDOUT_DISAGREES, HOLDOUT_UNCONFIRMED)
# Which candidate stands for a batch in which no candidate was kept: the most informative
# outcome (a measured discard says more than a crash, a crash more than no change).
STATUS_RANK = {
    KEPT: 0,
    DISCARDED: 1,
    HOLDOUT_DISAGREES: 1,
    HOLDOUT_UNCONFIRMED: 1,
    GUARD_FAILED: 2,
    CRASH: 3,
}
STATUS_RANK |= {SYNTAX_ERROR: 4, NO_CHANGE: 5}


@dataclass
class Sample:
    """One side of a comparison: the median value and the samples behind it."""

    value: float
    samples: list[float]
    passed: bool | None = None  # evaluator format only


@dataclass
class Verdict:
    kept: bool
    reason: str
    p_value: float | None = None


def judge(candidate: Sample, incumbent: Sample, cfg: ExperimentConfig) -> Verdict:
    """Strict improvement only: equal is discarded; noise rules from the spec."""
    if cfg.keep_policy == "pass_only":
        if candidate.passed:
            return Verdict(True, "the evaluator passes")
        return Verdict(False, "the evaluator does not pass")
    if incumbent.passed and candidate.passed is False:
        return Verdict(False, "the evaluator passed before and fails now")
    effect = cfg.min_effect_abs(incumbent.value)
    if not metrics.is_better(candidate.value, incumbent.value, cfg.direction, effect):
        what = "not better than" if effect == 0 else f"not better by more than {effect:g} than"
        return Verdict(False, f"{candidate.value:g} is {what} {incumbent.value:g}")
    if (
        cfg.rank_test_alpha is not None
        and len(candidate.samples) >= 5
        and len(incumbent.samples) >= 5
    ):
        p = metrics.mann_whitney_u_p(candidate.samples, incumbent.samples)
        if p >= cfg.rank_test_alpha:
            return Verdict(
                False, f"better median, but within noise (rank test p={p:.3f})", p_value=p
            )
        return Verdict(True, f"better (rank test p={p:.3f})", p_value=p)
    return Verdict(
        True, f"{candidate.value:g} beats {incumbent.value:g}{within_noise(candidate, incumbent)}"
    )


NOISE_SDS = 2.0  # as the holdout's allowance: a gain under 2 sample SDs is not told from noise


WITHIN_NOISE = "within noise:"
NOISE_NOTE = re.compile(r"\(within noise: (.+?);")


def noise_note(verdict: str) -> str:
    """What a kept change's review description says of a keep decided within noise, or "":
    a reader of the PR weighs the figure above it by this."""
    found = NOISE_NOTE.search(verdict or "")
    if not found:
        return ""
    return f"within noise: {found[1]}; kept on its median alone"


def within_noise(candidate: Sample, incumbent: Sample) -> str:
    """A note for a median kept though its gain is smaller than the runs' own spread (the
    larger side's NOISE_SDS sample SDs), else "". The plain median keeps it (the spec asked
    for no test); the note keeps the decision text from reading as a measured gain."""
    spreads = [s for s in (candidate.samples, incumbent.samples) if len(s) >= 2]
    if not spreads:
        return ""
    noise = NOISE_SDS * max(statistics.stdev(s) for s in spreads)
    gain = abs(candidate.value - incumbent.value)
    if gain >= noise:
        return ""
    return (
        f" ({WITHIN_NOISE} the gain {gain:.3g} is under the runs' {noise:.3g} (2 SDs); "
        "set `rank_test_alpha` with `repeats: 5` or more, or `min_effect`, to keep only "
        "gains beyond it)"
    )


def ref(rec: dict[str, Any]) -> int | str:
    """How an experiment is named: its iteration, or `N/cK` for a candidate of a batch."""
    return f"{rec['iteration']}/{rec['candidate']}" if rec.get("candidate") else rec["iteration"]


def pick(candidates: list[dict[str, Any]], direction: str) -> dict[str, Any] | None:
    """The batch's winner among the candidates judged better than the incumbent: the best
    value, the lowest candidate number on a tie. None when no candidate beat it."""
    better = [c for c in candidates if c["status"] == KEPT]
    if not better:
        return None
    sign = 1 if direction == "minimize" else -1
    return min(better, key=lambda c: (sign * c["metric_value"], candidates.index(c)))


def representative(candidates: list[dict[str, Any]], direction: str) -> dict[str, Any]:
    """The candidate a batch is summarised by: the kept one, else the most informative."""
    sign = 1 if direction == "minimize" else -1

    def order(c: dict[str, Any]) -> tuple:
        value = c["metric_value"]
        return (
            STATUS_RANK.get(c["status"], 9),
            value is None,
            sign * value if value is not None else 0,
            candidates.index(c),
        )

    return min(candidates, key=order)


def retry_offers(experiments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rejected experiments that a later kept change may have made worth retrying.

    An experiment discarded (or failed by the guard) is offered once a change kept in a
    later iteration touches one of its files, until it has been retried once; a retry is
    never offered again. Returns {"experiment", "kept"} pairs, oldest first.
    """
    retried = {str(e["retry_of"]) for e in experiments if e.get("retry_of") is not None}
    offers = []
    for i, rejected in enumerate(experiments):
        if (
            rejected["status"] not in REGRESSIONS
            or rejected.get("retry_of") is not None
            or str(ref(rejected)) in retried
        ):
            continue
        files = set(rejected.get("files") or [])
        kept = next(
            (
                k
                for k in experiments[i + 1 :]
                if k["status"] == KEPT
                and k["iteration"] > rejected["iteration"]
                and files & set(k.get("files_changed") or [])
            ),
            None,
        )
        if kept is not None:
            offers.append({"experiment": rejected, "kept": kept})
    return offers


def improvement(old: float, new: float, direction: str) -> float:
    """Relative gain from old to new in the metric's good direction (0.05 = 5% better)."""
    if old == 0:
        return 0.0 if new == old else float("inf")
    gain = (old - new) if direction == "minimize" else (new - old)
    return gain / abs(old)


def should_stop(
    history: list[dict[str, Any]],
    cfg: ExperimentConfig,
    elapsed_s: float,
    baseline_value: float | None,
) -> str | None:
    """The loop's stop conditions, first match wins; None to go on.

    `history` holds one dict per iteration so far, oldest first, with `status` and
    `best_value` (the incumbent after that iteration) and, for crashes, `error`.
    """
    n = len(history)
    if cfg.max_iterations is not None and n >= cfg.max_iterations:
        return f"iteration limit reached (max_iterations = {cfg.max_iterations})"
    if cfg.max_duration_s is not None and elapsed_s >= cfg.max_duration_s:
        return f"duration limit reached ({elapsed_s:.0f}s of max_duration {cfg.max_duration_s:g}s)"
    target = cfg.target_obj()
    best = history[-1].get("best_value") if history else baseline_value
    if target is not None and best is not None and target.met(best):
        return f"target reached: {best:g} meets {target}"
    crash_n = cfg.crash_loop_after
    if crash_n and n >= crash_n and all(h["status"] in ERRORS for h in history[-crash_n:]):
        return crash_loop_reason(history[-crash_n:], cfg)
    stuck = cfg.stuck_limit
    if stuck and n >= stuck and all(h["status"] != KEPT for h in history[-stuck:]):
        return f"stuck: {stuck} consecutive iterations without an improvement"
    window = cfg.plateau_limit
    if window and n >= window and baseline_value is not None:
        before = history[-window - 1]["best_value"] if n > window else baseline_value
        after = history[-1]["best_value"]
        gain = improvement(before, after, cfg.direction)
        if gain < cfg.plateau_min_gain:
            return (
                f"plateau: the last {window} iterations improved the metric by {gain:.2%} "
                f"together (less than {cfg.plateau_min_gain:.0%})"
            )
    return None


def crash_loop_reason(failed: list[dict[str, Any]], cfg: ExperimentConfig) -> str:
    """Why the loop stops after a run of failed iterations, and what to look at: the
    measurement when they crashed, the agent when it handed in nothing usable."""
    seen = [h["status"] for h in failed]
    tally = ", ".join(f"{seen.count(s)} {s}" for s in ERRORS if s in seen)
    last = failed[-1].get("error") or failed[-1].get("verdict") or ""
    first_line = last.strip().splitlines()[0] if last.strip() else "no message"
    text = f"crash loop: {len(failed)} consecutive failed iterations ({tally}); "
    if any(h["status"] == CRASH for h in failed):
        text += (
            f"check that the metric command `{cfg.command}`"
            + (f" and the guard `{cfg.guard}`" if cfg.guard else "")
            + f" run in the worktree within {cfg.verify_timeout_s:g}s"
        )
    else:
        text += "the agent handed in no change it could measure; check its log and the scope"
    return f"{text}. Last error: {first_line}"


# --- duplicates ---------------------------------------------------------------------

_STOP_WORDS = frozenset(
    "a an the to of in on for and or by with from at is be it this that".split()
)


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in _STOP_WORDS]


def similarity(a: str, b: str) -> float:
    """Token-level similarity in [0, 1]: case, punctuation and filler words do not count."""
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return 0.0
    return difflib.SequenceMatcher(None, ta, tb, autojunk=False).ratio()


def find_duplicate(
    hypothesis: str, discarded: list[dict[str, Any]], threshold: float
) -> dict[str, Any] | None:
    """The earlier discarded experiment (or batch sibling's claim) this hypothesis repeats,
    if any: an idea already discarded, or being tried next door, is not tried again."""
    best, best_score = None, threshold
    for entry in discarded:
        score = similarity(hypothesis, entry.get("hypothesis") or "")
        if score >= best_score:
            best, best_score = entry, score
    return best


# --- syntax -------------------------------------------------------------------------

JS_SUFFIXES = (".js", ".mjs", ".cjs")


def syntax_problems(worktree: Path, files: list[str]) -> list[str]:
    """Python files through ast, JavaScript through `node --check` when node exists."""
    problems = []
    node = shutil.which("node")
    for rel in files:
        path = worktree / rel
        if not path.is_file():
            continue
        if rel.endswith(".py"):
            try:
                ast.parse(worktree_files.read_text(worktree, rel), filename=rel)
            except worktree_files.Missing:
                continue
            except worktree_files.Refused as err:
                problems.append(f"{rel}: not read: {err}")
            except SyntaxError as err:
                problems.append(f"{rel}:{err.lineno}: {err.msg}")
        elif rel.endswith(JS_SUFFIXES) and node:
            proc = subprocess.run(
                [node, "--check", rel],
                cwd=worktree,
                capture_output=True,
                text=True,
                timeout=60,
                env=child_env.for_tool(),
            )
            if proc.returncode != 0:
                problems.append(f"{rel}: {proc.stderr.strip()[-800:]}")
    return problems

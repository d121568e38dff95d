"""Where a session's files live: every path of `sessions/<name>/`, in one place.

Rules, stages, modes and `status` all ask the layout, so they can never disagree about a
file's name. See docs/architecture.md for which rule writes which file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SESSIONS = "sessions"
LOOP_DIR = re.compile(r"^\d{3,}$")  # 001 ... 999, then 1000 ...


class _At:
    """A file or folder at a fixed place in the session folder, read as a layout's path."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, layout: SessionLayout | None, owner: type) -> Path:
        if layout is None:
            return self  # type: ignore[return-value]  # the class's own attribute
        return layout.root.joinpath(*self.parts)


@dataclass(frozen=True)
class SessionLayout:
    root: Path  # sessions/<name>, absolute
    # Where the loop's steps live: `cycles` (sweep, narrow, broad tracks) or `iterations`
    # (experiment), so the two loops' rules never claim the same file.
    loop: str = "cycles"

    @property
    def name(self) -> str:
        return self.root.name

    # --- every session ---------------------------------------------------------------

    spec = _At("session.yaml")
    setup = _At("setup.json")
    summary = _At("session.md")
    results = _At("results.tsv")
    usage = _At("usage.tsv")
    ideas = _At("ideas.md")
    done = _At("done")
    logs = _At("logs")
    timings = _At("timings.tsv")  # wall time and CPU of every stage run (timings.py)
    # Every full test run of a committed tree, so no tree is tested twice.
    test_runs = _At("test-runs.jsonl")
    # Held while a shared session file (results, ideas, summary, usage) is rewritten.
    journal_lock = _At(".journal.lock")
    run_lock = _At(".run.lock")  # held by the Snakemake process running this session

    def worktree(self, track: str = "") -> Path:
        return self.root / "tracks" / track / "worktree" if track else self.root / "worktree"

    def candidate_worktree(self, candidate: str) -> Path:
        """Experiment batches: candidate `cK`'s own detached worktree, one per slot, reused
        by every iteration (a track's place, so it moves wherever worktrees move)."""
        return self.worktree(candidate)

    # --- the report a user opens (`snakemake --report`): rule session_report ----------

    report_dir = _At("report")
    report_summary = _At("report", "session.html")
    report_results = _At("report", "results.html")
    # One page per finished cycle (or iteration): its evaluation.
    report_evaluations = _At("report", "evaluations")
    report_plot = _At("report", "cycles.png")
    # The landing page's outcome fragment, and the review sets as pages (finalize).
    report_outcome = _At("report", "outcome")

    # --- the loop ---------------------------------------------------------------------

    def cycles(self, track: str = "") -> Path:
        return self.root / self.loop / track if track else self.root / self.loop

    def cycle(self, number: int, track: str = "") -> Path:
        return self.cycles(track) / f"{number:03d}"

    def decision(self, number: int, track: str = "") -> Path:
        return self.cycle(number, track) / "decision.json"

    def decisions_index(self, track: str = "") -> Path:
        """Every decision of the loop, one compact line each, in the order they were made:
        an index for the readers that need them all (journal.load_decisions)."""
        return self.cycles(track) / "decisions.jsonl"

    def completed_cycles(self, track: str = "") -> list[int]:
        """Cycle numbers whose decision.json exists, ascending."""
        base = self.cycles(track)
        if not base.is_dir():
            return []
        return sorted(
            int(p.name)
            for p in base.iterdir()
            if LOOP_DIR.match(p.name) and (p / "decision.json").exists()
        )

    # --- narrow and experiment: the metric --------------------------------------------

    baseline = _At("baseline.json")
    goal_progress = _At("goal-progress.md")
    goal_progress_plot = _At("goal-progress.png")

    # --- broad ------------------------------------------------------------------------

    # A detached checkout of the base commit (broad has no session worktree).
    baseline_worktree = _At("baseline-worktree")
    hypotheses_md = _At("hypotheses.md")
    strategist_record = _At("strategist.json")
    approved = _At("hypotheses.json")  # the approved, validated hypotheses; present: approved
    # The file a person creates to approve hypotheses.md (`approve: manual`).
    approval_marker = _At("approved")

    def track_dir(self, hid: str) -> Path:
        return self.root / "tracks" / hid

    def track_meta(self, hid: str) -> Path:
        return self.track_dir(hid) / "track.json"

    def track_result(self, hid: str) -> Path:
        return self.track_dir(hid) / "result.json"

    comparison_md = _At("comparison.md")
    comparison_json = _At("comparison.json")

    # --- experiment -------------------------------------------------------------------

    experiment_setup = _At("experiment-setup.json")
    experiments_jsonl = _At("experiments.jsonl")
    results_data = _At("results-data.json")
    experiments_tsv = _At("experiments.tsv")
    decision_log = _At("decision-log.md")

    def evaluation(self, iteration: int) -> Path:
        return self.root / "evaluations" / f"iteration-{iteration:04d}.json"

    def evaluations(self) -> Path:
        return self.root / "evaluations"

    def candidate(self, iteration: int, candidate: str) -> Path:
        """One candidate of an experiment batch: iterations/NNN/cK/."""
        return self.cycle(iteration) / candidate

    report = _At("report.md")
    progress_plot = _At("progress.png")


def session_layout(
    name: str, loop: str = "cycles", sessions: Path | str = SESSIONS
) -> SessionLayout:
    return SessionLayout(Path(sessions).absolute() / name, loop)


def rel(path: Path) -> str:
    """A session path as Snakemake and the user write it: relative to the working directory."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)

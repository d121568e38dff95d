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

    @property
    def spec(self) -> Path:
        return self.root / "session.yaml"

    @property
    def setup(self) -> Path:
        return self.root / "setup.json"

    @property
    def summary(self) -> Path:
        return self.root / "session.md"

    @property
    def results(self) -> Path:
        return self.root / "results.tsv"

    @property
    def usage(self) -> Path:
        return self.root / "usage.tsv"

    @property
    def ideas(self) -> Path:
        return self.root / "ideas.md"

    @property
    def done(self) -> Path:
        return self.root / "done"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def timings(self) -> Path:
        """Wall time and CPU of every stage run (timings.py)."""
        return self.root / "timings.tsv"

    @property
    def test_runs(self) -> Path:
        """Every full test run of a committed tree, so no tree is tested twice."""
        return self.root / "test-runs.jsonl"

    @property
    def journal_lock(self) -> Path:
        """Held while a shared session file (results, ideas, summary, usage) is rewritten."""
        return self.root / ".journal.lock"

    @property
    def run_lock(self) -> Path:
        """Held by the Snakemake process running this session."""
        return self.root / ".run.lock"

    def worktree(self, track: str = "") -> Path:
        return self.root / "tracks" / track / "worktree" if track else self.root / "worktree"

    def candidate_worktree(self, candidate: str) -> Path:
        """Experiment batches: candidate `cK`'s own detached worktree, one per slot, reused
        by every iteration (a track's place, so it moves wherever worktrees move)."""
        return self.worktree(candidate)

    # --- the report a user opens (`snakemake --report`): rule session_report ----------

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report_summary(self) -> Path:
        return self.report_dir / "session.html"

    @property
    def report_results(self) -> Path:
        return self.report_dir / "results.html"

    @property
    def report_evaluations(self) -> Path:
        """One page per finished cycle (or iteration): its evaluation."""
        return self.report_dir / "evaluations"

    @property
    def report_plot(self) -> Path:
        return self.report_dir / "cycles.png"

    @property
    def report_outcome(self) -> Path:
        """The landing page's outcome fragment, and the review sets as pages (finalize)."""
        return self.report_dir / "outcome"

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

    @property
    def baseline(self) -> Path:
        return self.root / "baseline.json"

    @property
    def goal_progress(self) -> Path:
        return self.root / "goal-progress.md"

    @property
    def goal_progress_plot(self) -> Path:
        return self.root / "goal-progress.png"

    # --- broad ------------------------------------------------------------------------

    @property
    def baseline_worktree(self) -> Path:
        """A detached checkout of the base commit (broad has no session worktree)."""
        return self.root / "baseline-worktree"

    @property
    def hypotheses_md(self) -> Path:
        return self.root / "hypotheses.md"

    @property
    def strategist_record(self) -> Path:
        return self.root / "strategist.json"

    @property
    def approved(self) -> Path:
        """The approved, validated hypotheses; its presence means approved."""
        return self.root / "hypotheses.json"

    @property
    def approval_marker(self) -> Path:
        """The file a person creates to approve hypotheses.md (`approve: manual`)."""
        return self.root / "approved"

    def track_dir(self, hid: str) -> Path:
        return self.root / "tracks" / hid

    def track_meta(self, hid: str) -> Path:
        return self.track_dir(hid) / "track.json"

    def track_result(self, hid: str) -> Path:
        return self.track_dir(hid) / "result.json"

    @property
    def comparison_md(self) -> Path:
        return self.root / "comparison.md"

    @property
    def comparison_json(self) -> Path:
        return self.root / "comparison.json"

    # --- experiment -------------------------------------------------------------------

    @property
    def experiment_setup(self) -> Path:
        return self.root / "experiment-setup.json"

    @property
    def experiments_jsonl(self) -> Path:
        return self.root / "experiments.jsonl"

    @property
    def results_data(self) -> Path:
        return self.root / "results-data.json"

    @property
    def experiments_tsv(self) -> Path:
        return self.root / "experiments.tsv"

    @property
    def decision_log(self) -> Path:
        return self.root / "decision-log.md"

    def evaluation(self, iteration: int) -> Path:
        return self.root / "evaluations" / f"iteration-{iteration:04d}.json"

    def evaluations(self) -> Path:
        return self.root / "evaluations"

    def candidate(self, iteration: int, candidate: str) -> Path:
        """One candidate of an experiment batch: iterations/NNN/cK/."""
        return self.cycle(iteration) / candidate

    @property
    def report(self) -> Path:
        return self.root / "report.md"

    @property
    def progress_plot(self) -> Path:
        return self.root / "progress.png"


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

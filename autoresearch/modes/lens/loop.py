"""Loop lenses (security, debug, scenario): each iteration the harness picks one focus from the
log, the lens's team works that focus only, and code checks what it reported.

Per iteration, under `sessions/<name>/lens/NNN/`: `lens_red` writes `raw.json` (the focus and
the findings as reported), the checkpoint `lens_check` writes `checked.json` (accepted with
ids and hashes, dropped with reasons) and `decision.json` (last). The log `<lens>-results.tsv`
gets the iteration's row (keyed by run_id and iteration, so a rerun replaces it).

Runs: a run is the iterations from a start up to the decision that stopped it. `done` closes
the run (lens-runs.json); when `done` is removed and the session run again, a new run with a
new run_id starts after the last one, its rows added under the old ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autoresearch.engine.loop import Decision, Extra, Judged
from autoresearch.engine.stage import StageEnv
from autoresearch.session.files import read_json, write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.session.spec import SessionSpec
from autoresearch.views import journal

from ...checks.finding_schema import Schema
from ..base import Progress, part
from . import Lens, lens_log
from .saturation import Iteration


@dataclass
class Focus:
    """What one iteration works on: its key in the log's category column, and the brief."""

    key: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LensStep(Extra):
    """What a loop lens's iteration adds to its decision: the run it belongs to, its focus,
    and what the check made of the team's reports."""

    run_id: str
    iteration: int
    focus: str  # the focus's key, the log's category
    accepted: int
    new: int  # accepted and new (scenario: a variant is not)
    dropped: int
    drop_reasons: dict[str, int]
    tests_pass: None = None  # a lens runs no tests


class LoopLensViews(Lens.views):
    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        # The final decision too: once `done` is removed it names the next run's first
        # iteration, which a report that already exists would not ask for.
        return [self.final_decision(layout, checkpoints), *super().done_inputs(layout, checkpoints)]

    def write_done(self, env: StageEnv, out: Path) -> None:
        super().write_done(env, out)
        # The run is over: a later run of this session (after `done` is removed) starts anew.
        last = env.layout.completed_cycles()
        if last:
            closed = self.closed_runs(env.layout) | {last[-1]}
            write_json(self.runs_path(env.layout), {"closed": sorted(closed)})

    def progress(self, layout: SessionLayout) -> Progress:
        return replace(super().progress(layout), open_issues=len(self.accepted(layout)))


class LoopLens(Lens):
    schema: Schema
    report_tool = ""  # the team's report tool (tools.TOOL_SPECS)
    id_prefix = "L"  # finding ids: <prefix>-001, ...
    stop_when_all_tested = False
    decide_checkpoint = "lens_check"
    decision_extra = LensStep
    views = part(LoopLensViews)

    # --- runs ----------------------------------------------------------------------------

    def runs_path(self, layout: SessionLayout) -> Path:
        return layout.root / "lens-runs.json"

    def closed_runs(self, layout: SessionLayout) -> set[int]:
        """The cycles whose stop ended a run that `done` has closed."""
        return set((read_json(self.runs_path(layout)) or {}).get("closed", []))

    def next_open_cycle(self, layout: SessionLayout, track: str = "") -> int:
        """The first cycle with no decision, or the one that stopped the open run. A run
        `done` closed counts as over only once `done` is gone (a new run is wanted)."""
        closed = set() if layout.done.exists() else self.closed_runs(layout)
        decisions = journal.load_decisions(layout)
        return next(
            (d["cycle"] for d in decisions if d.get("stop") and d["cycle"] not in closed),
            len(decisions) + 1,
        )

    def apply_policy(self, env: StageEnv, decision: dict[str, Any]) -> None:
        """None here: the check decides stop and reason with the iteration, since its
        saturation rule reads the log row the check has just written (stages.check)."""

    def judge(self, env: StageEnv, output: Any) -> Judged:
        """Code checks what the team reported; the log row; the stop rules (stages.check)."""
        from . import stages

        return stages.check(env, self, Path(output.checked))

    def log_line(self, env: StageEnv, decision: Decision) -> str:
        step = decision.extra
        assert isinstance(step, LensStep)  # loop.decide wrote it as one
        return (
            f"{self.name} {env.label}: {step.focus}: {step.accepted} accepted "
            f"({step.new} new), {step.dropped} dropped"
            + (f"; stop: {decision.reason}" if decision.reason else "")
        )

    # --- what the lens decides (overridden by each lens) ----------------------------------

    def categories(self, spec: SessionSpec, setup: dict[str, Any]) -> list[str]:
        """Every category the saturation rule wants tried before it may stop."""
        return []

    def cap(self, spec: SessionSpec, setup: dict[str, Any]) -> int:
        return spec.max_cycles or self.default_cycle_cap

    def pick(self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]) -> Focus:
        """The focus of the next iteration, from this run's log."""
        raise NotImplementedError

    def brief(self, env: StageEnv, focus: Focus, setup: dict[str, Any]) -> dict[str, Any]:
        """The team's task (prompts.BriefContext.lens) for this focus."""
        raise NotImplementedError

    def after_check(
        self, env: StageEnv, accepted: list[dict[str, Any]], setup: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The harness's own work on accepted findings (debug runs reproductions)."""
        return accepted

    def extra_stop(
        self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]
    ) -> str | None:
        """A lens's own stop rule, after the cap and saturation (debug: no lead left)."""
        return None

    def counts_as_new(self, item: dict[str, Any]) -> bool:
        """Whether an accepted finding adds something new (scenario: a variant does not)."""
        return True

    def render_findings(self, env: StageEnv, findings: list[dict[str, Any]]) -> str:
        raise NotImplementedError

    def write_outputs(
        self, env: StageEnv, findings: list[dict[str, Any]], rows: list[lens_log.LogRow]
    ) -> None:
        """The lens's other report files (overview.md, summary.md, ...)."""

    # --- reading what the iterations left ------------------------------------------------

    def accepted(self, layout: SessionLayout, before: int | None = None) -> list[dict[str, Any]]:
        """Every accepted finding so far, oldest first (of cycles before `before`)."""
        out: list[dict[str, Any]] = []
        for n in layout.completed_cycles():
            if before is not None and n >= before:
                continue
            checked = read_json(layout.cycle(n) / "checked.json") or {}
            out += checked.get("accepted", [])
        return out

    def report_findings(self, layout: SessionLayout) -> list[dict[str, Any]]:
        """The findings the report and handoff.json carry (flattened, with id and hash)."""
        return [
            {**item["finding"], "id": item["id"], "hash": item["hash"], "file": item["file"],
             "line": item["line"], "novelty": item["novelty"], "cycle": item["cycle"]}
            for item in self.accepted(layout)
        ]  # fmt: skip

    def write_report(self, env: StageEnv, findings_out: Path, handoff_out: Path) -> None:
        findings = self.report_findings(env.layout)
        writer = self.writer(env.record)
        writer.text(findings_out, self.render_findings(env, findings))
        self.write_outputs(env, findings, self.read_log(env.layout))
        writer.json(handoff_out, self.handoff(env, findings, {"stopped": self.stopped(env)}))

    def stopped(self, env: StageEnv) -> str | None:
        decisions = journal.load_decisions(env.layout)
        return next((d.get("reason") for d in reversed(decisions) if d.get("stop")), None)

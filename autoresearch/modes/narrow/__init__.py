"""Narrow: drive one measurable goal through priority-ranked angles.

The cycle is the plain loop's; narrow adds the goal gate (`check_spec`), the baseline
measurement (`on_setup`), Red scoped to the current angle (`red_scope`), off-angle
findings waiting in ideas.md (`held_back`), and after every cycle the measurement, the
revert of a regression, and the angle rules (`apply_policy`).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from autoresearch.engine.findings import Finding
from autoresearch.engine.loop import Decision
from autoresearch.engine.revert import undo_cycle
from autoresearch.engine.stage import StageEnv, jail_for
from autoresearch.measure import measured, metrics
from autoresearch.safety import git
from autoresearch.session.changesets import ReviewLoop
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec
from autoresearch.views import journal
from autoresearch.views.session_report import MetricChange

from ...errors import SpecError
from ..base import Mode, PlannedMetric, part
from . import progress
from .angles import state_before, step
from .goal import GOAL_DEFAULTS, Angle, Goal, angles_of, default_target, goal_of, spec_file
from .protect import labels, protected_paths
from .step import GoalStep, NarrowStep

# What `autoresearch new --mode narrow` writes into the spec, to edit.
SPEC_EXAMPLE = """
goal:
  metric: lint warnings                    # a short label
  command: ./measure.sh                    # prints a number, also 0 when all is clean
  format: last_line                        # json_stdout | json_file:<path> | metric | regex:<re>
  target: "<= 0"                           # comparator and value
angles:
  - {name: unused code, hypothesis: "Removing dead code lowers the count.", priority: 1}
"""


class NarrowSetup(Mode.setup):
    plannable = True

    def plan_spec(self, plan: PlannedMetric) -> dict[str, Any]:
        """A goal from the dry-run metric, one angle in the person's words; the tests are
        the gate, so a planned guard becomes the test command."""
        values: dict[str, Any] = {
            "goal": {
                "metric": plan.label,
                "command": plan.command,
                "format": plan.format,
                "key": plan.key,
                "target": plan.target or default_target(plan.value, plan.direction),
                "timeout_s": plan.timeout_s,
            },
            "angles": [{"name": plan.label, "hypothesis": plan.goal, "priority": 1}],
            "max_cycles": plan.max_iterations,
        }
        if plan.guard:
            values["test_command"] = plan.guard
        if plan.scope:
            values["scope"] = {"include": list(plan.scope)}
        return values

    def check_spec(self, values: dict[str, Any], name: str) -> None:
        """The goal gate: refuse to start unless goal and ranked angles are complete."""
        goal_of(values, name)
        angles_of(values, name)

    def on_setup(
        self, layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log
    ) -> None:
        """Measure the baseline in the session worktree; protect the measurement."""
        goal = goal_of(values, layout.name)
        angles = angles_of(values, layout.name)
        worktree = layout.worktree().resolve()
        box = jail_for(layout, record.worktrees, values.get("commands"), worktree)
        # What the measurement runs, watched in a run of its own (measured.py says why).
        watch = measured.watch_at_setup(worktree, record, values, "goal.command", goal, box, log)
        # The frozen spec is what the stages read, so the toolbox refuses edits to these
        # paths; the frozen session.yaml shows them too.
        existing = list(values.get("protected") or [])
        values["protected"] = protected_paths(goal, existing, watch.patterns())
        record.measured = watch.to_record(values["protected"], labels(goal, existing))
        # Defaults filled in, so session.yaml shows exactly how the metric is read.
        values["goal"] = GOAL_DEFAULTS | {k: v for k, v in values["goal"].items() if v is not None}
        values["angles"] = [asdict(a) for a in angles]
        try:
            baseline = goal.measure(worktree, values.get("secrets"), box)
        except metrics.MetricError as err:
            raise SpecError(
                f"{spec_file(layout.name)}: key 'goal.command': the baseline measurement "
                f"failed, so no cycle can start.\n{err}"
            ) from None
        if goal.target.met(baseline.value):
            raise SpecError(
                f"{spec_file(layout.name)}: key 'goal.target': the baseline value "
                f"{baseline.value:g} already meets the target {goal.target}; set a target "
                "that is not met yet"
            )
        write_json(
            layout.baseline,
            {
                "metric": goal.metric,
                "command": goal.command,
                "format": goal.format,
                "key": goal.key,
                "repeats": goal.repeats,
                "target": str(goal.target),
                "value": baseline.value,
                "samples": baseline.samples,
                "raw": baseline.raw_shown(),
                "commit": record.base_commit,
                "measured_at": journal.now(),
                "protected": values["protected"],
            },
        )
        log(f"baseline {goal.metric}: {baseline.value:g} (samples {baseline.samples})")
        log(measured.said(watch.protected()))
        progress.write_progress(layout, values, [])
        sections = progress.render_sections(layout, values, [])
        journal.write_summary(layout, record, SessionSpec(values), [], sections)


class NarrowViews(Mode.views):
    sections_read_decisions = True

    def report_metric(self, env: StageEnv) -> MetricChange:
        """The goal metric at the baseline and as kept on the branch after the last cycle."""
        goal = goal_of(env.spec, env.layout.name)
        baseline = progress.load_baseline(env.layout)["value"]
        kept = progress.records(self.decisions(env.layout))
        after = kept[-1][1].current if kept else baseline
        return MetricChange(goal.metric, baseline, after, f"target {goal.target}")

    def review_loops(
        self, layout: SessionLayout, record: SetupRecord, spec: SessionSpec
    ) -> list[ReviewLoop]:
        """The session branch, its goal opening every set's description."""
        goal = goal_of(spec, layout.name)
        context = (
            f"Goal of the session: {goal.metric} {goal.target_text}. The measurements below "
            "are the session's, of each whole cycle, not of this set alone.",
        )
        return [ReviewLoop("", record.branch, record.base_commit, context)]

    def summary_decisions(
        self, env: StageEnv, pending: dict[str, Any] | None = None
    ) -> list[Decision]:
        """The decisions before `pending`'s cycle and `pending` itself, all as NarrowStep
        records (the one being made is held to its keys here, before it is written)."""
        done = self.decisions(env.layout)
        if pending is None:
            return done
        made = Decision.from_json(pending, env.layout.decision(env.cycle), NarrowStep)
        return [d for d in done if d.cycle < made.cycle] + [made]

    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        return progress.render_sections(env.layout, env.spec, decisions)  # type: ignore[arg-type]

    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        """The loop's final decision, then the plot drawn from it."""
        return [*super().done_inputs(layout, checkpoints), rel(layout.goal_progress_plot)]

    def end_files(self, layout: SessionLayout, track: str = "") -> list[Path]:
        """The plot is drawn once, from every cycle: a redo draws it again."""
        bench = layout.root / "benchmarks" / "goal_progress_plot.tsv"
        plot = [layout.goal_progress_plot, layout.logs / "goal_progress_plot.log", bench]
        return [*plot, *super().end_files(layout, track)]

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        return progress.status_lines(layout, spec, self.decisions(layout))


class Narrow(Mode):
    name = "narrow"
    tamper_profile = "measure"  # the metric's script imports the code under test
    spec_example = SPEC_EXAMPLE
    branch = "autoresearch/narrow/{name}"
    decision_extra = NarrowStep
    setup = part(NarrowSetup)
    views = part(NarrowViews)

    def red_scope(self, env: StageEnv) -> dict[str, Any]:
        """One angle, its hypothesis, the metric, its current value and the target."""
        prev = self.previous_goal(env)
        angle = current_angle(env, prev)
        goal = goal_of(env.spec, env.layout.name)
        current = prev.current if prev else None
        if current is None:
            current = progress.load_baseline(env.layout)["value"]
        return {
            "angle": {
                "name": angle.name,
                "hypothesis": angle.hypothesis,
                "metric": goal.metric,
                "current": f"{current:g}",
                "target": str(goal.target),
            }
        }

    def held_back(self, env: StageEnv, findings: list[Finding]) -> list[Finding]:
        """What lies off the current angle (its `match` and `paths`) waits in ideas.md: the
        angle decides, not a finding's severity."""
        angle = current_angle(env, self.previous_goal(env))
        return [f for f in findings if not angle.covers(f.title, f.location)]

    def apply_policy(self, env: StageEnv, decision: dict[str, Any]) -> None:
        """Measure; revert a regression; move the angle state; then the stop cascade."""
        goal = goal_of(env.spec, env.layout.name)
        angles = angles_of(env.spec, env.layout.name)
        baseline = progress.load_baseline(env.layout)["value"]
        prev_record = self.previous_goal(env)
        state = state_before(angles, prev_record)
        previous = prev_record.current if prev_record else baseline
        kept = len(decision["fixed"])

        value, samples, error = _try_measure(goal, env)
        met = value is not None and goal.target.met(value)
        # Worse than the baseline: the baseline is strictly closer to the target.
        regressed = not met and (value is None or metrics.is_closer(baseline, value, goal.target))
        reverted = False
        current = value
        if regressed:
            reverted = revert_cycle(env, decision, goal, value, error)
            if value is None:
                # The cycle broke the measurement; after the revert it must work again.
                retry, _, error_after = _try_measure(goal, env)
                current = retry
                error = error if retry is not None else error_after
            elif reverted:
                current = previous  # the tree is the cycle's start again
        record = GoalStep(
            angle=state.angle,
            value=value,
            samples=samples,
            error=error if value is None else None,
            baseline=baseline,
            previous=previous,
            current=current,
            delta_baseline=None if value is None else value - baseline,
            delta_previous=None if value is None else value - previous,
            met=met,
            regressed=regressed,
            reverted=reverted,
            # What stays on the branch: a reverted cycle kept nothing, whatever it tried.
            kept_fixes=len(decision["fixed"]),
            **asdict(step(angles, state, regressed, kept)),
        )
        decision["narrow"] = record.to_json()
        decision["metric"] = progress.metric_line(goal, record)
        super().apply_policy(env, decision)
        if decision["stop"]:
            # Why the goal was not reached may be a measurement that printed no number: the
            # end says so, with what to change, whatever stop came first.
            earlier = progress.records(self.decisions(env.layout))
            cycles = [(c, r) for c, r in earlier if c < env.cycle] + [(env.cycle, record)]
            notes = progress.unmeasured_notes(goal, cycles)
            if notes:
                decision["reason"] = f"{decision['reason']}. {' '.join(notes)}"
        env.log(f"narrow: {decision['metric']}")
        progress.write_progress(
            env.layout, env.spec, self.views.summary_decisions(env, decision), env.worktree
        )

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        goal = goal_of(env.spec, env.layout.name)
        r = GoalStep.from_json(decision["narrow"], env.layout.decision(env.cycle), "narrow.")
        if r.current is None:
            return f"the measurement command fails even after reverting the cycle: {r.error}"
        if r.met:
            return f"goal met: {goal.metric} is {r.value:g} (target {goal.target})"
        if r.next_angle is None:
            return (
                f"all angles exhausted (angle {r.angle!r}: {r.exhausted_now}); "
                f"{goal.metric} is {r.current:g}, target {goal.target}"
            )
        return None

    # --- the loop's decisions, read as narrow's record ------------------------------------

    def decisions(self, layout: SessionLayout) -> list[Decision]:
        return journal.load_decisions(layout, "", NarrowStep)

    def previous_goal(self, env: StageEnv) -> GoalStep | None:
        """The goal record of the cycle before this one (None: the first cycle)."""
        prev = self.previous_step(env)
        return prev.extra.narrow if prev else None  # type: ignore[attr-defined]

    def plot(self, env: StageEnv, out: Path) -> None:
        progress.plot_progress(env.layout, env.spec, self.decisions(env.layout), out)


def current_angle(env: StageEnv, prev: GoalStep | None) -> Angle:
    """The angle this cycle works on, from the previous cycle's goal record."""
    angles = angles_of(env.spec, env.layout.name)
    state = state_before(angles, prev)
    return next((a for a in angles if a.name == state.angle), angles[0])


def _try_measure(goal: Goal, env: StageEnv) -> tuple[float | None, list[float], str | None]:
    env.pristine()  # the committed tree alone, the measurement script as the base has it
    try:
        m = goal.measure(env.worktree, env.spec.secrets, env.jail)
    except metrics.MetricError as err:
        return None, [], str(err)
    return m.value, m.samples, None


def revert_cycle(
    env: StageEnv,
    decision: dict[str, Any],
    goal: Goal,
    value: float | None,
    error: str | None = None,
) -> bool:
    """Undo what the cycle kept (revert.py's order) and update the decision so it says what
    is on the branch now. True if anything was undone. A tampered measurement (guard.py)
    is said as such: each reverted fix's record names what the measured process changed."""
    from autoresearch.engine.evaluate import (
        refactor_record,  # loaded already: this is the judging job
    )

    start = decision["start_commit"]
    done = {r["commit"] for r in decision["reverted"]}
    refactor = refactor_record(env) or {}
    shown = "unmeasurable" if value is None else f"{value:g}"
    why = f"{goal.metric} {shown} is worse than the baseline"
    if value is None and error and error.startswith(metrics.TAMPERED):
        why = f"{goal.metric}: {error.splitlines()[0]}"
    order = [c["commit"] for c in reversed(refactor.get("commits", [])) if c["commit"] not in done]
    order += [f["commit"] for f in reversed(decision["fixed"])]
    if any(r["how"] == "reset" for r in decision["reverted"]):
        order = []  # evaluate already reset the worktree to the cycle's start
    undone = undo_cycle(
        env.worktree, start, order, why=why, log=lambda line: env.log(f"narrow: {line}")
    )
    if not undone:
        return False
    env.log(f"narrow: {why}; reverted {len(undone)} commit(s)")
    worktree = env.worktree
    end = git.head(worktree)
    decision["reverted"] = decision["reverted"] + undone
    # The reverted fixes were tried: listing them as skipped keeps Red from reporting them
    # again (journal.History.tried_lines) and the audit trail says why they are gone.
    decision["skipped"] = decision["skipped"] + [
        {"id": f["id"], "key": f["key"], "reason": f"reverted: {why}"} for f in decision["fixed"]
    ]
    decision["fixed"] = []
    decision["refactor_changes"] = 0
    decision["end_commit"] = end
    decision["files_changed"] = git.changed_files(worktree, start, end)
    decision["commits_total"] = env.commits_total(start, end)
    # The tree is the cycle's start again, whose test run the previous cycle recorded.
    reference = env.reference_tests()
    decision["tests_pass"] = reference.ok
    decision["tests"] = reference.to_record()
    decision["test_summary"] = f"after reverts: {reference.summary}"
    decision["tests_removed"] = []  # the cycle's start has every test it started with
    return True

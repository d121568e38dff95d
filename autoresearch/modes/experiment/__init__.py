"""Experiment: one atomic change per iteration, kept only if the metric strictly improves.

Each iteration is `experiment_propose` (the agent, stages.propose) and the checkpoint
`experiment_decide` (the one decide job: this mode's `judge`, then its stop rules), under
`sessions/<name>/iterations/NNN/`; with `experiment.parallel: k`, k candidates proposed
and measured as jobs of their own (batch.py) before the one decide. At the end,
report.md and progress.png, and the run mirrored into an output folder if the spec names
one (runs.py).
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from autoresearch.engine import tally
from autoresearch.engine.loop import Decision, Judged
from autoresearch.engine.stage import StageEnv, jail_for
from autoresearch.measure import measured
from autoresearch.safety import git
from autoresearch.safety.command_files import measurement_scripts
from autoresearch.safety.commands import CommandResult
from autoresearch.session import spec
from autoresearch.session.changesets import ChangeNote
from autoresearch.session.files import read_json, write_json, write_text
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec
from autoresearch.views import journal
from autoresearch.views.session_report import MetricChange, ReportStep

from ...errors import SessionError, SpecError
from .. import cycle_view
from ..base import Ended, Mode, PlannedMetric, Progress, part, review_line
from . import guard as guards
from . import holdout, preserve, report, runs, show
from . import log as logs
from .log import fmt
from .policy import KEPT, noise_note, should_stop
from .program import GUARD_OFF, ExperimentConfig, resolve, target_path
from .stages import (
    _measure_record,
    baseline_record,
    config_of,
    experiments,
    final_reason,
    key_of,
    publish_run,
    records,
    setup_state,
    write_iteration_logs,
)
from .step import ExperimentStep

CONFIG_FILE = "config.json"
# What `autoresearch new --mode experiment` writes into the spec, to edit.
SPEC_EXAMPLE = """
experiment:
  program: program.md                      # in the target: a yaml block plus prose
  # mission: .pi/autoresearch/speed        # or a mission folder: mission.md, evaluator.json
  # parallel: 3                            # candidates per iteration, measured at once
  # resources: {gpu: 1}                    # for each measurement job (cluster profiles)
"""


class ExperimentSetup(Mode.setup):
    rule_prefix = "experiment_"
    loop_stages = ("propose", "decide")
    stage_files = {
        "propose": ("proposal.md", "proposal.json", "proposal.patch"),
        "decide": ("evaluation.md", "measurements.json", "decision.json"),
    }
    stage_rules = {"propose": "experiment_propose", "decide": "experiment_decide"}
    spec_loop_keys = ""  # max_iterations and max_duration bound it; one team

    def unmade_files(self, decision: dict[str, Any]) -> frozenset[str]:
        """An iteration that measured nothing (a syntax error, no change, a refused or stale
        proposal) has no measurements.json: its decision claims no value to back."""
        if decision.get("metric_value") is None and not decision.get("samples"):
            return frozenset({"measurements.json"})
        return frozenset()

    plannable = True
    tests_optional = True  # the target's tests are the default guard, when it has any

    def plan_spec(self, plan: PlannedMetric) -> dict[str, Any]:
        """The experiment keys for a dry-run metric; the goal doubles as the research text."""
        section: dict[str, Any] = {
            "goal": plan.goal,
            "research": plan.goal,
            "scope": list(plan.scope),
            "metric": {
                "command": plan.command,
                "format": plan.format,
                "key": plan.key,
                "direction": plan.direction,
            },
            "guard": plan.guard or GUARD_OFF,  # the plan asked; none means none
            "verify_timeout_s": plan.timeout_s,
            "max_iterations": plan.max_iterations,
        }
        if plan.target:
            section["target"] = plan.target
        return {"experiment": section}

    def branch_name(
        self, session: str, values: dict[str, Any] | None = None, target: Path | None = None
    ) -> str:
        """program.md's git_branch when it names one (a taken name gets `-2`, ...)."""
        if values is not None and target is not None:
            cfg = resolve(values, target, f"config/sessions/{session}.yaml")
            if cfg.git_branch:
                return cfg.git_branch
        return super().branch_name(session)

    def check_spec(self, values: dict[str, Any], name: str) -> None:
        target = git.toplevel(spec.resolve_target(str(values["target"])))
        cfg = resolve(values, target, f"config/sessions/{name}.yaml")
        for path in cfg.scope:
            if not any(c in path for c in "*?[") and not (target / path).exists():
                where = (
                    f"{target / cfg.program}: key 'target_file'"
                    if cfg.program
                    else f"config/sessions/{name}.yaml: key 'experiment.scope'"
                )
                raise SpecError(
                    f"{where}: {path!r} is not in {target}; name a file the experiments may change"
                )

    def describe_spec(self, values: dict[str, Any], name: str) -> list[str]:
        """The experiment configuration as parsed from program.md and the spec."""
        target = git.toplevel(spec.resolve_target(str(values["target"])))
        cfg = resolve(values, target, f"config/sessions/{name}.yaml")
        shown = {k: v for k, v in vars(cfg).items() if k != "research"}
        lines = [f"experiment config of session {name!r} (program.md and the spec):"]
        return lines + [
            f"  {key}: {value}" for key, value in shown.items() if value not in (None, "")
        ]

    def on_setup(
        self, layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log
    ) -> None:
        """Baseline measurement (experiment 0), guard check, the frozen experiment config."""
        cfg = resolve(values, Path(record.target), f"config/sessions/{layout.name}.yaml")
        cfg = guards.with_default(cfg, record, values)
        log(f"guard: {guards.describe(cfg)}")
        worktree = layout.worktree().resolve()
        secrets = values.get("secrets")
        box = jail_for(layout, record.worktrees, values.get("commands"), worktree)
        # What the metric (or evaluator) runs, watched in a run of its own (measured.py).
        watcher = measured.Watcher(
            worktree, record.base_commit, measured.scope_rule(cfg.scope), measurement_scripts
        )
        timeout = cfg.verify_timeout_s
        for key, command in (("experiment.metric.command", cfg.command),
                             ("experiment.baseline_command", cfg.baseline_command)):  # fmt: skip
            if command:
                watcher.run(key, command, timeout_s=timeout, secrets=secrets, jail=box)
        base = _measure_record(cfg, worktree, secrets, box, cfg.baseline_command)
        if "error" in base:
            raise SpecError(
                f"experiment.metric.command cannot measure the base commit, so no experiment "
                f"could ever be judged:\n{base['error']}"
            )
        with tempfile.TemporaryDirectory(prefix="autoresearch-trace-") as traced:
            # The guard's own check on the base commit is the run that is traced: whether
            # it passes does not depend on how fast it runs.
            guarded = guards.plain(cfg, worktree, secrets, box, trace_to=Path(traced))
            if guarded is not None:
                seen, note = measured.read_run(Path(traced), worktree)
                watcher.saw("experiment.guard", cfg.guard, seen, note)
        problem = base_guard_problem(cfg, guarded)
        if problem:
            raise SpecError(problem)
        held = setup_holdout(cfg, worktree, record.base_commit, watcher, secrets, box, log)
        # The measurement may leave files behind (the holdout's: ignored ones too).
        git.reset_to(worktree, record.base_commit, ignored=bool(cfg.holdout))
        # The baseline as the branch's first commit (empty: the tree is the target's), so
        # `git log` of the branch reads as the run did; experiments start from it.
        record.base_commit = git.commit_empty(
            worktree, f"autoresearch: baseline {key_of(cfg)}={fmt(base['value'])}"
        )
        for note in watcher.watch.notes:
            log(f"warning: {note}")
            record.warnings.append(note)
        started = time.time()
        run_id = f"{layout.name}-{dt.datetime.fromtimestamp(started, dt.UTC):%Y%m%dT%H%M%SZ}"
        values["experiment"] = cfg.to_spec()
        existing = list(values.get("protected") or [])
        # program.md (or the mission's files) is the human's: the agent may read it but
        # never change it. What the metric and guard run is the measurement. Each is that
        # file (`./program.md`), not its name in every folder.
        human = [measured.anchored(p) for p in cfg.human_files()]
        holdout = [measured.anchored(p) for p in cfg.holdout_files]
        values["protected"] = list(
            dict.fromkeys([*existing, *human, *watcher.watch.patterns(), *holdout])
        )
        labels = {p: "the holdout's (hidden from the agent)" for p in holdout}
        labels |= {p: "the human's program file" for p in human}
        labels |= {p: "spec key protected" for p in existing}
        record.measured = watcher.watch.to_record(values["protected"], labels)
        run_folder = None
        output = target_path(cfg.output, Path(record.target)) if cfg.output else None
        if output is not None and runs.unignored_in_checkout(output, Path(record.target)):
            log(
                f"warning: experiment.output {cfg.output} is inside {record.target} and "
                "git does not ignore its runs/ folder: add it to .gitignore, or the run "
                "leaves untracked files in your checkout"
            )
        if output is None and cfg.mission:
            # A mission's runs go into its own folder, unless they would show up there as
            # untracked files (a dirty checkout refuses the next session): then they stay
            # under the session, and the log says how to have them in the mission folder.
            mission = target_path(cfg.mission, Path(record.target))
            if runs.unignored_in_checkout(mission, Path(record.target)):
                note = (
                    f"the run is kept under sessions/{layout.name}/, not in {cfg.mission}/runs/: "
                    f"git does not ignore that folder in {record.target}; add `runs/` to "
                    f"{cfg.mission}/.gitignore (or set experiment.output) to have it there"
                )
                log(f"note: {note}")
                record.warnings.append(note)
            else:
                output = mission
        if output is not None:
            run_folder = str(runs.claim(output / "runs", run_id, layout.name))
        write_json(
            layout.experiment_setup,
            {
                "run_id": run_id,
                "run_folder": run_folder,
                "started_epoch": started,
                "started_at": journal.now(),
                "base_commit": record.base_commit,
                "branch": record.branch,
                "baseline": base,
                **({"holdout": held} if held else {}),
            },
        )
        # The frozen configuration beside baseline.json, as the loop documents expect it.
        write_json(layout.baseline.with_name(CONFIG_FILE), values["experiment"])
        for path in (layout.experiments_jsonl, layout.results_data):
            path.unlink(missing_ok=True)  # a rerun of setup starts the logs again
        rec0 = baseline_record(setup_state(layout))
        write_iteration_logs(layout, cfg, rec0, [rec0], run_id)
        log(f"baseline {key_of(cfg)} = {base['value']:g} (samples {base['samples']}); run {run_id}")

    def set_aside(self, layout: SessionLayout, cycle: int, track: str, dest: Path) -> None:
        """The redone iterations leave experiments.jsonl, results-data.json and
        evaluations/ (a rerun appends to the first only when its id is not logged yet)."""
        entries = logs.read_jsonl(layout.experiments_jsonl)
        if entries:
            for path, keep in (
                (dest / "experiments.jsonl", False),
                (layout.experiments_jsonl, True),
            ):
                lines = [json.dumps(e) for e in entries if (e.get("id", 0) < cycle) == keep]
                write_text(path, "".join(f"{line}\n" for line in lines))
        data = read_json(layout.results_data) or []
        if data:
            later = [d for d in data if d.get("experiment_id", 0) >= cycle]
            write_json(dest / "results-data.json", later)
            write_json(layout.results_data, [d for d in data if d not in later])
        for path in sorted(layout.evaluation(0).parent.glob("iteration-*.json")):
            if int(path.stem.split("-")[1]) >= cycle:
                (dest / "evaluations").mkdir(parents=True, exist_ok=True)
                path.replace(dest / "evaluations" / path.name)

    def teams_needed(self, values: dict[str, Any]) -> set[str]:
        """Every iteration is the experiment team's."""
        return {"experiment"}


class ExperimentViews(Mode.views):
    step_word = "iteration"
    lists_cycles = False  # the Experiment section summarises the iterations
    kept_label = "changes kept"

    def summary_decisions(
        self, env: StageEnv, pending: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Experiment 0 (the baseline) and every iteration so far."""
        recs = records(env.layout, upto=pending["iteration"] if pending else None)
        return recs + ([pending] if pending else [])

    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        cfg = config_of(env.spec)
        key = key_of(cfg)
        best = decisions[-1]["best"]
        c = logs.counts(decisions)
        lines = [
            "## Experiment",
            f"- Goal: {cfg.goal}",
            f"- Metric: `{cfg.command}` ({cfg.format}{', key ' + cfg.key if cfg.key else ''}), "
            f"{cfg.direction}" + (f", target {cfg.target}" if cfg.target else ""),
            f"- Scope: {', '.join(cfg.scope)}",
            f"- Guard: {guards.describe(cfg)}",
            f"- Baseline: {key} = {fmt(decisions[0]['metric_value'])}",
            f"- Best: {key} = {fmt(best['value'])} (experiment {logs.best_name(best)})",
            f"- Improvements: {c['improvements']} | Regressions: {c['regressions']} | "
            f"Errors: {c['errors']}",
        ]
        return "\n".join(lines)

    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        """The loop's last decision, then the report and the plot."""
        final = self.final_decision(layout, checkpoints)
        return [final, rel(layout.report), rel(layout.progress_plot)]

    def end_files(self, layout: SessionLayout, track: str = "") -> list[Path]:
        """Report and plot are made once, from every iteration: a redo makes them again."""
        made = []
        made_by = ((layout.report, "experiment_report"), (layout.progress_plot, "experiment_plot"))
        for path, rule in made_by:
            made += [path, layout.logs / f"{rule}.log", layout.root / "benchmarks" / f"{rule}.tsv"]
        return [*made, *super().end_files(layout, track)]

    def report_steps(self, layout: SessionLayout) -> list[ReportStep]:
        """Every iteration: its evaluation.md, whether its change was kept, its guard."""
        iterations = records(layout)[1:]
        ranged = any(r.get("end_commit") for r in iterations)
        repo = cycle_view.repo_of(layout, "") if ranged else None
        return [
            ReportStep(
                track="",
                cycle=r["iteration"],
                evaluation=layout.cycle(r["iteration"]) / "evaluation.md",
                kept=int(r["status"] == KEPT),
                tests_pass=r.get("guard_ok"),  # None: the program has no guard
                stopped=r.get("reason") if r.get("stop") else None,
                commits=(r["start_commit"], r["end_commit"])
                if r.get("start_commit") and r.get("end_commit")
                else None,
                repo=repo,
            )
            for r in iterations
        ]

    def report_metric(self, env: StageEnv) -> MetricChange | None:
        """The metric at the baseline and the best kept, in the program's direction."""
        cfg = config_of(env.spec)
        recs = records(env.layout)
        best = (recs[-1].get("best") or {}).get("value")
        return MetricChange(key_of(cfg), recs[0]["metric_value"], best, cfg.direction)

    def cycle_page(self, spec: SessionSpec, decision: dict[str, Any]) -> tuple[str, str] | None:
        from .stages import render_evaluation

        return "evaluation.md", render_evaluation(decision, key_of(config_of(spec)))

    def render_done(self, ended: Ended) -> str | None:
        layout, cfg = ended.layout, config_of(ended.spec)
        recs = [baseline_record(setup_state(layout)), *ended.decisions]
        c = logs.counts(recs)
        last = recs[-1]
        best = last["best"]
        lines = [
            f"session: {layout.name}",
            "mode: experiment",
            f"stopped: {final_reason(recs) or 'finished'}",
            f"iterations: {len(recs) - 1}",
        ]
        if cfg.parallel > 1:
            lines.append(f"experiments: {c['total']} ({cfg.parallel} candidates per iteration)")
        lines += [
            f"improvements: {c['improvements']}",
            f"regressions: {c['regressions']}",
            f"errors: {c['errors']}",
            f"baseline: {key_of(cfg)} = {fmt(recs[0]['metric_value'])}",
            f"best: {key_of(cfg)} = {fmt(best['value'])} (experiment {logs.best_name(best)})",
            f"final commit: {last['end_commit']}",
            review_line(ended.record),
        ]
        setup = setup_state(layout)
        lines.append(f"run: {setup['run_id']}")
        preserved = [r["preserved"] for r in logs.each_experiment(recs) if r.get("preserved")]
        if preserved:
            lines.append(
                f"preserved (not kept): {len(preserved)} under "
                f"{preserve.REF_ROOT}/{setup['run_id']}/ (git show <ref>)"
            )
        if setup.get("run_folder"):
            lines.append(f"run folder: {setup['run_folder']}")
        return "\n".join(lines) + "\n"

    def write_done(self, env: StageEnv, out: Path) -> None:
        recs = records(env.layout)
        if setup_state(env.layout).get("run_folder"):
            publish_run(env.layout, config_of(env.spec), recs, finished=True)
        write_text(out, self.render_done(Ended(env.layout, env.record, env.spec, recs[1:])) or "")

    def kept_count(self, layout: SessionLayout) -> int | str:
        """The iterations kept (each one commit)."""
        if not layout.experiment_setup.exists():
            return super().kept_count(layout)
        return tally.read(layout).kept

    def progress(self, layout: SessionLayout) -> Progress:
        """Iterations, kept changes (each one commit), and whether the guard held."""
        if not layout.experiment_setup.exists():
            return super().progress(layout)
        recs = records(layout)[1:]
        kept = [r for r in recs if r["status"] == KEPT]
        return Progress(
            started=bool(recs),
            cycles=len(recs),
            commits=len(kept),
            fixes=len(kept),
            tests="n/a" if not recs else ("pass" if recs[-1]["tests_pass"] else "FAIL"),
            open_issues=0,
        )

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        """Baseline, best, counts, the last five iterations."""
        if not layout.experiment_setup.exists() or "experiment" not in spec:
            return ["(experiment not set up yet)"]
        cfg = config_of(spec)
        key = key_of(cfg)
        recs = records(layout)
        c = logs.counts(recs)
        best = recs[-1]["best"]
        setup = setup_state(layout)
        lines = [
            f"Run: {setup['run_id']}",
            f"Baseline: {key} = {fmt(recs[0]['metric_value'])} (experiment 0)",
            f"Best: {key} = {fmt(best['value'])} (set by experiment {logs.best_name(best)})",
            f"Total experiments: {c['total']}"
            + (f" ({cfg.parallel} candidates per iteration)" if cfg.parallel > 1 else ""),
            f"Improvements: {c['improvements']} | Regressions: {c['regressions']} | "
            f"Errors: {c['errors']}",
            f"Branch: {setup.get('branch', '')}",
            f"Last experiment: {recs[-1]['timestamp'] if len(recs) > 1 else 'none yet'}",
        ]
        # The CLI prints the stop reason itself.
        recent = [r for r in recs if r["iteration"] > 0][-5:]
        if recent:
            lines += ["", "Recent experiments:"]
            lines += [f"  {logs.status_line(r, key)}" for r in reversed(recent)]
        held = holdout.series(recs, key, last=10)
        if held:
            lines += ["", "Metric and holdout (the holdout is never shown to the agent):"]
            lines += [f"  {line}" for line in held]
        return lines

    def change_notes(
        self, layout: SessionLayout, track: str, spec: SessionSpec
    ) -> dict[str, ChangeNote]:
        """Each kept experiment's hypothesis (the agent's own, which made the change) and
        the metric as the session measured it against the incumbent."""
        key = key_of(config_of(spec))
        notes = {}
        for rec in experiments(layout):
            if rec.get("status") != KEPT:
                continue
            name = f"#{rec['iteration']}" + (f"/{rec['candidate']}" if rec.get("candidate") else "")
            hypothesis = " ".join(rec["hypothesis"].split())
            noisy = noise_note(rec.get("verdict") or "")
            notes[rec["end_commit"]] = ChangeNote(
                hypothesis,
                (
                    f"Experiment {name}: {hypothesis}",
                    f"{key}: {fmt(rec.get('baseline_value'))} → {fmt(rec.get('metric_value'))} "
                    "(the session's measurement, against the best before it)",
                    *([noisy] if noisy else []),
                ),
            )
        return notes

    def show(
        self, layout: SessionLayout, spec: SessionSpec, iteration: int, candidate, track=""
    ) -> str:
        """One experiment's hypothesis, measurements, verdict and diff."""
        if not layout.experiment_setup.exists():
            raise SessionError(f"session {layout.name!r} is not set up yet: nothing to show")
        return show.render(layout, key_of(config_of(spec)), iteration, candidate)


class Experiment(Mode):
    name = "experiment"
    tamper_profile = None  # every proposal is screened with every check (stages.py)
    spec_example = SPEC_EXAMPLE
    loop = "iterations"
    decide_checkpoint = "experiment_decide"
    branch = "autoresearch/experiment/{name}"

    decision_extra = ExperimentStep
    setup = part(ExperimentSetup)
    views = part(ExperimentViews)

    def cycle_cap(self, spec: SessionSpec) -> int | None:
        return None  # max_iterations and max_duration are the experiment's own stop rules

    def judge(self, env: StageEnv, output: Any) -> Judged:
        """Measure and guard the proposal (or read a batch's measurements), commit the best
        strictly better one or reset; the results are the iteration's logs, results.tsv and
        evaluation.md (`output.results`)."""
        from . import batch, stages  # the measuring code: loaded by the job that decides

        rec = batch.decide(env)
        return Judged(rec, lambda r: stages.write_iteration(env, r, Path(output.results)))

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """Iteration or time limit, target reached, a crash loop, stuck, a plateau."""
        cfg = config_of(env.spec)
        history = records(env.layout, upto=env.cycle)[1:] + [decision]
        setup = setup_state(env.layout)
        elapsed = time.time() - setup["started_epoch"]
        return should_stop(history, cfg, elapsed, setup["baseline"]["value"])

    def log_line(self, env: StageEnv, decision: Decision) -> str:
        step = decision.extra
        assert isinstance(step, ExperimentStep)  # loop.decide read it into decision_extra
        return (
            f"iteration {env.cycle}: {decision.status_text} ({step.verdict or step.error or ''})"
            + (f"; stopping: {decision.reason}" if decision.stop else "")
        )

    def write_report(self, env: StageEnv, out: Path) -> None:
        cfg = config_of(env.spec)
        recs = records(env.layout)
        write_text(out, report.report(recs, key_of(cfg), env.record.branch, final_reason(recs)))

    def write_plot(self, env: StageEnv, out: Path) -> None:
        cfg = config_of(env.spec)
        report.plot(records(env.layout), key_of(cfg), cfg.direction, out)


def setup_holdout(
    cfg: ExperimentConfig, worktree: Path, base: str, watcher, secrets, box, log
) -> dict[str, Any] | None:
    """The holdout's files (into `cfg.holdout_files`) and its baseline {"value",
    "samples"}; None without a holdout. SpecError when it cannot measure the base commit."""
    if not cfg.holdout:
        return None
    files, notes = holdout.private_files(
        cfg, worktree, base, watcher.watch.protected(), secrets, box
    )
    cfg.holdout_files = files
    for note in notes:
        log(f"warning: experiment.holdout: {note}")
    held = holdout.measure(cfg, worktree, secrets, box)
    if "error" in held:
        raise SpecError(
            "experiment.holdout cannot measure the base commit, so no change could be "
            f"checked against it:\n{held['error']}"
        )
    log(f"baseline holdout = {held['value']:g} (samples {held['samples']}); hidden from the agent")
    return held


def base_guard_problem(cfg: ExperimentConfig, guard: CommandResult | None) -> str | None:
    """What is wrong with the guard's run on the base commit, or None when it passed (or
    there is none). A timeout says so and after how long: it is not a failing guard."""
    if guard is None or guard.ok:
        return None
    if guard.timed_out:
        return (
            f"experiment.guard `{cfg.guard}` timed out on the base commit: stopped after "
            f"{guard.duration_s:.0f}s (experiment.guard_timeout_s is {cfg.guard_timeout:g}s, "
            "default: the verify timeout); raise it or make the guard faster."
            f"\n{guard.tail(2000)}"
        )
    return (
        f"experiment.guard `{cfg.guard}` fails on the base commit (exit code "
        f"{guard.exit_code}), so every change would be discarded; make it pass first, or "
        "leave `guard` out: the default guard runs the target's test command judged by test "
        "identity, where a test failing on the base may stay failing"
        f"\n{guard.tail(2000)}"
    )

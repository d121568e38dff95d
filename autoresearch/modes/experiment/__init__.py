"""Experiment: one atomic change per iteration, kept only if the metric strictly improves.

Each iteration is `experiment_propose` (the agent, stages.propose) and the checkpoint
`experiment_decide` (stages.decide, then this mode's stop rules), under
`sessions/<name>/iterations/NNN/`. At the end, report.md and progress.png.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from ... import git, journal, metrics, spec
from ...errors import SpecError
from ...files import write_json, write_text
from ...layout import SessionLayout, rel
from ...record import SetupRecord
from ...spec import SessionSpec
from ...stage import StageEnv
from ..base import Mode
from . import log as logs
from . import report
from .log import fmt
from .policy import should_stop
from .program import resolve
from .stages import (
    _guard,
    _measure,
    baseline_record,
    config_of,
    key_of,
    records,
    setup_state,
    write_iteration_logs,
)

# What `autoresearch new --mode experiment` writes into the spec, to edit.
SPEC_EXAMPLE = """
experiment:
  program: program.md                      # in the target: a yaml block plus prose
"""


class Experiment(Mode):
    name = "experiment"
    spec_example = SPEC_EXAMPLE
    loop = "iterations"
    branch = "autoresearch/experiment/{name}"
    lists_cycles = False  # the Experiment section summarises the iterations

    def check_spec(self, values: dict[str, Any], name: str) -> None:
        target = git.toplevel(spec.resolve_target(str(values["target"])))
        resolve(values, target, f"config/sessions/{name}.yaml")

    def on_setup(
        self, layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log
    ) -> None:
        """Baseline measurement (experiment 0), guard check, the frozen experiment config."""
        cfg = resolve(values, Path(record.target), f"config/sessions/{layout.name}.yaml")
        for warning in cfg.warnings:
            log(f"warning: {warning}")
        worktree = layout.worktree()
        secrets = values.get("secrets")
        try:
            sample, m = _measure(cfg, worktree, secrets, cfg.baseline_command)
        except metrics.MetricError as err:
            raise SpecError(
                f"experiment.metric.command cannot measure the base commit, so no experiment "
                f"could ever be judged:\n{err}"
            ) from None
        guard = _guard(cfg, worktree, secrets)
        if guard is not None and guard.timed_out:
            raise SpecError(
                f"experiment.guard `{cfg.guard}` timed out after {cfg.guard_timeout:g}s on the "
                "base commit; raise experiment.guard_timeout_s (default: the verify timeout) or "
                f"make the guard faster.\n{guard.tail(2000)}"
            )
        if guard is not None and not guard.ok:
            raise SpecError(
                f"experiment.guard `{cfg.guard}` fails on the base commit, so every change "
                f"would be discarded; make it pass first.\n{guard.tail(2000)}"
            )
        git.reset_to(worktree, record.base_commit)  # the measurement may leave files behind
        started = time.time()
        run_id = f"{layout.name}-{dt.datetime.fromtimestamp(started, dt.UTC):%Y%m%dT%H%M%SZ}"
        values["experiment"] = cfg.to_spec()
        if cfg.program:
            # program.md is the human's; the agent may read it but never change it.
            values["protected"] = list(values.get("protected") or []) + [cfg.program]
        write_json(
            layout.experiment_setup,
            {
                "run_id": run_id,
                "started_epoch": started,
                "started_at": journal.now(),
                "base_commit": record.base_commit,
                "branch": record.branch,
                "baseline": {
                    "value": sample.value,
                    "samples": sample.samples,
                    "passed": sample.passed,
                    "notes": m.notes,
                    "raw": m.raw,
                },
            },
        )
        for path in (layout.experiments_jsonl, layout.results_data):
            path.unlink(missing_ok=True)  # a rerun of setup starts the logs again
        rec0 = baseline_record(json.loads(layout.experiment_setup.read_text()))
        write_iteration_logs(layout, cfg, rec0, [rec0], run_id)
        log(f"baseline {key_of(cfg)} = {sample.value:g} (samples {sample.samples}); run {run_id}")

    def cycle_cap(self, spec: SessionSpec) -> int | None:
        return None  # max_iterations and max_duration are the experiment's own stop rules

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """Iteration or time limit, target reached, a crash loop, stuck, a plateau."""
        cfg = config_of(env.spec)
        history = records(env.layout, upto=env.cycle)[1:] + [decision]
        setup = setup_state(env.layout)
        elapsed = time.time() - setup["started_epoch"]
        return should_stop(history, cfg, elapsed, setup["baseline"]["value"])

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
            f"- Guard: {cfg.guard or 'none'}",
            f"- Baseline: {key} = {fmt(decisions[0]['metric_value'])}",
            f"- Best: {key} = {fmt(best['value'])} (experiment {best['experiment_id']})",
            f"- Improvements: {c['improvements']} | Regressions: {c['regressions']} | "
            f"Errors: {c['errors']}",
        ]
        return "\n".join(lines)

    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        """The loop's last decision, then the report and the plot."""
        final = self.final_decision(layout, checkpoints)
        return [final, rel(layout.report), rel(layout.progress_plot)]

    def final_decision(self, layout: SessionLayout, checkpoints: Any) -> str:
        cycle = layout.next_open_cycle()
        job = checkpoints.experiment_decide.get(name=layout.name, cycle=f"{cycle:03d}")
        return job.output.decision

    def write_report(self, env: StageEnv, out: Path) -> None:
        cfg = config_of(env.spec)
        recs = records(env.layout)
        write_text(out, report.report(recs, key_of(cfg), env.record.branch, final_reason(recs)))

    def write_plot(self, env: StageEnv, out: Path) -> None:
        cfg = config_of(env.spec)
        report.plot(records(env.layout), key_of(cfg), cfg.direction, out)

    def write_done(self, env: StageEnv, out: Path) -> None:
        cfg = config_of(env.spec)
        recs = records(env.layout)
        c = logs.counts(recs)
        last = recs[-1]
        best = last["best"]
        lines = [
            f"session: {env.layout.name}",
            "mode: experiment",
            f"stopped: {final_reason(recs) or 'finished'}",
            f"iterations: {c['total']}",
            f"improvements: {c['improvements']}",
            f"regressions: {c['regressions']}",
            f"errors: {c['errors']}",
            f"baseline: {key_of(cfg)} = {fmt(recs[0]['metric_value'])}",
            f"best: {key_of(cfg)} = {fmt(best['value'])} (experiment {best['experiment_id']})",
            f"final commit: {last['end_commit']}",
            f"review with: git -C {env.record.target} log --oneline "
            f"{env.record.base_commit[:12]}..{env.record.branch}",
        ]
        write_text(out, "\n".join(lines) + "\n")

    def progress(self, layout: SessionLayout) -> dict[str, Any]:
        """Iterations, kept changes (each one commit), and whether the guard held."""
        if not layout.experiment_setup.exists():
            return super().progress(layout)
        recs = records(layout)[1:]
        kept = [r for r in recs if r["status"] == "kept"]
        return {
            "cycles": len(recs),
            "commits": len(kept),
            "fixes": len(kept),
            "tests": "n/a" if not recs else ("pass" if recs[-1]["tests_pass"] else "FAIL"),
            "open_issues": 0,
        }

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
            f"Baseline: {key} = {fmt(recs[0]['metric_value'])} (experiment 0)",
            f"Best: {key} = {fmt(best['value'])} (set by experiment {best['experiment_id']})",
            f"Total experiments: {c['total']}",
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
        return lines


def final_reason(recs: list[dict[str, Any]]) -> str | None:
    return next((r.get("reason") for r in reversed(recs) if r.get("stop")), None)

"""Fix: drive an error count to zero, one error per iteration, kept only when the count fell.

Setup counts the errors (`fix.errors`: commands with a parser each; default the stack's tests
and linter) and checks the guard. Each iteration is `fix_attempt` (the agent fixes the first
error in fixing order that is not blocked) and the checkpoint `fix_decide` (stages.decide,
then the stop rules: zero errors, everything left blocked, the cap), under
`sessions/<name>/fixes/NNN/`. The lens report writes findings.md (what is left), summary.md
(before → after per category), blocked.md and handoff.json; `fix-results.tsv` has a row per
iteration.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoresearch.engine import chain
from autoresearch.engine.loop import Decision, Extra, Judged, absent
from autoresearch.engine.stage import StageEnv
from autoresearch.measure import measured
from autoresearch.safety import commands, git
from autoresearch.session.layout import SESSIONS, SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec
from autoresearch.views import journal

from ...errors import SpecError
from ..base import Ended, part, review_line
from ..lens import check_ended, error_counts, lens_log
from ..lens.changing import ChangingLens, kept_steps
from ..lens.error_counts import Error
from ..lens.output import Writer
from ..narrow.protect import TEST_GLOBS
from . import count as counting
from . import regression, report
from .stages import KEPT, blocked_of

SPEC_EXAMPLE = """
fix:
  # What counts as an error (default: the test command's failures and ruff's diagnostics).
  errors:
    - {command: "python -m pytest -q", parser: pytest}
    - command: python -m ruff check --no-cache --no-fix --exit-zero --output-format json .
      parser: ruff
  # guard: python -m pytest -q     # must pass for a change to be kept
  protect_tests: true              # fixes change the code, never its tests
"""
# A priority (error_counts.PRIORITY) as a severity, for the fail_on gate on what is left.
SEVERITY = {
    "build": "critical",
    "critical": "critical",
    "high": "high",
    "type": "high",
    "test": "high",
    "medium": "medium",
    "low": "low",
    "lint": "low",
    "warning": "info",
}


@dataclass(frozen=True)
class FixStep(Extra):
    """What a fix iteration adds to its decision: the error it worked, what the diff check,
    the count and the guard said, and the counts it leaves for the next iteration."""

    iteration: int
    run_id: str
    error: dict[str, Any] | None  # None: no error was left to work
    summary: str
    violations: list[str]  # what the diff must not contain
    guard: dict[str, Any] | None
    fixed: list[str]  # the identities of the errors gone
    revealed: int
    verdict: str
    before: int
    after: int
    counts_after: list[dict[str, Any]]
    files_changed: list[str]
    timestamp: str
    tests_pass: bool
    session_stop: str | None
    broken: bool
    final: bool  # a deterministic backend's failure: no retry
    blocked: list[str]
    introduced: int | None = absent()  # only once the change was counted


class FixViews(ChangingLens.views):
    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        baseline = [counting.from_json(c) for c in self.setup_data(env.layout)["baseline"]]
        now = (
            [counting.from_json(c) for c in decisions[-1]["counts_after"]]
            if decisions
            else baseline
        )
        kept = kept_steps(decisions)
        lines = [
            "## Fix",
            f"- Errors: {len(counting.errors_of(baseline))} at the base commit, "
            f"{len(counting.errors_of(now))} now",
            f"- Iterations: {len(decisions)}, kept: {kept}, "
            f"blocked: {len(decisions[-1]['blocked']) if decisions else 0}",
        ]
        lines += [f"- Iteration {d['cycle']}: {d['status']} — {report.what(d)}" for d in decisions]
        return "\n".join(lines)

    def done_counts(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        return [
            f"iterations: {len(ended.decisions)}",
            f"fixes kept: {kept_steps(ended.decisions)}",
            f"errors: {data['errors_before']} → {data['errors_after']}",
            f"blocked: {sum(1 for f in data['findings'] if f['blocked'])} of those left",
        ]

    def done_report(self, layout: SessionLayout) -> Path:
        return self.summary_path(layout)

    def done_tail(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        decisions, record = ended.decisions, ended.record
        end = decisions[-1]["end_commit"] if decisions else record.base_commit
        return [
            f"regression tests added: {len(data.get('regression_tests') or [])}",
            f"final commit: {data.get('final_commit') or end}",
            review_line(record),
        ]

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        if not self.setup_path(layout).exists():
            return ["(fix not set up yet)"]
        baseline = [counting.from_json(c) for c in self.setup_data(layout)["baseline"]]
        decisions = journal.load_decisions(layout)
        return [
            f"Errors: {len(counting.errors_of(baseline))} at the base commit, "
            f"{len(self.remaining(layout))} now",
            f"Blocked: {len(decisions[-1]['blocked']) if decisions else 0}",
        ]


class Fix(ChangingLens):
    name = "fix"
    team = "fix"
    loop = "fixes"
    decide_checkpoint = "fix_decide"
    decision_extra = FixStep
    branch = "autoresearch/fix/{name}"
    ruff_plays = True  # ruff's own fixes, one diagnostic at a time
    default_cycle_cap = 30
    gate_label = "errors left"
    spec_example = SPEC_EXAMPLE
    views = part(FixViews)

    def change_lines(self, decision: dict[str, Any]) -> list[str]:
        """The error the step was given, and the session's count before and after it."""
        error = decision.get("error") or {}
        where = f"{error.get('file')}:{error.get('line')}" if error.get("file") else ""
        return [
            f"Fix step {decision['cycle']}: {decision.get('summary')}",
            f"Error: {error.get('category', '')} {error.get('code', '')} {where} "
            f"{error.get('message', '')}".strip(),
            f"{self.gate_label}: {decision.get('before')} → {decision.get('after')} "
            "(the session's count)",
        ]

    # --- the spec and setup ----------------------------------------------------------------

    def check_lens_spec(self, values: dict[str, Any], where: str) -> None:
        section = self.section(values)
        if section.get("errors"):
            counting.resolve(section["errors"], where, [])
        check_ended("fix.from", section.get("from"), where)

    @staticmethod
    def handed_findings_of(values: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The findings an earlier lens handed on (a chain link, or `fix.from`), else None."""
        source = (values.get("fix") or {}).get("from")
        path = values.get("handoff") or (
            str(Path(SESSIONS) / source / "handoff.json") if source else None
        )
        if not path:
            return None
        return chain.inherited(Path(path))["findings"]

    def count(self, env: StageEnv) -> list:
        """Every error in the worktree now, masked as it is stored."""
        setup = self.setup_data(env.layout)
        return counting.count_all(
            [counting.ErrorCommand(**c) for c in setup["errors"]],
            env.worktree,
            env.spec.secrets,
            (env.record.base_commit,),
            [counting.HandedBug(**b) for b in setup.get("handed") or []],
            setup.get("repro_command") or "",
        )

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        """The error commands, the baseline count, the guard checked on the base commit."""
        section = self.section(values)
        where = f"config/sessions/{layout.name}.yaml"
        defaults = counting.default_commands(
            record.stack, record.test_command, record.linter_command
        )
        handed_findings = self.handed_findings_of(values)
        handed, unmeasured = counting.handed_bugs(handed_findings or [])
        for line in unmeasured:
            log(f"fix: not measurable, left to a person: {line}")
        if handed_findings is not None:
            defaults = []  # the handed findings are the work instead
        cmds = counting.resolve(section.get("errors"), where, defaults)
        repro = (values.get("debug") or {}).get("repro_command") or (
            f"{record.test_command} {{file}}"
        )
        worktree = layout.worktree()
        keep = (record.base_commit,)
        real = worktree.resolve()  # where the traced processes stood
        watcher = measured.session_watcher(real, record.base_commit, values.get("scope"))
        guard = section.get("guard")
        with tempfile.TemporaryDirectory(prefix="autoresearch-trace-") as tmp:
            # The baseline count and the guard's check are the runs traced: an error count
            # and a pass do not depend on how fast they run.
            traced = Path(tmp)
            secrets = values.get("secrets")
            baseline = counting.count_all(
                cmds, worktree, secrets, keep, handed, repro, trace_to=traced / "errors"
            )
            unrunnable = counting.unrunnable(cmds, baseline, where)
            if unrunnable is not None:
                raise unrunnable
            for i, c in enumerate(cmds):
                seen, note = measured.read_run(traced / "errors" / str(i), real)
                watcher.saw(f"fix.errors.{i}.command", c.command, seen, note)
            if guard:
                result = commands.run(
                    guard,
                    worktree,
                    timeout_s=values["test_timeout_s"],
                    extra_secrets=secrets,
                    trace_to=traced / "guard",
                )
                if not result.ok:
                    raise SpecError(
                        f"{where}: key 'fix.guard': `{guard}` fails on the base commit, so no "
                        f"fix could ever be kept; make it pass first.\n{result.tail(2000)}"
                    )
                watcher.saw("fix.guard", guard, *measured.read_run(traced / "guard", real))
        for note in watcher.watch.notes:
            log(f"warning: {note}")
            record.warnings.append(note)
        # The files that count and guard are the measurement: editing them is no fix.
        tests = list(TEST_GLOBS) if section.get("protect_tests", True) else []
        protected = list(dict.fromkeys(watcher.watch.patterns() + tests))
        # The toolbox refuses edits to these; the frozen spec shows them.
        existing = list(values.get("protected") or [])
        values["protected"] = existing + protected
        labels = {p: "test files (fix.protect_tests)" for p in tests}
        labels |= {p: "spec key protected" for p in existing}
        record.measured = watcher.watch.to_record(values["protected"], labels)
        git.reset_to(worktree, record.base_commit)  # the counts may leave files behind
        total = len(counting.errors_of(baseline))
        log(f"fix: {total} errors at the base commit: {error_counts.by_category(baseline)}")
        return {
            "errors": [asdict(c) for c in cmds],
            "handed": [asdict(b) for b in handed],
            "unmeasured": unmeasured,
            "repro_command": repro,
            "guard": guard,
            "protected": protected,
            "baseline": [counting.to_json(c, keep) for c in baseline],
            "run_id": self.new_run_id(layout),
        }

    # --- the loop --------------------------------------------------------------------------

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """Zero errors left, or every error left is blocked."""
        left = counting.errors_of([counting.from_json(c) for c in decision["counts_after"]])
        if not left:
            return "zero errors"
        if error_counts.next_error(left, set(decision["blocked"])) is None:
            return f"every remaining error is blocked ({len(left)} left; see blocked.md)"
        return None

    def cap_reason(self, spec: SessionSpec, cap: int) -> str:
        return f"cap of {cap} iterations reached" + ("" if spec.max_cycles else " (max_cycles)")

    def judge(self, env: StageEnv, output: Any) -> Judged:
        """Check, count, guard, keep or reset (stages.decide); the rows and evaluation.md."""
        from . import stages

        def results(rec: dict[str, Any]) -> None:
            self.log_iteration(env, rec, env.stage_record("attempt")["usage"])
            self.writer(env.record).text(Path(output.results), report.evaluation_md(rec))

        return Judged(stages.decide(env, self), results)

    def log_iteration(self, env: StageEnv, rec: dict[str, Any], usage: dict[str, Any]) -> None:
        """The iteration's row in fix-results.tsv and results.tsv."""
        error = rec.get("error") or {}
        where = (
            f"{error.get('file')}:{error.get('line')}" if error.get("line") else error.get("file")
        )
        description = (
            f"{error.get('category', '-')} {error.get('code', '')} {where or ''}: "
            f"{rec['before']} → {rec['after']}; {rec['verdict'] or rec['summary']}"
        )
        row = lens_log.LogRow(
            run_id=rec["run_id"],
            iteration=rec["iteration"],
            category=error.get("category", "none"),
            new=len(rec["fixed"]) if rec["status"] == KEPT else 0,
            status=rec["status"],
            description=description,
            timestamp=rec["timestamp"],
        )
        self.record_iteration(
            env,
            row,
            usage,
            description,
            tests_pass=rec["tests_pass"],
            files_changed=len(rec["files_changed"]),
        )

    # --- session.md ------------------------------------------------------------------------

    def log_line(self, env: StageEnv, decision: Decision) -> str:
        return (
            f"fix {env.cycle}: {decision['status']} ({decision['before']} → {decision['after']})"
            + (f"; stopping: {decision['reason']}" if decision["stop"] else "")
        )

    # --- the report ------------------------------------------------------------------------

    def remaining(self, layout: SessionLayout) -> list[Error]:
        decisions = journal.load_decisions(layout)
        data = decisions[-1]["counts_after"] if decisions else self.setup_data(layout)["baseline"]
        return counting.errors_of([counting.from_json(c) for c in data])

    def write_report(self, env: StageEnv, findings_out: Path, handoff_out: Path) -> None:
        decisions = journal.load_decisions(env.layout)
        setup = self.setup_data(env.layout)
        baseline = [counting.from_json(c) for c in setup["baseline"]]
        left = error_counts.order(self.remaining(env.layout))
        blocked = blocked_of(decisions)
        writer = self.writer(env.record)
        findings = [
            {
                "id": counting.error_id(e),
                "severity": SEVERITY[e.priority],
                "title": f"{e.code} {e.message}".strip(),
                "category": e.category,
                "tool": e.tool,
                "file": e.file,
                "line": e.line,
                "blocked": e.identity in blocked,
            }
            for e in left
        ]
        writer.text(findings_out, report.remaining_md(env.layout.name, findings))
        before = error_counts.by_category(baseline)
        after = Counter(e.category for e in left)
        writer.text(
            self.summary_path(env.layout),
            report.summary_md(env.layout.name, before, dict(after), decisions, self.stopped(env)),
        )
        writer.text(
            self.blocked_path(env.layout),
            report.blocked_md(decisions, blocked, {e.identity for e in left}),
        )
        tests = self.add_regression_tests(env, baseline, left, decisions)
        extra = {
            "stopped": self.stopped(env),
            "errors_before": sum(before.values()),
            "errors_after": len(left),
            "final_commit": tests.commit,
            "regression_tests": tests.added,
        }
        writer.json(handoff_out, self.handoff(env, findings, extra))

    def add_regression_tests(
        self, env: StageEnv, baseline: list, left: list[Error], decisions: list[dict[str, Any]]
    ) -> regression.RegressionTests:
        """The reproductions of the handed bugs this session fixed (present at the base
        commit, gone now), committed as regression tests (regression.py)."""
        setup = self.setup_data(env.layout)
        bugs = [counting.HandedBug(**b) for b in setup.get("handed") or []]
        fixed = _handed_ids(counting.errors_of(baseline)) - _handed_ids(left)
        repro = setup.get("repro_command") or ""
        return regression.add(env, bugs, fixed, repro, self.end_commit(env))

    @staticmethod
    def summary_path(layout: SessionLayout) -> Path:
        return layout.root / "summary.md"

    @staticmethod
    def blocked_path(layout: SessionLayout) -> Path:
        return layout.root / "blocked.md"

    # --- autoresearch status ---------------------------------------------------------------

    def tests_now(self, decisions: list[dict[str, Any]]) -> str:
        return "n/a" if not decisions else ("pass" if decisions[-1]["tests_pass"] else "FAIL")

    def open_now(self, layout: SessionLayout) -> int:
        return len(self.remaining(layout)) if self.setup_path(layout).exists() else 0


def _handed_ids(errors: list[Error]) -> set[str]:
    """The ids of the handed bugs among `errors` (their code is the finding's id)."""
    return {e.code for e in errors if e.tool == counting.HANDED_TOOL}

"""The `Mode` base class: every hook the engine and the rules call, with its default.

A mode is one subclass (sweep, narrow, broad, experiment; the lenses next). The engine's
stages never ask which mode they are in: the rules' job functions (scripts/) call these
hooks around them. Defaults are the plain cycle loop's (docs/architecture.md lists which
mode overrides which hook).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import journal, ledger
from ..files import write_text
from ..findings import Finding
from ..layout import SessionLayout
from ..record import SetupRecord
from ..session_report import ReportStep
from ..spec import SessionSpec
from ..stage import StageEnv

BROKEN = "tests broke in this cycle and reverting did not bring them back"


class Mode:
    name = "sweep"
    loop = "cycles"  # the layout's folder for the loop's steps
    branch = "autoresearch/improve"  # `{name}` is the session's name
    has_worktree = True  # a session worktree (broad: one per track instead)
    default_cycle_cap = 10
    lists_cycles = True  # session.md lists every cycle
    kept_label = "fixes kept"  # what a step keeps on the branch, as the report counts it
    spec_example = ""  # the mode's own keys, for `autoresearch new`

    # --- files ------------------------------------------------------------------------

    def layout(self, root: Path) -> SessionLayout:
        return SessionLayout(Path(root).absolute(), self.loop)

    def branch_name(self, session: str) -> str:
        return self.branch.format(name=session)

    # --- before anything runs ----------------------------------------------------------

    def check_spec(self, values: dict[str, Any], name: str) -> None:
        """Preflight: raise SpecError naming the key when the mode's spec is incomplete."""

    def on_setup(
        self, layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log
    ) -> None:
        """Setup: the mode's own files (runs before the spec is frozen, may amend `values`)."""

    # --- the cycle ---------------------------------------------------------------------

    def tracks(self, layout: SessionLayout) -> list[str]:
        """The loops of this session: one unnamed loop, or broad's tracks."""
        return [""]

    def red_scope(self, env: StageEnv) -> dict[str, Any] | None:
        """What Red is scoped to: {angle}, {hypothesis, aspiration}, or None for everything."""
        return None

    def held_back(self, env: StageEnv, findings: list[Finding]) -> list[Finding]:
        """Findings that wait in ideas.md instead of going on to sanitize (default: none)."""
        return []

    def cycle_cap(self, spec: SessionSpec) -> int | None:
        return spec.max_cycles or self.default_cycle_cap

    def cap_reason(self, spec: SessionSpec, cap: int) -> str:
        if spec.max_cycles:
            return f"max_cycles reached ({cap})"
        return f"cap of {cap} cycles reached (set max_cycles to run longer)"

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """The mode's own stop rules, between the shared ones (see `stop_reason`)."""
        return None

    def stop_reason(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """The one stop cascade, first match wins: the session must stop (budget, spend
        limit), tests broke beyond repair, the mode's own rules, the cycle cap."""
        limit = env.spec.budget_usd
        if not decision.get("session_stop") and limit is not None:
            decision["session_stop"] = ledger.budget_exceeded(env.layout.root, limit)
        if decision.get("session_stop"):
            return decision["session_stop"]
        if decision.get("broken"):
            return BROKEN
        reason = self.loop_stop(env, decision)
        if reason:
            return reason
        cap = self.cycle_cap(env.spec)
        if cap is not None and env.cycle >= cap:
            return self.cap_reason(env.spec, cap)
        return None

    def apply_policy(self, env: StageEnv, decision: dict[str, Any]) -> None:
        """After a cycle's tests: set decision['stop'] and ['reason'] (and mode extras)."""
        reason = self.stop_reason(env, decision)
        decision["stop"] = reason is not None
        decision["reason"] = reason

    # --- session.md ----------------------------------------------------------------------

    def summary_decisions(
        self, env: StageEnv, pending: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The decisions session.md shows; `pending` is the one being made (not on disk yet)."""
        decisions = journal.load_decisions(env.layout, env.track)
        if pending is None:
            return decisions
        return [d for d in decisions if d["cycle"] < pending["cycle"]] + [pending]

    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        """The mode's own blocks of session.md (Goal and Angles, Hypotheses, ...)."""
        return ""

    def write_summary(self, env: StageEnv, pending: dict[str, Any] | None = None) -> None:
        decisions = self.summary_decisions(env, pending)
        journal.write_summary(
            env.layout,
            env.record,
            env.spec,
            decisions,
            self.summary_sections(env, decisions),
            list_cycles=self.lists_cycles,
        )

    # --- the end -------------------------------------------------------------------------

    def final_decision(self, layout: SessionLayout, checkpoints: Any) -> str:
        """The decision of the first open cycle, or of the one that stopped the loop.

        Completed decisions are read from disk and only the next open cycle is asked of the
        checkpoint: asking every cycle's makes a no-op rerun quadratic.
        """
        cycle = layout.next_open_cycle()
        return checkpoints.evaluate.get(name=layout.name, cycle=f"{cycle:03d}").output.decision

    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        """What `done` and the session report wait for: by default, the loop's final decision."""
        return [self.final_decision(layout, checkpoints)]

    def report_steps(self, layout: SessionLayout) -> list[ReportStep]:
        """Every finished cycle of every track, for the session report: its evaluation
        (eval-results.md), the fixes it kept and its test run."""
        steps = []
        for track in self.tracks(layout):
            for d in journal.load_decisions(layout, track):
                tests = d.get("tests") or {}
                steps.append(
                    ReportStep(
                        track=track,
                        cycle=d["cycle"],
                        evaluation=layout.cycle(d["cycle"], track) / "eval-results.md",
                        kept=len(d.get("fixed", [])),
                        tests_pass=bool(d.get("tests_pass")),
                        tests_passed=tests.get("passed"),
                        tests_failed=tests.get("failed"),
                    )
                )
        return steps

    def write_done(self, env: StageEnv, out: Path) -> None:
        decisions = journal.load_decisions(env.layout)
        last = decisions[-1] if decisions else {}
        fixed = sum(len(d.get("fixed", [])) for d in decisions)
        lines = [
            f"session: {env.layout.name}",
            f"mode: {self.name}",
            f"stopped: {last.get('reason') or 'finished'}",
            f"cycles: {len(decisions)}",
            f"fixes kept: {fixed}",
            f"commits on {env.record.branch}: {last.get('commits_total', 0)}",
            f"tests: {'pass' if last.get('tests_pass') else 'FAIL'}",
            f"final commit: {last.get('end_commit', env.record.base_commit)}",
            f"review with: git -C {env.record.target} log --oneline "
            f"{env.record.base_commit[:12]}..{env.record.branch}",
        ]
        write_text(out, "\n".join(lines) + "\n")
        env.log(json.dumps({"done": env.layout.name, "reason": last.get("reason")}))

    # --- autoresearch status ---------------------------------------------------------------

    def progress(self, layout: SessionLayout) -> dict[str, Any]:
        """The figures `status` shows for every mode: cycles, commits, fixes, tests, open."""
        decisions = journal.load_decisions(layout)
        last = decisions[-1] if decisions else None
        return {
            "cycles": len(decisions),
            "commits": last.get("commits_total", 0) if last else 0,
            "fixes": sum(len(d.get("fixed", [])) for d in decisions),
            "tests": "n/a" if last is None else ("pass" if last.get("tests_pass") else "FAIL"),
            "open_issues": len(last.get("open_issues", [])) if last else 0,
        }

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        """Extra lines for `autoresearch status NAME`."""
        return []

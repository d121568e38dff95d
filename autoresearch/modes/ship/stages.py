"""The ship lens's stages: `prepare` (one failing gate per iteration) and `execute` (the
shipping commands, only when a person approved; a dry run unless told otherwise).

prepare: the highest-priority failing gate that is not blocked goes to the agent; afterwards
every gate runs again, and the change is committed (`ship: <gate> — summary`) only when more
gates pass and none that passed before fails. Three failed attempts block a gate, one of a
deterministic backend (ruff, which leaves every failing gate for a person) does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.agents.agent_run import run_agent, stop_reason_of
from autoresearch.agents.backends import DETERMINISTIC
from autoresearch.agents.backends.base import ToolResult
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.loop import Status
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context
from autoresearch.gate.keep import hand_in
from autoresearch.gate.verdict import Verdict
from autoresearch.safety import commands, git
from autoresearch.views import journal

from ..lens import error_counts
from . import gates as gating

KEPT = Status.KEPT


def results_at_start(env: StageEnv, mode: Any) -> list[gating.Result]:
    prev = mode.previous_step(env)
    data = prev.extra.results_after if prev else mode.setup_data(env.layout)["baseline"]
    return [gating.Result(**r) for r in data]


def blocked_of(decisions: list[dict[str, Any]]) -> set[str]:
    """Gates given up on: after three failed attempts, or at the first of a deterministic
    backend (`final`: from the same commit it would do the same again)."""
    tries = Counter(d["gate"] for d in decisions if d.get("gate") and d["status"] != KEPT)
    final = {d["gate"] for d in decisions if d.get("gate") and d.get("final")}
    return final | {g for g, n in tries.items() if error_counts.is_blocked(n)}


def next_gate(results: list[gating.Result], blocked: set[str]) -> gating.Result | None:
    """The first failing gate in checklist order (the checklist is in fixing order)."""
    return next((r for r in results if r.status == gating.FAIL and r.name not in blocked), None)


@dataclass
class GatesAgain:
    """ship's check of the agent's change for hand_in: every gate runs again, and the change
    passes when more gates pass and none that passed before fails."""

    checklist: list[gating.Gate]
    ctx: gating.Context
    before: list[gating.Result]
    after: list[gating.Result] = field(default_factory=list)
    broke: list[str] = field(default_factory=list)  # gates that passed before and fail now
    runs_on_check = True

    def check(self) -> Verdict:
        self.after = gating.run_all(self.checklist, self.ctx)
        was = {r.name for r in self.before if r.status == gating.PASS}
        self.broke = sorted(r.name for r in self.after if r.name in was and r.status != gating.PASS)
        more = gating.passing(self.after) > gating.passing(self.before)
        return Verdict(more and not self.broke, f"gates broken: {self.broke}")

    def committed(self, sha: str) -> None:
        """Nothing to carry over: every gate runs again on the next change."""


def prepare(env: StageEnv, mode: Any, record_out: Path) -> dict[str, Any]:
    """One failing gate: the agent's change, all gates again, keep or reset."""
    start = env.cycle_start()  # where the last iteration ended (the base, at first)
    env.begin(start)
    decisions = env.decisions_before()
    before = results_at_start(env, mode)
    target = next_gate(before, blocked_of(decisions))
    checklist = mode.checklist(env.layout)
    rec: dict[str, Any] = {
        "cycle": env.cycle,
        "gate": target.name if target else None,
        "summary": "",
        "start_commit": start,
        "passing_before": gating.passing(before),
        "results_after": [asdict(r) for r in before],
        "broke": [],
        "tests_pass": None,
        "timestamp": journal.now(),
        "broken": False,
        "session_stop": None,
    }
    status, end, usage = Status.NO_CHANGE, start, {}
    if target is not None:
        gate = next(g for g in checklist if g.name == target.name)
        state: dict[str, str] = {}
        toolbox = Toolbox(mode.team, env.worktree, **env.toolbox_options())

        def finish_fix(finding_id: str, summary: str) -> ToolResult:
            if finding_id != gate.name:
                raise ValueError(f"unknown id {finding_id!r}; this iteration's gate is {gate.name}")
            state.update(outcome="proposed", summary=summary)
            toolbox.mark_finished()
            return ToolResult("received; after your turn the harness runs every gate again")

        def skip_finding(finding_id: str, reason: str) -> ToolResult:
            state.update(outcome="skipped", summary=reason)
            toolbox.mark_finished()
            return ToolResult("recorded: left for a person")

        toolbox.hooks.update(finish_fix=finish_fix, skip_finding=skip_finding)
        ctx = base_context(env, mode.team)
        ctx.lens = mode.brief(env, gate, target, decisions)
        run = run_agent(env, mode.team, ctx, toolbox)
        usage = asdict(run.usage)
        rec["session_stop"] = stop_reason_of(run)
        rec["summary"] = state.get("summary", "")
        if state.get("outcome") == "skipped":
            status = Status.SKIPPED
        else:
            again = GatesAgain(checklist, mode.gate_context(env), before)
            message = f"ship: {gate.name} — {' '.join(rec['summary'].split())[:100]}"
            handed = hand_in(env, again, toolbox.written, message)
            rec["broke"] = again.broke
            if handed.passed and not handed.protected:
                status, end = KEPT, handed.sha or start
                rec["results_after"] = [asdict(r) for r in again.after]
            elif handed.protected:
                status, rec["rejected"] = Status.REVERTED, handed.protected
                if handed.passed:  # refused at the commit, after the gates passed
                    env.log(f"ship: {handed.protected}")
            elif not handed.nothing:
                status = Status.REVERTED
    git.reset_to(env.worktree, end)
    rec.update(status=status, end_commit=end)
    rec["final"] = (
        target is not None and status != KEPT and env.spec.agent["backend"] in DETERMINISTIC
    )
    rec["passing_after"] = gating.passing([gating.Result(**r) for r in rec["results_after"]])
    rec["score"] = round(gating.score([gating.Result(**r) for r in rec["results_after"]]), 4)
    rec["blocked"] = sorted(blocked_of(decisions + [rec]))
    mode.writer(env.record).json(record_out, {"stage": "ship", "usage": usage})
    return rec


def execute(env: StageEnv, mode: Any, out: Path) -> None:
    """The shipping commands, run only after a person's approval; a dry run by default."""
    cmds = mode.ship_commands(env)
    dry = bool(mode.section(env.spec).get("dry_run", True))
    lines = [f"session: {env.layout.name}", f"dry run: {'yes' if dry else 'no'}"]
    for command in cmds:
        if dry:
            lines.append(f"would run: {command}")
            continue
        result = commands.run(
            command, env.worktree, timeout_s=env.spec.test_timeout_s, extra_secrets=env.spec.secrets
        )
        lines.append(f"ran: {command} (exit code {result.exit_code})")
        lines += [f"    {line}" for line in result.tail(1500).splitlines()]
        if not result.ok:
            lines.append("stopped: a shipping command failed; the rest were not run")
            break
    mode.writer(env.record).text(out, "\n".join(lines) + "\n")
    env.log(f"ship_execute: {'dry run' if dry else 'ran'} {len(cmds)} commands")

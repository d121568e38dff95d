"""One agent run: the budget check, the brief, the backend's work, the ledger row.

Every team, the strategist and the experiment agent go through `run_agent`, so a budget,
a spend-limit stop and the cost ledger mean the same thing everywhere.
"""

from __future__ import annotations

from typing import Any

from autoresearch.agents import ledger, prompts
from autoresearch.agents.backends import get_backend
from autoresearch.agents.backends.base import SessionStop, StageRun, Usage
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.stage import StageEnv

NOT_RUN = ("budget", "session_stop")  # stop reasons of a run that ends the session


def run_agent(
    env: StageEnv,
    team: str,
    ctx: prompts.BriefContext,
    toolbox: Toolbox,
    *,
    ledger_cycle: int | None = None,
    extra_task: str = "",
    extra_data: dict[str, Any] | None = None,
    deadline_s: float | None = None,
    earlier: StageRun | None = None,
    turns: int | None = None,
) -> StageRun:
    """Run the team's backend on `ctx`'s brief through `toolbox`.

    A budget already spent skips the run (stop reason `budget`); a spend limit reported by
    the API ends it (`session_stop`). Both are StageRuns, never exceptions: the stage
    decides what that means for it. `ledger_cycle` numbers attempts that are not cycles
    (the strategist's). `deadline_s` shortens the stage's deadline (a session's time
    limit running out); it never lengthens it. `earlier` is what the stage's earlier
    conversations used: the stage's turn and cost limits hold for them all together.
    `turns`, when given, is this conversation's own turn limit in place of the stage's
    (Green's turns per finding): the earlier conversations' turns do not count against it.
    """
    limit = env.spec.budget_usd
    reason = ledger.budget_exceeded(env.layout.root, limit) if limit is not None else None
    if reason:
        env.log(f"{team}: not run: {reason}")
        return StageRun(Usage(), 0, "budget", reason)
    limits = env.limits()
    if deadline_s is not None:
        limits.deadline_s = min(deadline_s, limits.deadline_s or deadline_s)
    if turns is not None:
        limits.max_turns = turns
    if earlier is not None:
        if limits.max_turns is not None and turns is None:
            limits.max_turns = max(0, limits.max_turns - earlier.turns)
        if limits.max_cost_usd is not None:
            limits.max_cost_usd = max(0.0, limits.max_cost_usd - earlier.usage.cost_usd)
    if limit is not None:
        # A stage may spend at most what is left of the session's budget.
        left = max(0.0, limit - ledger.session_totals(env.layout.root).cost_usd)
        limits.max_cost_usd = min(left, limits.max_cost_usd or left)
    brief = prompts.build_brief(ctx, env.spec.agent.get("prompts") or {}, limits)
    brief.task += extra_task
    cycle = env.cycle if ledger_cycle is None else ledger_cycle
    # Model-free backends read the same facts in structured form, never more.
    brief.data.update(worktree=str(toolbox.sandbox.root), cycle=cycle, track=env.track)
    # The spec setting the test gate reads: whether it keeps an edit to an existing test.
    brief.data["allow_test_edits"] = bool(env.spec.allow_test_edits)
    brief.data.update(extra_data or {})
    if team == "red":
        brief.data["tried"] = list(ctx.tried)
        brief.data["max_findings"] = env.spec["max_findings"]  # the cycle's fix slots
    backend = get_backend(env.spec)
    model = env.spec.agent["model"] if backend.name == "claude" else backend.name
    where = {"track": env.track, "cycle": f"{cycle:03d}", "team": team, "model": model}
    streamed = Usage()

    def on_request(usage: Usage) -> None:
        # Written as it happens: a stage that fails later still has its spend on record.
        streamed.add(usage)
        ledger.record_request(env.layout.root, usage=usage, **where)

    brief.on_request = on_request
    try:
        run = backend.run(brief, toolbox, env.progress(team))
    except SessionStop as stop:
        run = StageRun(streamed, 0, "session_stop", str(stop))
    ledger.record_stage(env.layout.root, run=run, streamed=streamed, **where)
    spent = ledger.describe(run.usage) if backend.name == "claude" else "no model"
    env.log(f"{team}: {run.stop_reason} after {run.turns} turns, {spent}")
    return run


def stop_reason_of(run: StageRun) -> str | None:
    """Why the session must stop after this run, if it must."""
    return run.detail if run.stop_reason in NOT_RUN else None

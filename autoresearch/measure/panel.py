"""The judge panel of stop 7: independent agent runs, each casting one vote on a goal in words.

Each judge is its own agent run (its own brief, its own toolbox), told the goal and what the
harness measured, and never another judge's vote. A judge that casts no vote counts as
"not met" (checks/judge.py's rule for an unreadable vote). Every vote is returned for the
decision record and logged.
"""

from __future__ import annotations

from typing import Any

from autoresearch.agents.agent_run import run_agent
from autoresearch.agents.backends.base import StageRun, ToolResult
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context

TEAM = "judge"


def ask(env: StageEnv, goal: str, facts: list[str], panel: int) -> list[dict[str, Any]]:
    """One vote per judge: {judge, vote ('met' | 'not met' | None), reason, stop}."""
    votes = []
    for judge in range(1, panel + 1):
        lens = {
            "heading": f"Judge {judge} of {panel}: is the goal met?",
            "focus": goal,
            "context": [("What the harness measured in the last cycle", facts)],
            "closing": "Call cast_vote once with met or not met and your reason.",
            "data": {"goal": goal, "facts": list(facts), "judge": judge, "panel": panel},
        }
        cast, run = one_vote(env, lens)
        vote = {
            "judge": judge,
            "vote": cast.get("verdict"),
            "reason": cast.get("reason", ""),
            "stop": run.stop_reason,
        }
        env.log(f"judge {judge}/{panel}: {vote['vote'] or 'no vote'} — {vote['reason']}")
        votes.append(vote)
    return votes


def one_vote(env: StageEnv, lens: dict[str, Any], **run: Any) -> tuple[dict[str, str], StageRun]:
    """One judge's own run, briefed with `lens`: what it cast ({verdict, reason}, empty when
    it cast nothing) and the run. Its cast_vote records the vote and ends the run."""
    cast: dict[str, str] = {}
    toolbox = Toolbox(TEAM, env.worktree, **env.toolbox_options())

    def cast_vote(verdict: str, reason: str) -> ToolResult:
        cast.update(verdict=verdict, reason=reason)
        toolbox.mark_finished()
        return ToolResult("vote recorded")

    toolbox.hooks["cast_vote"] = cast_vote
    ctx = base_context(env, TEAM)
    ctx.lens = lens
    return cast, run_agent(env, TEAM, ctx, toolbox, **run)

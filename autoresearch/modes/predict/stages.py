"""Predict's two agent stages: a persona's independent analysis (its brief holds nothing of any
other persona's) and its positions in one debate round (its brief holds every finding and every
position so far). The devil's advocate's round is checked by code and retried once."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from autoresearch.agents.agent_run import run_agent
from autoresearch.agents.backends.base import ToolResult
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context
from autoresearch.views import journal

from ...checks import votes
from ...checks.finding_schema import BUG_SEVERITIES, PREDICT, check
from ..lens.output import quiet
from . import Predict, charge


def analysis(env: StageEnv, mode: Predict, persona: str, out: Path) -> None:
    """One persona alone with the target; its findings checked against predict's schema."""
    quiet(env)
    reported: list[Any] = []

    def report(**fields: Any) -> str:
        reported.append(fields)
        return f"received as report {len(reported)}"

    ctx = base_context(env, "persona")
    ctx.lens = {
        "heading": f"Independent review: {persona}",
        "focus": f"Your persona: {persona}. {charge(persona)}",
        "closing": "Report each finding with report_prediction, then end your turn.",
        "data": {"persona": persona},
    }
    toolbox = Toolbox(
        "persona", env.worktree, hooks={"report_prediction": report}, **env.toolbox_options()
    )
    run = run_agent(
        env, "persona", ctx, toolbox, ledger_cycle=0, extra_data={"track": persona, "cycle": 0}
    )
    # The harness names the persona: nothing a model says about itself is taken on trust.
    own = [{**f, "persona": persona} if isinstance(f, dict) else f for f in reported]
    accepted, dropped = check(own, PREDICT, env.worktree)
    for d in dropped:
        env.log(f"predict {persona}: dropped ({d.kind}): {d.reason}")
    mode.writer(env.record).json(
        out,
        {
            "persona": persona,
            "round": 0,
            "accepted": [{"hash": a.hash, "finding": a.finding} for a in accepted],
            "dropped": [
                {"reason": d.reason, "kind": d.kind, "finding": d.finding} for d in dropped
            ],
            "timestamp": journal.now(),
            "usage": asdict(run.usage),
        },
    )


def debate(env: StageEnv, mode: Predict, persona: str, number: int, out: Path) -> None:
    """One persona's positions in round `number`, seeing every finding and position so far."""
    quiet(env)
    personas = mode.personas(env.spec)
    merged = votes.merge(mode.proposals(env.layout, personas))
    before = votes.positions(merged, personas, mode.debate_rounds(env.layout, personas, number - 1))
    ids = {m.id for m in merged}
    result: dict[str, Any] = {"persona": persona, "round": number, "attempts": 1}

    def attempt(extra_task: str, key: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        stated: dict[str, Any] = {}
        dropped: list[dict[str, Any]] = []

        def state_position(**args: str) -> ToolResult:
            problem = _position_problem(args, ids)
            if problem:
                dropped.append({"reason": problem, "kind": "not-allowed", "finding": args})
                return ToolResult(problem, is_error=True)
            stated[args["finding_id"]] = {
                "stance": args["stance"],
                "severity": args.get("severity") or None,
                "reason": args.get("reason", ""),
            }
            return ToolResult(f"recorded: {args['stance']} {args['finding_id']}")

        ctx = base_context(env, "debate")
        ctx.lens = _debate_brief(persona, number, merged, before, personas)
        toolbox = Toolbox(
            "debate", env.worktree, hooks={"state_position": state_position},
            **env.toolbox_options(),
        )  # fmt: skip
        run_agent(
            env, "debate", ctx, toolbox, ledger_cycle=number, extra_task=extra_task,
            extra_data={"track": persona, "cycle": key},
        )  # fmt: skip
        return stated, dropped

    stated, dropped = attempt("", str(number))
    if persona == votes.DEVILS_ADVOCATE:
        verdict = _advocate_check(before, personas, stated)
        if votes.devils_advocate_action(verdict, 1) == "retry":
            env.log(f"predict: the devil's advocate disputed too little in round {number}: retry")
            task = (
                f"\n\nYour positions were not accepted: dispute at least {verdict.required} of "
                f"these majority findings, or say why each stands: {', '.join(verdict.majority)}."
            )
            stated, dropped = attempt(task, f"{number}-retry")
            result["attempts"] = 2
            verdict = _advocate_check(before, personas, stated)
        action = votes.devils_advocate_action(verdict, result["attempts"])
        result["devils_advocate"] = {
            "majority": list(verdict.majority),
            "disputed": list(verdict.disputed),
            "action": action,
        }
    result.update(positions=stated, dropped=dropped, timestamp=journal.now())
    mode.writer(env.record).json(out, result)


def _position_problem(args: dict[str, str], ids: set[str]) -> str | None:
    fid, stance = args.get("finding_id", ""), args.get("stance", "")
    if fid not in ids:
        return f"unknown finding id {fid!r}; the findings are {sorted(ids)}"
    if stance not in votes.STANCES:
        return f"stance {stance!r} not allowed (expected {', '.join(votes.STANCES)})"
    if stance == "revise" and args.get("severity") not in BUG_SEVERITIES:
        return f"revise needs a severity: one of {', '.join(BUG_SEVERITIES)}"
    return None


def _advocate_check(
    before: dict[str, dict[str, votes.Position]], personas: list[str], stated: dict[str, Any]
) -> votes.DevilsAdvocateCheck:
    """The others' positions as the round opened, against the advocate's new ones."""
    debate_round = {
        p: {fid: by[p] for fid, by in before.items()}
        for p in personas
        if p != votes.DEVILS_ADVOCATE
    }
    debate_round[votes.DEVILS_ADVOCATE] = {
        fid: votes.Position(s["stance"], s.get("severity")) for fid, s in stated.items()
    }
    return votes.check_devils_advocate(debate_round)


def _debate_brief(
    persona: str,
    number: int,
    merged: list[votes.Merged],
    before: dict[str, dict[str, votes.Position]],
    personas: list[str],
) -> dict[str, Any]:
    lines = []
    for m in merged:
        stances = ", ".join(f"{p}: {before[m.id][p].stance}" for p in personas)
        lines.append(
            f"{m.id} [{m.severity}, {m.confidence}] {m.title} ({m.location}); raised by "
            f"{', '.join(m.raised_by)}; positions: {stances}"
        )
    return {
        "heading": f"Debate round {number}: {persona}",
        "focus": f"Your persona: {persona}. {charge(persona)}",
        "context": [("Every finding of the panel", lines)],
        "closing": "State your position on the findings with state_position, then end your turn.",
        "data": {
            "persona": persona,
            "round": number,
            "findings": [
                {"id": m.id, "title": m.title, "location": m.location, "raised_by": m.raised_by}
                for m in merged
            ],
        },
    }

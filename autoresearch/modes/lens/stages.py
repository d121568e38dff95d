"""The loop lenses' stages: `red` (the team works one focus) and `check` (code decides what
of it stands), plus `report` (every lens's findings.md and handoff.json).

`check` is the lens's sanitize: no model, the same result on every rerun. It drops, with one
reason each, what fails the lens's finding schema (bad location, value not allowed, a
duplicate of anything accepted before in any run), counts the drops in the iteration's row of
`<lens>-results.tsv`, and applies the stop rules: budget, the iteration cap, saturation and
the lens's own.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autoresearch.agents import ledger
from autoresearch.agents.agent_run import run_agent, stop_reason_of
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.loop import Judged
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context
from autoresearch.session.files import read_json
from autoresearch.views import journal

from ...checks.finding_schema import check as check_findings
from ...checks.finding_schema import drop_counts, title_key
from . import lens_log
from .output import quiet
from .saturation import stop_reason as saturation_stop


def run_of(env: StageEnv, mode: Any) -> tuple[str, int]:
    """(run_id, iteration) of this cycle: the previous decision's run goes on unless it was
    stopped and closed by `done`; a new run gets a new id."""
    prev = mode.previous_step(env)
    if prev and not (prev.stop and env.cycle - 1 in mode.closed_runs(env.layout)):
        return prev.extra.run_id, prev.extra.iteration + 1
    return mode.new_run_id(env.layout), 1


def history(mode: Any, env: StageEnv, run_id: str, iteration: int) -> list:
    """This run's iterations before this one, for the pickers and the stop rule."""
    rows = [r for r in mode.read_log(env.layout) if r.iteration < iteration]
    return lens_log.iterations(rows, run_id)


def red(env: StageEnv, mode: Any, raw_out: Path) -> None:
    """The team works this iteration's focus; its reports are saved as they were made."""
    quiet(env)
    env.begin(env.record.base_commit)  # a lens never changes the target: always the base
    setup = mode.setup_data(env.layout)
    run_id, iteration = run_of(env, mode)
    focus = mode.pick(env, history(mode, env, run_id, iteration), setup)
    reported: list[Any] = []

    def report(**fields: Any) -> str:
        reported.append(fields)
        return f"received as report {len(reported)}; the harness checks it after this iteration"

    ctx = base_context(env, mode.team)
    ctx.lens = mode.brief(env, focus, setup)
    toolbox = Toolbox(
        mode.team, env.worktree, hooks={mode.report_tool: report}, **env.toolbox_options()
    )
    run = run_agent(env, mode.team, ctx, toolbox)
    env.begin(env.record.base_commit)  # whatever a command left behind is not kept
    mode.writer(env.record).json(
        raw_out,
        {
            "cycle": env.cycle,
            "run_id": run_id,
            "iteration": iteration,
            "focus": {"key": focus.key, "text": focus.text, "data": focus.data},
            "findings": reported,
            "stop": stop_reason_of(run),
            "agent_stop": run.stop_reason,
            "usage": asdict(run.usage),
        },
    )


def check(env: StageEnv, mode: Any, checked_out: Path) -> Judged:
    """The deterministic check, the log row and the stop rules (saturation reads the row
    just logged): the iteration's decision, which loop.decide writes last."""
    quiet(env)
    raw = json.loads((env.cycle_dir / "raw.json").read_text())
    setup = mode.setup_data(env.layout)
    run_id, iteration = raw["run_id"], raw["iteration"]
    rows = mode.read_log(env.layout)
    seen = lens_log.seen_hashes(rows, redoing=(run_id, iteration))
    earlier = mode.accepted(env.layout, before=env.cycle)
    titles = {title_key(str(item["finding"].get(mode.schema.title, ""))) for item in earlier}
    accepted, dropped = check_findings(
        raw["findings"], mode.schema, env.worktree, seen, setup.get("scope"), titles
    )
    first = len(earlier) + 1
    items = [
        {
            "id": f"{mode.id_prefix}-{first + i:03d}",
            "hash": a.hash,
            "file": a.file,
            "line": a.line,
            "novelty": a.novelty,
            "cycle": env.cycle,
            "focus": raw["focus"]["key"],
            "finding": a.finding,
        }
        for i, a in enumerate(accepted)
    ]
    items = mode.after_check(env, items, setup)
    drops = [{"reason": d.reason, "kind": d.kind, "finding": d.finding} for d in dropped]
    writer = mode.writer(env.record)
    writer.json(checked_out, {"accepted": items, "dropped": drops})
    for d in dropped:
        env.log(f"{mode.name} check: dropped ({d.kind}): {d.reason}")

    new = sum(1 for item in items if mode.counts_as_new(item))
    row = lens_log.LogRow(
        run_id=run_id,
        iteration=iteration,
        category=raw["focus"]["key"],
        new=new,
        dropped=len(dropped),
        drop_reasons=drop_counts(dropped),
        hashes=tuple(item["hash"] for item in items),
        status="new" if new else "nothing new",
        description=raw["focus"]["text"],
        timestamp=journal.now(),
    )
    rows = mode.record_iteration(
        env,
        row,
        raw.get("usage") or {},
        f"{raw['focus']['key']}: {len(items)} accepted, {len(dropped)} dropped",
    )

    past = lens_log.iterations(rows, run_id)
    reason = raw.get("stop") or _budget(env)
    reason = reason or saturation_stop(
        past,
        mode.categories(env.spec, setup),
        mode.cap(env.spec, setup),
        mode.window(env.spec),
        mode.stop_when_all_tested,
    )
    reason = reason or mode.extra_stop(env, past, setup)
    step = mode.decision_extra(
        run_id=run_id,
        iteration=iteration,
        focus=raw["focus"]["key"],
        accepted=len(items),
        new=new,
        dropped=len(dropped),
        drop_reasons=row.drop_reasons,
    )
    body = step.to_json()
    tests_pass = body.pop("tests_pass")  # last in the file, as it always was
    decision = {"cycle": env.cycle, **body, "stop": reason is not None, "reason": reason}
    decision |= {"end_commit": env.record.base_commit, "tests_pass": tests_pass}
    return Judged(decision)


def _budget(env: StageEnv) -> str | None:
    limit = env.spec.budget_usd
    return ledger.budget_exceeded(env.layout.root, limit) if limit is not None else None


def report(env: StageEnv, mode: Any, findings_out: Path, handoff_out: Path) -> None:
    """findings.md, the lens's other files and handoff.json (every lens, predict included)."""
    quiet(env)
    mode.write_report(env, findings_out, handoff_out)
    data = read_json(handoff_out) or {}
    env.log(
        f"{mode.name} report: {len(data.get('findings') or [])} findings; gate {data.get('gate')} "
        f"(fail_on {data.get('fail_on')})"
    )

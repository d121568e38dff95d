"""The learn lens's one stage per doc: the agent writes it, code checks it, the harness keeps it.

The agent writes the iteration's doc and hands it in with finish_docs; the harness puts the
marker in its front matter and checks it (lenses/doc_checks.py). Failures go back to the agent,
at most ROUNDS times. Then the doc's score is compared with its score before the iteration:
the doc is committed (`docs: <doc> — score a → b`) only when it rose. Nothing else the agent
may have written is kept, and a doc a person wrote is protected from the start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import git, journal
from ...agent_run import run_agent, stop_reason_of
from ...backends.base import ToolResult
from ...lenses import doc_checks
from ...protect import ProtectedChange
from ...stage import StageEnv
from ...teams import base_context
from ..experiment.stages import ExperimentToolbox, changed_of
from . import docs

ROUNDS = 3  # validation rounds a doc gets before the iteration ends


def _text(path: Path) -> str | None:
    return path.read_text(errors="replace") if path.is_file() else None


def write(env: StageEnv, mode: Any, record_out: Path) -> dict[str, Any]:
    """Write, check and keep or drop one doc; the iteration's decision (before stop rules)."""
    prev = env.previous_decision()
    start = prev["end_commit"] if prev else env.record.base_commit
    env.begin(start)
    setup = mode.setup_data(env.layout)
    target = setup["targets"][env.cycle - 1]
    doc = target["doc"]
    rules = mode.rules(env.layout)
    update = setup["mode"] == "update"
    before = docs.score(
        doc, _text(env.worktree / doc), env.worktree, rules, False if update else None
    )
    rounds: list[list[str]] = []
    toolbox = ExperimentToolbox(mode.team, env.worktree, **env.toolbox_options())

    def finish_docs(summary: str) -> ToolResult:
        text = _text(env.worktree / doc)
        if text is None:
            return ToolResult(f"{doc} does not exist yet; write it first", is_error=True)
        (env.worktree / doc).write_text(doc_checks.with_marker(text))
        report = docs.report_of(doc, _text(env.worktree / doc) or "", env.worktree, rules)
        failures = [_failure(c) for c in report.failures]
        rounds.append(failures)
        if not failures:
            toolbox.mark_finished()
            return ToolResult(f"{doc}: every check passed; the harness keeps it if its score rose")
        if len(rounds) >= ROUNDS:
            toolbox.mark_finished()
            return ToolResult(f"{doc} still fails {len(failures)} checks after {ROUNDS} rounds")
        listing = "\n".join(f"- {f}" for f in failures)
        return ToolResult(
            f"{doc} fails {len(failures)} checks (round {len(rounds)} of {ROUNDS}); fix exactly "
            f"these and call finish_docs again:\n{listing}",
            is_error=True,
        )

    toolbox.hooks["finish_docs"] = finish_docs
    ctx = base_context(env, mode.team)
    ctx.lens = mode.brief(env, target, before)
    run = run_agent(env, mode.team, ctx, toolbox)

    others = [f for f in changed_of(env.worktree, toolbox.written) if f != doc]
    text = _text(env.worktree / doc)
    changed = doc in changed_of(env.worktree, toolbox.written)
    after = before
    if changed and text is not None:
        text = doc_checks.with_marker(text)
        after = docs.score(doc, text, env.worktree, rules, True if update else None)
    status, end = "not kept", start
    git.reset_to(env.worktree, start)  # only the doc itself may be kept
    if changed and text is not None and after > before:
        (env.worktree / doc).parent.mkdir(parents=True, exist_ok=True)
        (env.worktree / doc).write_text(text)
        message = f"docs: {doc} — score {before:.2f} → {after:.2f}"
        try:
            end = env.protection.commit(env.worktree, message) or start
            status = "kept"
        except ProtectedChange as err:
            status = f"not kept: {err.reason}"
            env.log(f"learn: {err.reason}")
    final = docs.report_of(doc, text, env.worktree, rules) if text is not None else None
    decision = {
        "cycle": env.cycle,
        "doc": doc,
        "status": status,
        "why": _why(changed, text, before, after),
        "before": round(before, 4),
        "after": round(after, 4),
        "rounds": rounds,
        "failures": [_failure(c) for c in final.failures] if final else [],
        "discarded": others,
        "start_commit": start,
        "end_commit": end,
        "tests_pass": None,
        "timestamp": journal.now(),
        "session_stop": stop_reason_of(run),
        "broken": False,
    }
    mode.writer(env.record).json(record_out, {"stage": "learn", "usage": run.usage.__dict__})
    return decision


def _failure(check: doc_checks.Check) -> str:
    where = f"line {check.line}: " if check.line else ""
    return f"{where}{check.kind} {check.subject}: {check.reason}"


def _why(changed: bool, text: str | None, before: float, after: float) -> str:
    if not changed or text is None:
        return "the doc was not written"
    if after > before:
        return f"score rose from {before:.2f} to {after:.2f}"
    return f"score did not rise ({before:.2f} → {after:.2f})"

"""The learn lens's one stage per doc: the agent writes it, code checks it, the harness keeps it.

The agent writes the iteration's doc and hands it in with finish_docs; the harness puts the
marker in its front matter and checks it (doc_checks.py). Failures go back to the agent,
at most ROUNDS times. Then the doc is committed (`docs: <doc> — score a → b`) only when every
reference it names holds (files, symbols, config keys, links) and its score rose. Nothing else
the agent may have written is kept, and a doc a person wrote is protected from the start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.agents.agent_run import run_agent, stop_reason_of
from autoresearch.agents.backends.base import ToolResult
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.loop import Status
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context
from autoresearch.safety import git
from autoresearch.safety.patch import changed_of
from autoresearch.safety.protect import ProtectedChange
from autoresearch.safety.sandbox import Refused, Sandbox
from autoresearch.safety.worktree_files import read_if_any
from autoresearch.views import journal

from . import doc_checks, docs

ROUNDS = 3  # validation rounds a doc gets before the iteration ends
# Checks of what a doc says about the code; one that fails keeps the doc out, whatever its score.
REFERENCES = frozenset({"path", "symbol", "config-key", "link"})


def write_doc(worktree: Path, doc: str, text: str) -> str | None:
    """Write a doc by the agents' rules (no link out of the worktree, atomic); why not, or
    None. The tree at the iteration's start is the target's: `docs/` may be a link."""
    box = Sandbox(worktree, allow_ignored_writes=True)
    try:
        target, rel = box.resolve(doc, write=True)
        box.write_bytes(target, rel, text.encode("utf-8"))
    except Refused as err:
        return str(err)
    return None


def write(env: StageEnv, mode: Any, record_out: Path) -> dict[str, Any]:
    """Write, check and keep or drop one doc; the iteration's decision (before stop rules)."""
    start = env.cycle_start()  # where the last iteration ended (the base, at first)
    env.begin(start)
    setup = mode.setup_data(env.layout)
    target = setup["targets"][env.cycle - 1]
    doc = target["doc"]
    rules = mode.rules(env.layout)
    update = setup["mode"] == "update"
    before = docs.score(
        doc, read_if_any(env.worktree, doc), env.worktree, rules, False if update else None
    )
    rounds: list[list[str]] = []
    toolbox = Toolbox(mode.team, env.worktree, **env.toolbox_options())

    def finish_docs(summary: str) -> ToolResult:
        text = read_if_any(env.worktree, doc)
        if text is None:
            return ToolResult(f"{doc} does not exist yet; write it first", is_error=True)
        refusal = write_doc(env.worktree, doc, doc_checks.with_marker(text))
        if refusal:
            return ToolResult(refusal, is_error=True)
        report = docs.report_of(doc, read_if_any(env.worktree, doc) or "", env.worktree, rules)
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
    text = read_if_any(env.worktree, doc)
    changed = doc in changed_of(env.worktree, toolbox.written)
    after = before
    if changed and text is not None:
        text = doc_checks.with_marker(text)
        after = docs.score(doc, text, env.worktree, rules, True if update else None)
    status, end = str(Status.NOT_KEPT), start
    git.reset_to(env.worktree, start)  # only the doc itself may be kept
    final = docs.report_of(doc, text, env.worktree, rules) if text is not None else None
    keep, why = verdict(changed, final, before, after)
    if keep and text is not None:
        refusal = write_doc(env.worktree, doc, text)
        if refusal:
            status, why = f"{Status.NOT_KEPT}: {refusal}", refusal
            env.log(f"learn: {refusal}")
        else:
            message = f"docs: {doc} — score {before:.2f} → {after:.2f}"
            try:
                end = env.protection.commit(env.worktree, message) or start
                status = Status.KEPT
            except ProtectedChange as err:
                status = f"{Status.NOT_KEPT}: {err.reason}"
                env.log(f"learn: {err.reason}")
    decision = {
        "cycle": env.cycle,
        "doc": doc,
        "status": status,
        "why": why,
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


def verdict(
    changed: bool, report: doc_checks.DocReport | None, before: float, after: float
) -> tuple[bool, str]:
    """Whether the doc is kept, and why. A higher score is not enough: a doc that names a
    file, symbol, config key or link the code does not have tells its readers something
    false, however many of its other checks pass, so every reference must hold."""
    if not changed or report is None:
        return False, "the doc was not written"
    wrong = [c for c in report.failures if c.kind in REFERENCES]
    if wrong:
        named = ", ".join(f"{c.kind} {c.subject}" for c in wrong[:5])
        more = f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""
        return False, f"it names what the code does not have: {named}{more}"
    if after > before:
        return True, f"score rose from {before:.2f} to {after:.2f}"
    return False, f"score did not rise ({before:.2f} → {after:.2f})"


def log_row(env: StageEnv, mode: Any, decision: dict[str, Any]) -> None:
    """The doc's row in results.tsv (its description masked as the lens's files are)."""
    row = {
        "team": mode.team,
        "status": decision["status"],
        "tests_pass": "",
        "description": mode.writer(env.record).line(f"{decision['doc']}: {decision['why']}"),
        "files_changed": 1 if decision["status"] == Status.KEPT else 0,
        "timestamp": decision["timestamp"],
    }
    journal.upsert_results(env.layout, "", f"{env.cycle:03d}", [row])

"""The fix lens's two stages: `attempt` (the agent fixes one error) and `decide` (no model).

- attempt: from the last kept commit, the first error in fixing order that is not blocked goes
  to the agent with what earlier attempts on it ran into; the files it wrote become
  `attempt.patch` and the worktree is left at its start.
- decide: the patch is applied to the same commit and checked on its diff (a suppression,
  a weakened or deleted test, a protected file: `rejected: suppression`), the errors are
  counted again and the guard run; the change is committed (`fix: <category> — file:line`)
  only when the count fell and the guard passes, else reset. Errors a fix newly reveals are
  queued, not counted against it. Three failed attempts put an error in blocked.md; one
  failed attempt by a deterministic backend (ruff: no fix for it, a fix the guard fails)
  does, with its reason.

Both reset to their start commit first, and decide caches its count by patch hash, so kill -9
and a plain rerun give the same history.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autoresearch.agents.agent_run import run_agent, stop_reason_of
from autoresearch.agents.backends import DETERMINISTIC
from autoresearch.agents.backends.base import ToolResult, Usage
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.loop import Status
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context
from autoresearch.gate.keep import commit_change
from autoresearch.safety import commands, git
from autoresearch.safety.patch import apply_patch, changed_of, make_patch
from autoresearch.safety.sandbox import glob_match
from autoresearch.session.files import cached_json
from autoresearch.views import journal

from ..lens import error_counts, suppressions
from ..lens.error_counts import Count, Error
from . import count as counting

KEPT = Status.KEPT
SUPPRESSION = f"{Status.REJECTED}: suppression"
GUARD_FAILED = Status.GUARD_FAILED
REVERTED = Status.REVERTED
NO_CHANGE = Status.NO_CHANGE
SKIPPED = Status.SKIPPED
CRASH = Status.CRASH
TAIL = 1500


def counts_at_start(env: StageEnv, mode: Any) -> list[Count]:
    """The counts of the commit this iteration starts from: the previous decision's end, or
    the baseline taken at setup."""
    prev = mode.previous_step(env)
    data = prev.extra.counts_after if prev else mode.setup_data(env.layout)["baseline"]
    return [counting.from_json(c) for c in data]


def failed_attempts(decisions: list[dict[str, Any]]) -> Counter[str]:
    """Failed attempts per error identity (anything but a kept change counts)."""
    return Counter(
        d["error"]["identity"] for d in decisions if d.get("error") and d["status"] != KEPT
    )


def blocked_of(decisions: list[dict[str, Any]]) -> set[str]:
    """Errors given up on: after MAX_ATTEMPTS failed attempts, or at the first when a
    deterministic backend failed on it (`final`: a retry would do the same again)."""
    tries = failed_attempts(decisions)
    final = {d["error"]["identity"] for d in decisions if d.get("error") and d.get("final")}
    return final | {k for k, n in tries.items() if error_counts.is_blocked(n)}


def error_record(error: Error) -> dict[str, Any]:
    return {**asdict(error), "identity": error.identity, "id": counting.error_id(error)}


def finding_of(error: Error) -> dict[str, str]:
    """The error as the team's brief carries it (the shape Green's findings have, so the
    model-free ruff backend can apply ruff's own fix)."""
    title = f"{error.code} {error.message}".strip()
    return {
        "id": counting.error_id(error),
        "severity": error.priority,
        "title": title,
        "location": error.where or "(no location)",
        "issue": f"{error.tool} reports {error.category} error {title}"
        + (f": {error.detail}" if error.detail else ""),
        "impact": f"counted as one {error.category} error by {error.tool}",
    }


# --- attempt ---------------------------------------------------------------------------------


def attempt(env: StageEnv, mode: Any, markdown_out: Path, record_out: Path, patch_out: Path):
    """The agent's one fix for the next error, saved as a patch; the worktree is reset."""
    start = env.cycle_start()  # where the last iteration ended (the base, at first)
    env.begin(start)
    decisions = env.decisions_before()
    blocked = blocked_of(decisions)
    error = error_counts.next_error(counting.errors_of(counts_at_start(env, mode)), blocked)
    record: dict[str, Any] = {
        "stage": "attempt",
        "cycle": env.cycle,
        "start_commit": start,
        "error": error_record(error) if error else None,
        "outcome": NO_CHANGE,
        "summary": "",
        "reason": "",
        "files": [],
        "patch_sha256": "",
        "deterministic": False,
        "stop": None,
        "usage": asdict(Usage()),
    }
    patch = ""
    if error is not None:
        patch = _run_agent(env, mode, error, decisions, record)
    git.reset_to(env.worktree, start)
    writer = mode.writer(env.record)
    writer.text(patch_out, patch)
    record["patch_sha256"] = hashlib.sha256(patch.encode()).hexdigest()
    lines = [
        f"# Fix attempt: iteration {env.cycle}",
        "",
        f"- Start commit: {start}",
        f"- Error: {_error_line(record['error'])}",
        f"- Outcome: {record['outcome']}",
        f"- Summary: {record['summary'] or record['reason'] or '—'}",
        f"- Files: {', '.join(record['files']) or 'none'}",
    ]
    if patch:
        lines += ["", "```diff", patch.rstrip("\n"), "```"]
    writer.text(markdown_out, "\n".join(lines) + "\n")
    writer.json(record_out, record)
    env.log(f"fix attempt {env.cycle}: {record['outcome']}: {_error_line(record['error'])}")


def _error_line(error: dict[str, Any] | None) -> str:
    if not error:
        return "none left"
    where = f"{error['file']}:{error['line']}" if error.get("line") else error.get("file") or ""
    return f"[{error['id']}] {error['category']} {error['code']} {where} {error['message']}".strip()


def _run_agent(env, mode, error: Error, decisions, record) -> str:
    eid = counting.error_id(error)
    earlier = [d for d in decisions if d.get("error") and d["error"]["identity"] == error.identity]
    state: dict[str, Any] = {}
    toolbox = Toolbox(mode.team, env.worktree, **env.toolbox_options())

    def check_id(finding_id: str) -> None:
        if finding_id != eid:
            raise ValueError(f"unknown id {finding_id!r}; this iteration's error is {eid}")

    def finish_fix(finding_id: str, summary: str) -> ToolResult:
        check_id(finding_id)
        if not changed_of(env.worktree, toolbox.written):
            return ToolResult("there is no change to hand in; edit a file first", is_error=True)
        state.update(outcome="proposed", summary=summary)
        toolbox.mark_finished()
        return ToolResult("received; after your turn the harness counts the errors again")

    def skip_finding(finding_id: str, reason: str) -> ToolResult:
        check_id(finding_id)
        state.update(outcome=SKIPPED, reason=reason)
        toolbox.mark_finished()
        return ToolResult("recorded as not fixed")

    toolbox.hooks.update(finish_fix=finish_fix, skip_finding=skip_finding)
    finding = finding_of(error)
    ctx = base_context(env, mode.team)
    ctx.lens = {
        "heading": f"Fix one error: [{eid}] {finding['title']}",
        "focus": "\n".join(f"- {k}: {finding[k]}" for k in ("location", "issue", "impact")),
        "context": [("Earlier attempts on this error", [_earlier(d) for d in earlier])],
        "closing": f"Fix it, then call finish_fix with id {eid} (or skip_finding), then end "
        "your turn.",
        "data": {"findings": [finding], "error": error_record(error)},
    }
    run = run_agent(env, mode.team, ctx, toolbox)
    files = changed_of(env.worktree, toolbox.written) if state.get("outcome") == "proposed" else []
    outcome = state.get("outcome", NO_CHANGE)
    record.update(
        outcome=outcome,
        summary=state.get("summary", ""),
        reason=state.get("reason", ""),
        deterministic=env.spec.agent["backend"] in DETERMINISTIC,
        files=files,
        stop=stop_reason_of(run),
        usage=asdict(run.usage),
    )
    return make_patch(env.worktree, files) if files else ""


def _earlier(decision: dict[str, Any]) -> str:
    why = decision.get("verdict") or decision["status"]
    tail = (decision.get("guard") or {}).get("tail", "")
    found = "; ".join(decision.get("violations") or [])
    return (
        f"iteration {decision['cycle']}: {decision['status']} — {why}"
        + (f" ({found})" if found else "")
        + (f"\n{tail[-600:]}" if tail else "")
    )


# --- decide ----------------------------------------------------------------------------------


def protected_of(env: StageEnv, mode: Any) -> list[str]:
    return list(env.spec.protected) + list(mode.setup_data(env.layout).get("protected") or [])


def violations_of(patch: str, protected: list[str], protect_tests: bool) -> list[str]:
    """Everything the kept diff must not contain (modes/lens/suppressions.py), and edits to a
    protected file or (unless allowed) a test file."""
    found = [str(v) for v in suppressions.check(patch)]
    for f in suppressions.parse_diff(patch):
        for path in {p for p in (f.old_path, f.new_path) if p}:
            if any(glob_match(path, g) for g in protected):
                found.append(f"{path}: protected file — the change edits it")
            elif protect_tests and suppressions.is_test_file(path):
                found.append(f"{path}: test file — fixes change the code, not its tests")
    return list(dict.fromkeys(found))


def decide(env: StageEnv, mode: Any) -> dict[str, Any]:
    """Check the diff, count, guard, keep or reset: the iteration's decision before the stop
    rules."""
    proposal = env.stage_record("attempt")
    start = proposal["start_commit"]
    env.pristine(start)  # counted and guarded on the commit alone
    setup = mode.setup_data(env.layout)
    before = counts_at_start(env, mode)
    after = before
    rec: dict[str, Any] = {
        "cycle": env.cycle,
        "iteration": env.cycle,
        "run_id": setup["run_id"],
        "error": proposal["error"],
        "summary": proposal["summary"] or proposal["reason"],
        "start_commit": start,
        "violations": [],
        "guard": None,
        "fixed": [],
        "revealed": 0,
        "verdict": "",
    }
    status = proposal["outcome"]
    if status == "proposed":
        status, after = _judge(env, mode, proposal, before, rec, setup)
    end = start
    if status == KEPT:
        error = proposal["error"]
        where = f"{error['file']}:{error['line']}" if error.get("line") else error["file"]
        message = f"fix: {error['category']} — {where or error['tool']}"
        handed = commit_change(env, message)
        end = handed.sha or start
        if handed.protected:
            status, rec["verdict"] = SUPPRESSION, handed.protected
            env.log(f"fix: {handed.protected}")
    git.reset_to(env.worktree, end)
    keep = (env.record.base_commit,)
    rec.update(
        status=status,
        before=len(counting.errors_of(before)),
        after=len(counting.errors_of(after)),
        end_commit=end,
        counts_after=[counting.to_json(c, keep) for c in (after if status == KEPT else before)],
        files_changed=proposal["files"] if status == KEPT else [],
        timestamp=journal.now(),
        tests_pass=(rec["guard"] or {}).get("ok") is not False,
        session_stop=proposal.get("stop"),
        broken=False,
    )
    # A deterministic backend's retry starts from the same commit (a failed attempt moves
    # nothing) and so makes the same change, with the same verdict: one try is all.
    rec["final"] = status != KEPT and bool(proposal.get("deterministic"))
    blocked = blocked_of(env.decisions_before() + [rec])
    rec["blocked"] = sorted(blocked)
    return rec


def _judge(env, mode, proposal, before, rec, setup) -> tuple[str, list[Count]]:
    patch_file = env.cycle_dir / "attempt.patch"
    refused = apply_patch(env.worktree, patch_file)
    if refused is not None:
        rec["verdict"] = f"the patch does not apply to {proposal['start_commit'][:12]}: {refused}"
        return CRASH, before
    patch = patch_file.read_text()
    protect_tests = bool(mode.section(env.spec).get("protect_tests", True))
    rec["violations"] = violations_of(patch, protected_of(env, mode), protect_tests)
    if rec["violations"]:
        rec["verdict"] = f"{len(rec['violations'])} forbidden change(s) in the diff"
        return SUPPRESSION, before
    keep = (env.record.base_commit,)
    measured = cached_json(
        env.cycle_dir / "measurements.json",
        f"{proposal['patch_sha256']}:{proposal['start_commit']}",
        lambda: {
            "counts": [counting.to_json(c, keep) for c in mode.count(env)],
            "guard": _guard(setup.get("guard"), env),
        },
    )
    after = [counting.from_json(c) for c in measured["counts"]]
    delta = error_counts.compare(before, after)
    rec.update(
        fixed=[e.identity for e in delta.fixed],
        revealed=len(delta.revealed),
        introduced=len(delta.introduced),
    )
    rec["guard"] = measured["guard"]
    if delta.verdict != "fell":
        rec["verdict"] = {
            "moved": f"the count stayed at {delta.before}: the error only moved",
            "unchanged": f"the count stayed at {delta.before}",
            "rose": f"the count rose from {delta.before} to {delta.after}",
        }[delta.verdict]
        return REVERTED, before
    rec["verdict"] = f"the count fell from {delta.before} to {delta.after}" + (
        f" ({len(delta.revealed)} newly revealed, queued)" if delta.revealed else ""
    )
    if measured["guard"] and not measured["guard"]["ok"]:
        rec["verdict"] += f"; guard `{setup['guard']}` failed"
        return GUARD_FAILED, before
    return KEPT, after


def _guard(command: str | None, env: StageEnv) -> dict[str, Any] | None:
    if not command:
        return None
    result = commands.run(
        command, env.worktree, timeout_s=env.spec.test_timeout_s, extra_secrets=env.spec.secrets
    )
    return {"ok": result.ok, "exit_code": result.exit_code, "tail": result.tail(TAIL)}

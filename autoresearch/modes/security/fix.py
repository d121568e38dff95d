"""security's `fix: true`: after the audit, each confirmed critical or high finding goes to the
Green team alone (the tests gate every commit, at most three attempts), and each fix is
re-checked by the auditor scoped to that file; a fix the re-check still flags is reverted.
Medium and lower findings are never fixed automatically. Commits land on the session's branch
only; the user's checkout is never touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.agents.agent_run import run_agent
from autoresearch.agents.backends.base import ToolResult
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import base_context
from autoresearch.gate.keep import NOTHING_HANDED, TestGate, hand_in
from autoresearch.safety import git

from ...checks.finding_schema import SECURITY, check, normalize_text

MAX_ATTEMPTS = 3
FIXABLE = ("critical", "high")


def eligible(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f["confidence"] == "confirmed" and f["severity"] in FIXABLE]


def run(env: StageEnv, mode: Any, md_out: Path, json_out: Path) -> None:
    env.begin(env.record.base_commit)  # a rerun starts over: no fix commit is stacked twice
    gate = TestGate(env, env.reference_tests())
    results = []
    for finding in eligible(mode.report_findings(env.layout)):
        result: dict[str, Any] = {"id": finding["id"], "title": finding["title"], "tries": []}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            start = git.head(env.worktree)
            sha, reason = _green(env, gate, finding, attempt)
            if sha and _still_there(env, finding, attempt):
                git.reset_to(env.worktree, start)
                sha, reason = None, "the re-check still finds it; the fix was reverted"
            result["tries"].append(reason)
            if sha:
                result.update(status="fixed", commit=sha, attempts=attempt)
                break
        else:
            result.update(status="not fixed", attempts=MAX_ATTEMPTS)
        env.log(f"security fix: {finding['id']} {result['status']} after {result['attempts']}")
        results.append(result)
    writer = mode.writer(env.record)
    writer.json(json_out, {"results": results, "end_commit": git.head(env.worktree)})
    lines = ["# Security fixes", "", "Confirmed critical and high findings only.", ""]
    lines += [f"- {r['id']} {r['title']}: {r['status']} after {r['attempts']} attempt(s)"
              + (f" ({r['commit'][:10]})" if r.get("commit") else "") for r in results]  # fmt: skip
    writer.text(md_out, "\n".join(lines if results else [*lines, "(none eligible)"]) + "\n")


def _green(env: StageEnv, gate: TestGate, finding: dict, attempt: int) -> tuple[str | None, str]:
    """One Green run on one finding: (commit, what happened)."""
    outcome: dict[str, Any] = {"sha": None, "reason": "not attempted"}

    def finish_fix(finding_id: str, summary: str) -> ToolResult:
        message = f"fix: [{finding['id']}] {' '.join(summary.split())[:120]}"
        handed = hand_in(env, gate, toolbox.written, message)
        if handed.nothing:
            return ToolResult(NOTHING_HANDED[handed.nothing], is_error=True)
        if handed.protected:
            outcome["reason"] = handed.protected
            return ToolResult(f"not kept, so the worktree was restored: {handed.protected}", True)
        if not handed.passed:
            reason = gate.verdict.reason if gate.verdict else "the tests did not run"
            outcome["reason"] = f"not kept: {reason}"
            return ToolResult(f"not kept, the worktree was restored: {gate.refused()}")
        outcome.update(sha=handed.sha, reason="committed")
        toolbox.mark_finished()
        return ToolResult(f"{gate.kept_message()}; committed: {message}")

    def skip_finding(finding_id: str, reason: str) -> ToolResult:
        outcome["reason"] = f"skipped: {reason}"
        toolbox.mark_finished()
        return ToolResult("recorded as skipped")

    ctx = base_context(env, "green")
    ctx.findings = [
        {
            "id": finding["id"],
            "severity": finding["severity"],
            "title": finding["title"],
            "location": finding["location"],
            "issue": f"{finding['title']}: {finding['evidence']}",
            "impact": finding["scenario"],
        }
    ]
    toolbox = Toolbox(
        "green",
        env.worktree,
        hooks={"finish_fix": finish_fix, "skip_finding": skip_finding},
        **env.toolbox_options(),
    )
    key = {"track": finding["id"], "cycle": str(attempt)}
    run_agent(env, "green", ctx, toolbox, ledger_cycle=attempt, extra_data=key)
    if git.is_dirty(env.worktree):
        git.restore(env.worktree)  # an unfinished fix is never kept
    return outcome["sha"], outcome["reason"]


def _still_there(env: StageEnv, finding: dict, attempt: int) -> bool:
    """The auditor, scoped to the finding's file and vector, on the fixed tree."""
    reported: list[Any] = []
    ctx = base_context(env, "auditor")
    vector = {"kind": "owasp", "name": finding["owasp"], "key": f"owasp:{finding['owasp']}"}
    ctx.lens = {
        "heading": f"Re-check after a fix: {finding['id']}",
        "focus": f"Check {finding['file']} for {finding['title']} "
        f"(OWASP {finding['owasp']}), which was just fixed.",
        "closing": "Report it with report_vulnerability if it is still there; then end your turn.",
        "data": {"vector": vector, "files": [finding["file"]], "reported": []},
    }
    toolbox = Toolbox(
        "auditor",
        env.worktree,
        hooks={"report_vulnerability": lambda **f: reported.append(f) or "received"},
        **env.toolbox_options(),
    )
    key = {"track": finding["id"], "cycle": f"recheck-{attempt}"}
    run_agent(env, "auditor", ctx, toolbox, ledger_cycle=attempt, extra_data=key)
    accepted, _ = check(reported, SECURITY, env.worktree)
    title = normalize_text(finding["title"])
    return any(a.file == finding["file"] and normalize_text(a.finding["title"]) == title
               for a in accepted)  # fmt: skip

"""The fix lens's report files: what is left (findings.md), summary.md (before → after per
category, every iteration) and blocked.md (errors given up on after three failed attempts)."""

from __future__ import annotations

from typing import Any

from .stages import KEPT, failed_attempts


def what(decision: dict[str, Any]) -> str:
    """One line on an iteration: the error and why it ended as it did."""
    error = decision.get("error")
    if not error:
        return "no error left to work on"
    where = f"{error['file']}:{error['line']}" if error.get("line") else error.get("file") or ""
    head = f"{error['category']} {error['code']} {where}".strip()
    return f"{head}: {decision.get('verdict') or decision.get('summary') or decision['status']}"


def remaining_md(name: str, findings: list[dict[str, Any]]) -> str:
    lines = [f"# Errors left: {name}", ""]
    if not findings:
        return "\n".join(lines + ["None: the count is zero."]) + "\n"
    for f in findings:
        where = f"{f['file']}:{f['line']}" if f.get("line") else f.get("file") or "-"
        mark = " (blocked)" if f["blocked"] else ""
        lines.append(
            f"- [{f['id']}] {f['severity']} · {f['category']} · {where}: {f['title']}{mark}"
        )
    return "\n".join(lines) + "\n"


def summary_md(
    name: str,
    before: dict[str, int],
    after: dict[str, int],
    decisions: list[dict[str, Any]],
    stopped: str | None,
) -> str:
    categories = sorted(set(before) | set(after))
    kept = sum(1 for d in decisions if d["status"] == KEPT)
    lines = [
        f"# Fix summary: {name}",
        "",
        f"Stopped: {stopped or 'not yet'}. Iterations: {len(decisions)}, kept: {kept}.",
        "",
        "| category | before | after |",
        "|---|---:|---:|",
    ]
    lines += [f"| {c} | {before.get(c, 0)} | {after.get(c, 0)} |" for c in categories]
    lines.append(f"| **total** | {sum(before.values())} | {sum(after.values())} |")
    lines += ["", "## Iterations", ""]
    lines += [f"{d['cycle']}. {d['status']} — {what(d)}" for d in decisions] or ["(none)"]
    return "\n".join(lines) + "\n"


def blocked_md(decisions: list[dict[str, Any]], blocked: set[str], left: set[str]) -> str:
    """Each blocked error with its attempts; `left`: the identities still counted."""
    lines = ["# Blocked errors", ""]
    if not blocked:
        return "\n".join(lines + ["None."]) + "\n"
    tries = failed_attempts(decisions)
    for identity in sorted(blocked):
        mine = [d for d in decisions if d.get("error") and d["error"]["identity"] == identity]
        error = mine[-1]["error"]
        where = f"{error['file']}:{error['line']}" if error.get("line") else error.get("file")
        lines.append(
            f"## [{error['id']}] {error['category']} {error['code']} {where or ''}".rstrip()
        )
        lines.append(f"{error['message'] or error.get('detail') or ''}".strip() or "(no message)")
        lines.append(
            f"Failed attempts: {tries[identity]}"
            + ("" if identity in left else " (no longer counted: a later fix removed it)")
        )
        lines += [f"- iteration {d['cycle']}: {d['status']} — {what(d)}" for d in mine]
        lines.append("")
    return "\n".join(lines)


def evaluation_md(rec: dict[str, Any]) -> str:
    """fixes/NNN/evaluation.md: what the harness measured and decided."""
    guard = rec.get("guard")
    lines = [
        f"# Evaluation: iteration {rec['cycle']}",
        "",
        f"- Error: {what(rec)}",
        f"- Status: {rec['status']}",
        f"- Errors: {rec['before']} → {rec['after']}"
        + (f" ({rec['revealed']} newly revealed, queued)" if rec.get("revealed") else ""),
        f"- Guard: {'—' if not guard else ('pass' if guard['ok'] else 'FAIL')}",
        f"- Ending commit: {rec['end_commit']}",
    ]
    if rec["violations"]:
        lines += ["", "## Refused in the diff", *[f"- {v}" for v in rec["violations"]]]
    if guard and not guard["ok"]:
        lines += ["", "## Guard output", "```", guard["tail"].rstrip(), "```"]
    lines += ["", "## Decision", rec.get("reason") or "continue"]
    return "\n".join(lines) + "\n"

"""The evaluate checkpoint: full test run, seed 000's revert order, logs, decision.json.

Revert order when the cycle broke tests that passed before it: Refactor's commits
newest first (re-testing after each), then Green's, and if a revert conflicts or the
suite still fails, a hard reset to the commit the cycle started from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import commands, git, journal, ledger, modes, stack
from .agents import Usage
from .session import write_json, write_text
from .stage import StageEnv


def full_test_run(env: StageEnv) -> commands.CommandResult:
    return commands.run(
        stack.uncached_test_command(env.record.stack, env.record.test_command),
        env.worktree,
        timeout_s=env.spec["test_timeout_s"],
        extra_secrets=env.spec.get("secrets"),
    )


def revert_cycle(env: StageEnv, cycle_start: str, groups: list[list[str]]) -> tuple[bool, list]:
    """Undo the cycle's commits in the seed's order until the tests pass again."""
    reverted: list[dict[str, str]] = []
    for commits in groups:
        for sha in commits:  # newest first
            subject = git.subject(env.worktree, sha)
            if not git.revert(env.worktree, sha):
                env.log(
                    f"evaluate: reverting {sha[:10]} conflicts; hard reset to {cycle_start[:10]}"
                )
                git.reset_to(env.worktree, cycle_start)
                reverted.append({"commit": sha, "subject": subject, "how": "reset"})
                return full_test_run(env).ok, reverted
            reverted.append({"commit": sha, "subject": subject, "how": "revert"})
            if full_test_run(env).ok:
                return True, reverted
    git.reset_to(env.worktree, cycle_start)
    reverted.append({"commit": cycle_start, "subject": "hard reset to cycle start", "how": "reset"})
    return full_test_run(env).ok, reverted


def evaluate(env: StageEnv, results_out: Path, decision_out: Path) -> dict[str, Any]:
    red = env.stage_record("red")
    green = env.stage_record("green")
    refactor_on = (env.cycle_dir / "refactor.json").exists() and "refactor" in env.spec["teams"]
    refactor = env.stage_record("refactor") if refactor_on else None
    cycle_start = red["start_commit"]
    start = (refactor or green)["end_commit"]
    env.begin(start)

    result = full_test_run(env)
    counts = stack.parse_test_output(result.output, result.exit_code)
    tests_pass, reverted = result.ok, []
    was_passing = env.cycle_start_tests_pass()
    if not result.ok and was_passing:
        env.log(f"evaluate: tests fail ({counts.summary}); reverting in the seed's order")
        groups = [
            [c["commit"] for c in reversed(refactor["commits"])] if refactor else [],
            [f["commit"] for f in reversed(green["fixed"])],
        ]
        tests_pass, reverted = revert_cycle(env, cycle_start, groups)
    reverted_shas = {r["commit"] for r in reverted}
    hard_reset = any(r["how"] == "reset" for r in reverted)
    fixed = [f for f in green["fixed"] if not hard_reset and f["commit"] not in reverted_shas]
    end = git.head(env.worktree)
    files = git.changed_files(env.worktree, cycle_start, end)
    stops = [r.get("stop") for r in (red, green, refactor or {}) if r.get("stop")]

    decision: dict[str, Any] = {
        "cycle": env.cycle,
        "track": env.track,
        "start_commit": cycle_start,
        "end_commit": end,
        "tests_pass": tests_pass,
        "test_summary": counts.summary if not reverted else "after reverts",
        "broken": (not tests_pass) and was_passing,
        "reverted": reverted,
        "findings": red["findings"],
        "red_categories": red.get("categories", []),
        "next_finding_id": red["next_finding_id"],
        "fixed": fixed,
        "skipped": green["skipped"],
        "refactor_changes": 0 if hard_reset or not refactor else refactor["changes"],
        "files_changed": files,
        "commits_total": len(git.commits_between(env.worktree, env.track_base(), end)),
        "session_stop": stops[0] if stops else None,
        "open_issues": open_issues(env, green["skipped"], fixed),
    }
    limit = (env.spec.get("budget") or {}).get("max_cost_usd")
    over = ledger.budget_exceeded(env.layout.root, limit) if limit is not None else None
    if over and not decision["session_stop"]:
        decision["session_stop"] = over
    modes.apply_policy(env, decision)

    write_text(results_out, render_results(env, decision, counts.summary))
    log_rows(env, decision, red, green, refactor)
    decisions = [d for d in journal.load_decisions(env.layout, env.track) if d["cycle"] < env.cycle]
    journal.write_summary(
        env.layout, env.record, env.spec, decisions + [decision], modes.summary_sections(env)
    )
    write_json(decision_out, decision)  # last: its presence means the cycle is complete
    env.log(
        f"{env.label}: {len(fixed)} fixes kept, tests {'pass' if tests_pass else 'FAIL'}"
        + (f"; stopping: {decision['reason']}" if decision["stop"] else "")
    )
    return decision


def open_issues(env: StageEnv, skipped: list[dict], fixed: list[dict]) -> list[str]:
    """Skipped findings carried forward until a later fix names the same problem."""
    prev = env.previous_decision()
    fixed_keys = {f["key"] for f in fixed}
    carried = [
        o
        for o in (prev or {}).get("open_issues", [])
        if o.split(" ", 1)[-1].split(": ")[0] not in fixed_keys
    ]
    new = [f"{s['id']} {s['key']}: {s['reason']}" for s in skipped]
    return carried + [o for o in new if o not in carried]


def render_results(env: StageEnv, d: dict[str, Any], summary: str) -> str:
    lines = [
        f"# Evaluation: {env.label}",
        "",
        f"- Test status: {'pass' if d['tests_pass'] else 'FAIL'} ({summary})",
        f"- Commits on the branch since base: {d['commits_total']}",
        f"- Ending commit: {d['end_commit']}",
        f"- Files changed this cycle: {', '.join(d['files_changed']) or 'none'}",
        "",
        "## Fixed",
        *([f"- [{f['id']}] {f['summary']}" for f in d["fixed"]] or ["(none)"]),
        "",
        "## Remaining",
        *([f"- {o}" for o in d["open_issues"]] or ["(none)"]),
    ]
    if d["reverted"]:
        # A mode may revert for its own reason (narrow: a metric regression) and says so.
        lines += ["", "## Reverted"]
        lines += [
            f"- {r['how']} {r['commit'][:10]} {r['subject']} ({r.get('why', 'tests broke')})"
            for r in d["reverted"]
        ]
    for key, label in (("metric", "Metric"), ("observations", "Observations")):
        if d.get(key) is not None:
            lines += ["", f"## {label}", str(d[key])]
    lines += ["", "## Decision", d["reason"] or "continue"]
    return "\n".join(lines) + "\n"


def log_rows(env, decision, red, green, refactor) -> None:
    records = {"red": red, "green": green, "refactor": refactor or {}}
    ts = journal.now()

    def row(team, status, description, files=""):
        u = Usage(**records[team].get("usage", {}))
        return {
            "team": team,
            "status": status,
            "tests_pass": decision["tests_pass"],
            "description": description,
            "files_changed": files,
            "timestamp": ts,
            "tokens": u.tokens,
            "cost_usd": round(u.cost_usd, 6),
        }

    rows = [row("red", "ok", f"{red['findings']} findings")]
    rows.append(
        row(
            "green",
            "reverted" if decision["reverted"] else "ok",
            f"{len(decision['fixed'])} fixed, {len(green['skipped'])} skipped",
            len(git.changed_files(env.worktree, green["start_commit"], green["end_commit"])),
        )
    )
    if refactor:
        rows.append(row("refactor", "ok", f"{refactor['changes']} changes", len(refactor["files"])))
    journal.upsert_results(env.layout, env.track, f"{env.cycle:03d}", rows)

"""Team briefs: the prompt each team sees, filtered for the clean room.

The system prompt is the team's rules (a template in `prompts/<team>.md`, or the file the
spec's `agent.prompts.<team>` names) plus the target's description. It is the same for every
stage of a session, so it caches well. Everything that changes per stage — findings, the
tried list, the angle, the changed files — goes into the task.

What a team may know is decided here, by construction: each team's task is rendered only
from the fields listed for it, so a Green brief cannot carry the Red team's narrative or the
current angle, and a Refactor brief cannot carry any finding, whatever the context holds.

Templates use `$name` placeholders (Python `string.Template`): `$target` (the target block)
and `$team`. Unknown placeholders are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from autoresearch.agents.backends.base import TEAMS, StageBrief, StageLimits

MAX_CONVENTIONS_CHARS = 4000
MAX_HISTORY = 10
# The only finding fields Green ever sees: what, where, how bad, what it breaks.
FINDING_FIELDS = ("id", "severity", "title", "location", "issue", "impact")

# What Red may call a finding's severity (its report tool's enum; the engine's order).
RED_SEVERITIES = ("critical", "high", "medium", "low", "test-gap")
# Red's general checklist. Keys let the engine name the categories that found nothing.
RED_CATEGORIES: dict[str, str] = {
    "bugs": "Bugs: wrong logic, off-by-one errors, null/None dereferences, type mix-ups.",
    "error-handling": "Error handling: errors swallowed, errors without context, "
    "inconsistent handling between similar places.",
    "test-gaps": "Test gaps: code paths no test runs, missing edge cases, assertions too "
    "weak to catch a regression.",
    "concurrency": "Concurrency: races, deadlocks, shared mutable state without locking.",
    "performance": "Performance: repeated queries in loops, needless allocation or copying, "
    "missing indexes.",
    "api-contracts": "API contracts: parameters accepted and then ignored, similar endpoints "
    "or functions that behave differently.",
    "security": "Security: injection, unbounded input, missing validation where data enters "
    "the system.",
}


@dataclass
class BriefContext:
    """Everything a stage could tell a team; `build_brief` picks what the team may see."""

    team: str
    target_path: str = ""
    stack: str = ""
    test_command: str | None = None
    linter: str | None = None
    scope_text: str = ""
    branch: str = ""
    conventions: str = ""
    cycle: int = 1
    tried: list[str] = field(default_factory=list)
    dropped_categories: list[str] = field(default_factory=list)
    adjacent_files: list[str] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    # Finding id -> the numbered code around its location, read through the team's own
    # tools (so a file they may not read is never shown): Green starts from it.
    excerpts: dict[str, str] = field(default_factory=dict)
    changed_files: list[str] = field(default_factory=list)
    angle: dict[str, Any] | None = None
    hypothesis: dict[str, Any] | None = None
    aspiration: str | None = None
    experiment: dict[str, Any] | None = None
    # A lens's task, already filtered by the lens: {heading, focus, context: [lines],
    # closing, data}. Each lens decides what its team may see (a persona sees no other's).
    lens: dict[str, Any] | None = None


# The teams whose change is judged by a count of errors going down (StageBrief.tidy).
_TIDY_TEAMS = frozenset({"fix"})

# Which target facts each team's system prompt shows.
_TARGET_FIELDS: dict[str, tuple[str, ...]] = {
    "red": ("path", "stack", "test", "linter", "scope"),
    "green": ("path", "branch", "test", "scope"),
    "refactor": ("path", "branch", "test", "scope"),
    "strategist": ("path", "stack", "scope"),
    "experiment": ("path", "branch", "test", "scope"),
    "auditor": ("path", "stack", "test", "linter", "scope"),
    "debugger": ("path", "stack", "test", "linter", "scope"),
    "explorer": ("path", "stack", "scope"),
    "persona": ("path", "stack", "scope"),
    "debate": ("path", "stack", "scope"),
    "judge": ("path", "stack", "scope"),
    "fix": ("path", "branch", "test", "linter", "scope"),
    "learn": ("path", "branch", "stack", "scope"),
    "ship": ("path", "branch", "test", "linter", "scope"),
}


def load_template(team: str, overrides: dict[str, str] | None = None) -> str:
    """The team's rules template: the spec's override file if set, else the built-in one."""
    path = (overrides or {}).get(team)
    if path:
        file = Path(path).expanduser()
        if not file.is_file():
            raise ValueError(
                f"prompt file {path} does not exist (set by the spec key agent.prompts.{team}); "
                "fix the path or remove the key to use the built-in prompt"
            )
        return file.read_text(encoding="utf-8")
    return (
        resources.files("autoresearch.agents").joinpath("briefs", f"{team}.md").read_text("utf-8")
    )


def build_brief(
    ctx: BriefContext, overrides: dict[str, str] | None, limits: StageLimits
) -> StageBrief:
    if ctx.team not in TEAMS:
        raise ValueError(f"unknown team {ctx.team!r}; expected one of {', '.join(TEAMS)}")
    template = load_template(ctx.team, overrides)
    system = Template(template).safe_substitute(target=_target_block(ctx), team=ctx.team).strip()
    task, data = _TASKS.get(ctx.team, _lens_task)(ctx)
    return StageBrief(
        team=ctx.team,
        system=system + "\n",
        task=task.strip() + "\n",
        limits=limits,
        data=data,
        tidy=ctx.team in _TIDY_TEAMS,
    )


# -- target block -------------------------------------------------------------------------


def _target_block(ctx: BriefContext) -> str:
    lines = ["## Target"]
    facts = {
        "path": ("Path", ctx.target_path or "(the repository root)"),
        "stack": ("Stack", ctx.stack or "unknown"),
        "test": ("Test command", ctx.test_command or "none configured"),
        "linter": ("Linter", ctx.linter or "none"),
        "branch": (
            "Branch",
            f"{ctx.branch} (already checked out)" if ctx.branch else "(session branch)",
        ),
        "scope": ("Scope", ctx.scope_text or "all files"),
    }
    for key in _TARGET_FIELDS[ctx.team]:
        label, value = facts[key]
        lines.append(f"- {label}: {value}")
    lines.append("- Tool paths are relative to the repository root.")
    conventions = ctx.conventions.strip()
    if conventions:
        if len(conventions) > MAX_CONVENTIONS_CHARS:
            conventions = conventions[:MAX_CONVENTIONS_CHARS].rstrip() + "\n[... trimmed ...]"
        lines += ["", "## Project conventions (from the project's own notes)", conventions]
    return "\n".join(lines)


# -- per-team tasks -----------------------------------------------------------------------


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _red_task(ctx: BriefContext) -> tuple[str, dict[str, Any]]:
    parts = [f"# Cycle {ctx.cycle}: find problems"]
    if ctx.tried:
        parts.append(
            "## Do not report again\nThese were already found and dealt with:\n"
            + _bullets(ctx.tried)
        )
    data: dict[str, Any] = {"cycle": ctx.cycle, "tried": list(ctx.tried)}
    if ctx.angle:
        angle = ctx.angle
        parts.append(
            "## What to look for\n"
            f"This run is scoped to one angle only: {angle.get('name', '')}\n"
            f"Hypothesis: {angle.get('hypothesis', '')}\n"
            f"Metric: {angle.get('metric', '')}\n"
            f"Current value: {angle.get('current', '')}\n"
            f"Target: {angle.get('target', '')}\n\n"
            "Find the places in the code where work on this angle would plausibly move the "
            "metric toward the target. Each finding needs a file and line, and its impact must "
            "say in one sentence how fixing it would move the metric. Problems unrelated to this "
            "angle are not the aim of this run: leave them out (findings outside the angle's "
            "scope wait in the ideas backlog)."
        )
        data["angle"] = dict(angle)
    elif ctx.hypothesis:
        hyp = ctx.hypothesis
        text = (
            "## What to look for\n"
            f"This track tests one hypothesis only: {hyp.get('name', '')} "
            f"({hyp.get('category', '')})\n"
            f"Hypothesis: {hyp.get('statement', '')}\n"
        )
        if ctx.aspiration:
            text += f"Aspiration: {ctx.aspiration}\n"
        text += (
            "\nFind the places in the code where this hypothesis would be tested or put into "
            "practice. If it needs new code rather than changes to existing code, say which "
            "files that new code would live in and which interfaces it would touch (use the "
            "nearest existing file and line as the location). Each finding needs a file and "
            "line, and one sentence on how it connects to the hypothesis."
        )
        parts.append(text)
        data["hypothesis"] = dict(hyp)
    else:
        dropped = {c.lower() for c in ctx.dropped_categories} if ctx.cycle > 1 else set()
        keys = [k for k in RED_CATEGORIES if k not in dropped] or list(RED_CATEGORIES)
        text = "## What to look for\n" + _bullets([RED_CATEGORIES[k] for k in keys])
        if ctx.cycle > 1:
            text += (
                "\n\nGive special attention to the code around earlier fixes: regressions, edge "
                "cases those fixes newly expose, and how recently changed modules fit together."
            )
            if ctx.adjacent_files:
                text += "\nRecently changed files:\n" + _bullets(ctx.adjacent_files)
                data["adjacent_files"] = list(ctx.adjacent_files)
        parts.append(text)
        data["categories"] = keys
    parts.append("Report each problem with report_finding, then end your turn.")
    return "\n\n".join(parts), data


def _sanitized(findings: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{k: str(f.get(k, "")).strip() for k in FINDING_FIELDS} for f in findings]


def _green_task(ctx: BriefContext) -> tuple[str, dict[str, Any]]:
    findings = _sanitized(ctx.findings)
    blocks = []
    for f in findings:
        blocks.append(
            f"### [{f['id']}] {f['title']}\n"
            f"- Severity: {f['severity']}\n"
            f"- Location: {f['location']}\n"
            f"- Issue: {f['issue']}\n"
            f"- Impact: {f['impact']}"
            + (f"\n- Code:\n```\n{ctx.excerpts[f['id']]}\n```" if f["id"] in ctx.excerpts else "")
        )
    body = "\n\n".join(blocks) if blocks else "(no issues this cycle: end your turn)"
    task = (
        f"# Issues to fix ({len(findings)})\n\n{body}\n\n"
        "Handle every issue above with one finish_fix or skip_finding call, then end your turn."
    )
    return task, {"findings": findings}


def _refactor_task(ctx: BriefContext) -> tuple[str, dict[str, Any]]:
    files = [str(f) for f in ctx.changed_files]
    listing = _bullets(files) if files else "(none: pick a few central files yourself)"
    task = (
        "# Simplify\n\n## Recently changed files\n"
        f"{listing}\n\n"
        "Start with these files and the code around them."
    )
    return task, {"changed_files": files}


def _strategist_task(ctx: BriefContext) -> tuple[str, dict[str, Any]]:
    aspiration = (ctx.aspiration or "").strip() or "(none given: improve the codebase broadly)"
    task = (
        f"# Aspiration\n{aspiration}\n\n"
        "Propose 3 to 5 hypotheses with propose_hypothesis (at least one obvious, one bold and "
        "one creative), then end your turn."
    )
    return task, {"aspiration": aspiration}


def _experiment_task(ctx: BriefContext) -> tuple[str, dict[str, Any]]:
    exp = dict(ctx.experiment or {})
    history = list(exp.get("history") or [])[-MAX_HISTORY:]
    files = [str(f) for f in exp.get("scope_files") or exp.get("files") or []]
    parts = [f"# Goal\n{exp.get('goal', '')}"]
    if exp.get("direction_prose"):
        parts.append(f"## Research direction\n{str(exp['direction_prose']).strip()}")
    parts.append(f"## Current best\n{exp.get('best', 'no measurement yet')}")
    if history:
        rows = ["; ".join(f"{k}: {v}" for k, v in entry.items()) for entry in history]
        parts.append(f"## Last {len(history)} experiments (oldest first)\n" + _bullets(rows))
    else:
        parts.append("## Last experiments\n(none yet: this is the first iteration)")
    retry = list(exp.get("retry") or [])
    if retry:
        rows = [f'{r["id"]} "{r["hypothesis"]}": {r["why"]}' for r in retry]
        parts.append(
            "## May be worth retrying now\n"
            + _bullets(rows)
            + "\nEach may be retried once: a retry is not refused as a duplicate and is "
            "logged as a retry of its experiment."
        )
    if files:
        parts.append("## Files in scope\n" + _bullets(files))
    parts.append(
        "Make one atomic change, then call finish_experiment with your hypothesis and a "
        "one-line summary of the change."
    )
    data = {
        "goal": exp.get("goal", ""),
        "direction_prose": exp.get("direction_prose", ""),
        "best": exp.get("best"),
        "history": history,
        "retry": retry,
        "scope_files": files,
    }
    return "\n\n".join(parts), data


def _lens_task(ctx: BriefContext) -> tuple[str, dict[str, Any]]:
    """A lens's task: its heading, the focus of this run, context lines, how to finish."""
    lens = dict(ctx.lens or {})
    parts = [f"# {lens.get('heading', 'Task')}"]
    if lens.get("focus"):
        parts.append(f"## Focus\n{str(lens['focus']).strip()}")
    for title, lines in lens.get("context") or []:
        parts.append(f"## {title}\n" + (_bullets([str(x) for x in lines]) if lines else "(none)"))
    if lens.get("closing"):
        parts.append(str(lens["closing"]).strip())
    return "\n\n".join(parts), dict(lens.get("data") or {})


# Every other team is a lens's, whose task the lens has written (_lens_task).
_TASKS = {
    "red": _red_task,
    "green": _green_task,
    "refactor": _refactor_task,
    "strategist": _strategist_task,
    "experiment": _experiment_task,
}

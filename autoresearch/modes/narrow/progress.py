"""Narrow mode's reports: goal-progress.md and .png, session.md's Goal and Angles, status.

Everything is rendered whole from the per-cycle records, so a rerun never duplicates a row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autoresearch.engine.loop import Decision
from autoresearch.safety import git
from autoresearch.session.files import write_text
from autoresearch.session.layout import SessionLayout

from .angles import angle_statuses
from .goal import Goal, angles_of, goal_of
from .step import GoalStep


def load_baseline(layout: SessionLayout) -> dict[str, Any]:
    return json.loads(layout.baseline.read_text())


def records(decisions: list[Decision]) -> list[tuple[int, GoalStep]]:
    """Each cycle's number and goal record (the decisions read as narrow's NarrowStep)."""
    return [(d.cycle, d.extra.narrow) for d in decisions]  # type: ignore[attr-defined]


# A measurement that always prints a number: the count of ruff's diagnostics, 0 when clean
# (plan.PY_LINT, which imports the modes, so it is written out here).
COUNTING_COMMAND = (
    "python -m ruff check --no-cache --no-fix --exit-zero --output-format json . "
    '| python -c "import json, sys; print(len(json.load(sys.stdin)))"'
)


def unmeasured_notes(goal: Goal, recs: list[tuple[int, GoalStep]]) -> list[str]:
    """For each cycle whose measurement printed no number: which command, what it printed,
    what became of the cycle and what to change (`done`, status, session.md)."""
    notes = []
    for cycle, r in recs:
        if r.value is not None:
            continue
        said = (r.error or "no output").splitlines()[0]
        notes.append(
            f"Cycle {cycle} could not be judged: goal.command `{goal.command}` gave no value "
            f"after it ({said}), so the cycle's commits were reverted. Make goal.command print "
            f"a number whatever the outcome, e.g. a count that is 0 when all is clean: "
            f"`{COUNTING_COMMAND}`."
        )
    return notes


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+g}" if signed else f"{value:g}"


def metric_line(goal: Goal, r: GoalStep) -> str:
    if r.value is None:
        head = f"{goal.metric}: not measurable ({(r.error or '').splitlines()[0]})"
    else:
        head = (
            f"{goal.metric}: {r.value:g} (baseline {r.baseline:g}, "
            f"Δ baseline {_fmt(r.delta_baseline, True)}, "
            f"Δ previous {_fmt(r.delta_previous, True)}; target {goal.target}"
            f"{': met' if r.met else ''})"
        )
    notes = [f"angle {r.angle}"]
    if r.reverted:
        notes.append(f"regression {r.regressions} on this angle, cycle reverted")
    elif r.regressed:
        notes.append(f"regression {r.regressions} on this angle")
    if r.exhausted_now:
        notes.append(f"angle exhausted: {r.exhausted_now}")
    return f"{head}; {', '.join(notes)}"


def write_progress(
    layout: SessionLayout,
    values: dict[str, Any],
    decisions: list[Decision],
    worktree: Path | None = None,
) -> None:
    """Rewritten whole from the per-cycle records, so a rerun never duplicates a row."""
    goal = goal_of(values, layout.name)
    base = load_baseline(layout)
    recs = records(decisions)
    current = recs[-1][1].current if recs else base["value"]
    lines = [
        f"# Goal progress: {layout.name}",
        "",
        f"- Metric: {goal.metric}",
        f"- Measurement command: `{goal.command}` (format {goal.format}, "
        f"repeats {goal.repeats}, median)",
        f"- Baseline value: {base['value']:g} (samples {_samples(base['samples'])})",
        f"- Target value: {goal.target}",
        f"- Current value: {_fmt(current)}",
        "",
        "| cycle | value | Δ baseline | Δ previous | angle | samples | outcome |",
        "|------:|------:|-----------:|-----------:|-------|---------|---------|",
    ]
    for cycle, r in recs:
        lines.append(
            f"| {cycle} | {_fmt(r.value)} | {_fmt(r.delta_baseline, True)} | "
            f"{_fmt(r.delta_previous, True)} | {r.angle} | {_samples(r.samples)} | "
            f"{_outcome(r)} |"
        )
    notes = unmeasured_notes(goal, recs)
    if notes:
        lines += ["", "## Not measured", *(f"- {n}" for n in notes)]
    last = decisions[-1] if decisions else None
    if last and last.stop:
        lines += ["", "## Final", f"- Stopped: {last.reason}", f"- Final value: {_fmt(current)}"]
        if worktree is not None:
            history = git.git(
                worktree, "log", "--oneline", "--no-decorate", f"{base['commit']}..HEAD"
            )
            lines += ["", "## Commit history", "```", history or "(no commits)", "```"]
    write_text(layout.goal_progress, "\n".join(lines) + "\n")


def _samples(samples: list[float]) -> str:
    return ", ".join(f"{s:g}" for s in samples) if samples else "-"


def _outcome(r: GoalStep) -> str:
    if r.met:
        return "goal met"
    parts = []
    if r.value is None:
        parts.append("not measurable")
    if r.reverted:
        parts.append(f"regression {r.regressions}, reverted")
    elif r.regressed:
        parts.append(f"regression {r.regressions}")
    elif r.kept_fixes:
        parts.append(f"kept ({r.kept_fixes} fixes)")
    else:
        parts.append(f"nothing kept (idle {r.idle})")
    if r.exhausted_now:
        parts.append(f"angle exhausted ({r.exhausted_now})")
    return "; ".join(parts)


def render_sections(
    layout: SessionLayout, values: dict[str, Any], decisions: list[Decision]
) -> str:
    goal = goal_of(values, layout.name)
    angles = angles_of(values, layout.name)
    base = load_baseline(layout)
    recs = records(decisions)
    last = recs[-1][1] if recs else None
    current = last.current if last else base["value"]
    delta = None if current is None else current - base["value"]
    lines = [
        "## Goal",
        f"- Metric: {goal.metric}",
        f"- Measurement command: `{goal.command}`",
        f"- Baseline value: {base['value']:g} (samples {_samples(base['samples'])})",
        f"- Target value: {goal.target}",
        f"- Current value: {_fmt(current)} (Δ baseline {_fmt(delta, True)})",
        "",
        "## Angles",
        "| Priority | Name | Hypothesis | Status |",
        "|----------|------|------------|--------|",
    ]
    status = angle_statuses(angles, last)
    for a in angles:
        lines.append(f"| {a.priority} | {a.name} | {a.hypothesis} | {status[a.name]} |")
    notes = unmeasured_notes(goal, recs)
    if notes:
        lines += ["", "## Not measured", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def status_lines(
    layout: SessionLayout, values: dict[str, Any], decisions: list[Decision]
) -> list[str]:
    """`autoresearch status` extras: baseline, current, target, delta, angle table."""
    if not layout.baseline.exists():
        return ["Goal: baseline not measured yet"]
    goal = goal_of(values, layout.name)
    base = load_baseline(layout)
    recs = records(decisions)
    last = recs[-1][1] if recs else None
    current = last.current if last else base["value"]
    delta = None if current is None else current - base["value"]
    met = current is not None and goal.target.met(current)
    lines = [
        f"Metric: {goal.metric}",
        f"  baseline {base['value']:g}, current {_fmt(current)}, target {goal.target}, "
        f"delta {_fmt(delta, True)}{' (goal met)' if met else ''}",
        "Angles:",
    ]
    angles = angles_of(values, layout.name)
    status = angle_statuses(angles, last)
    width = max(len(a.name) for a in angles)
    for a in angles:
        lines.append(f"  {a.priority}. {a.name.ljust(width)}  {status[a.name]}")
    return lines + unmeasured_notes(goal, recs)


def plot_progress(
    layout: SessionLayout, values: dict[str, Any], decisions: list[Decision], out: Path
) -> None:
    """Metric per cycle, baseline and target lines; reverted cycles marked."""
    # A Figure of its own, not pyplot's: no display, no backend to choose, and pyplot's
    # import and figure registry spared (the same image).
    from matplotlib.figure import Figure

    goal = goal_of(values, layout.name)
    base = load_baseline(layout)
    recs = records(decisions)
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.subplots()
    xs = [0] + [cycle for cycle, _ in recs]
    current = [base["value"]] + [r.current for _, r in recs]
    ax.step(xs, current, where="post", color="tab:blue", label="value kept on the branch")
    kept = [(n, r.value) for n, r in recs if r.value is not None and not r.reverted]
    if kept:
        ax.plot(*zip(*kept, strict=True), "o", color="tab:blue", label="measured, kept")
    gone = [(n, r.value) for n, r in recs if r.value is not None and r.reverted]
    if gone:
        ax.plot(*zip(*gone, strict=True), "x", color="tab:red", ms=9, mew=2, label="reverted")
    ax.axhline(base["value"], color="grey", ls=":", label=f"baseline {base['value']:g}")
    ax.axhline(goal.target.value, color="tab:green", ls="--", label=f"target {goal.target}")
    ax.set_xlabel("cycle")
    ax.set_ylabel(goal.metric)
    ax.set_title(f"{layout.name}: {goal.metric}")
    ax.set_xticks(xs)
    ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")

"""The Red, sanitize, Green and Refactor stages of a cycle, with their harness hooks.

Each stage: reset the worktree to its start commit, build the team's brief (what
the clean room allows it to know), let the backend work through the toolbox, then
write its Markdown file for people and its JSON record for the workflow. What a mode
changes (Red's scope, which findings wait) comes in as arguments.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.agents import prompts
from autoresearch.agents.agent_run import NOT_RUN, run_agent, stop_reason_of
from autoresearch.agents.backends import CONVERSATIONS
from autoresearch.agents.backends.base import NOTHING_TO_TOUCH, StageRun, ToolResult, Usage
from autoresearch.agents.tools import Toolbox
from autoresearch.engine import findings, tally
from autoresearch.engine.stage import StageEnv
from autoresearch.gate.keep import (
    NOTHING_HANDED,
    BatchGate,
    Landed,
    Settled,
    TestGate,
    gate_for,
    hand_in,
)
from autoresearch.gate.testrun import TestRun
from autoresearch.safety import git
from autoresearch.session.files import write_json, write_text
from autoresearch.views import journal


def base_context(env: StageEnv, team: str) -> prompts.BriefContext:
    return prompts.BriefContext(
        team=team,
        target_path=str(env.worktree),
        stack=env.record.stack,
        test_command=env.record.test_command,
        linter=env.record.linter_command,
        scope_text=env.spec.scope_text,
        branch=git.current_branch(env.worktree),
        conventions=env.record.conventions,
        cycle=env.cycle,
    )


# --- Red -------------------------------------------------------------------


def red(
    env: StageEnv, markdown_out: Path, record_out: Path, scope: dict[str, Any] | None = None
) -> None:
    """Red reports findings; `scope` narrows it to an angle or a hypothesis."""
    start = env.cycle_start()
    env.begin(start)
    prev = env.previous_decision()
    history = tally.history(env.layout, env.track, before=env.cycle)
    reported: list[findings.Finding] = []
    first_id = prev["next_finding_id"] if prev else 1
    # What earlier cycles fixed or gave up on, by problem and place: not reported again.
    tried = {entry[0]: entry[1] for entry in history.tried}

    def report_finding(severity, title, location, issue, impact) -> str:
        problem = findings.location_problem(location, env.worktree)
        if problem:
            raise ValueError(f"{problem}; report the file and line where the problem is")
        root = Path(env.worktree).resolve()
        path = (root / _file_of(location)).resolve().relative_to(root).as_posix()
        if not toolbox.sandbox.in_scope(path):
            # Green may not change it, so reporting it would only take a fix slot.
            raise ValueError(
                f"{path} is outside the session's scope (scope.include/exclude); report only "
                "problems in files in scope"
            )
        same = findings.identity(title, location)
        earlier = next((f for f in reported if f.identity() == same), None)
        if earlier is not None:
            raise ValueError(f"already reported in this run as {earlier.id}")
        if same in tried:
            raise ValueError(
                f"already handled in an earlier cycle ({tried[same]}); do not report it again"
            )
        fid = f"F-{first_id + len(reported):03d}"
        reported.append(findings.Finding(fid, severity, title, location, issue, impact))
        return f"recorded as {fid}"

    ctx = base_context(env, "red")
    ctx.tried = journal.tried_for_red(history.tried_lines, history.tried_files)
    if prev:
        ctx.dropped_categories = [
            c for c in findings.CATEGORIES if c not in prev.get("red_categories", [])
        ]
        ctx.adjacent_files = prev.get("files_changed", [])
    if scope:
        ctx.angle = scope.get("angle")
        ctx.hypothesis = scope.get("hypothesis")
        ctx.aspiration = scope.get("aspiration")
    toolbox = Toolbox(
        "red", env.worktree, hooks={"report_finding": report_finding}, **env.toolbox_options()
    )
    run = run_agent(env, "red", ctx, toolbox)
    # One status says both whether Red's tools changed the worktree and where HEAD is.
    state = git.tree_state(env.worktree)
    changed = state is None or any(not e.startswith("! ") for e in state.entries)
    if changed:
        # Red has no write tool, but a tool it runs may write (a linter set to fix): nothing
        # Red does may reach a commit.
        env.log("red: the worktree changed during Red's run; it was restored")
        git.restore(env.worktree)
    write_text(
        markdown_out,
        findings.render(
            reported,
            notes=run.detail if run.turns else "",
            title=f"Red team findings: {env.label}",
        ),
    )
    write_json(
        record_out,
        {
            "stage": "red",
            "cycle": env.cycle,
            "track": env.track,
            "start_commit": start,
            "end_commit": state.head if state is not None else git.head(env.worktree),
            "findings": len(reported),
            "worktree_restored": changed,
            "categories": sorted({findings.categorize(f) for f in reported}),
            "next_finding_id": first_id + len(reported),
            "stop": stop_reason_of(run),
            "usage": asdict(run.usage),
        },
    )


# --- Sanitize ----------------------------------------------------------------


def sanitize(
    env: StageEnv,
    red_markdown: Path,
    out: Path,
    held_back: Callable[[list[findings.Finding]], list[findings.Finding]] = lambda _: [],
) -> None:
    """Deterministic, no model: facts only, at most `max_findings`, the rest to ideas.md.
    `held_back` picks the findings that wait in ideas.md whatever their rank."""
    reported = findings.parse(red_markdown.read_text())
    waiting = held_back(reported)
    reported = [f for f in reported if f not in waiting]
    passed, ranked_out = findings.sanitize(reported, env.spec["max_findings"])
    held = ranked_out + waiting
    write_text(out, findings.render(passed, title=f"Findings passed to Green: {env.label}"))
    journal.record_ideas(
        env.layout,
        f"{env.label}: findings held back by sanitize",
        [f"[{f.severity}] {f.key()}: {f.issue}" for f in held],
        keys=[f.identity() for f in held],
    )
    why = findings.none_passed_why(passed, ranked_out, env.spec["max_findings"], waiting)
    env.log(f"sanitize: {len(passed)} passed to Green, {len(held)} to ideas.md{why}")


# --- Green -------------------------------------------------------------------


@dataclass
class GreenLedger:
    fixed: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    def handled(self, fid: str) -> bool:
        return any(r["id"] == fid for r in self.fixed + self.skipped)


# Why a conversation's end ends the stage's: its limits are the stage's, or the session's.
STAGE_OVER = (*NOT_RUN, "max_turns", "deadline")


def turns_per_finding(env: StageEnv) -> int | None:
    """`agent.max_turns_per_finding`: Green's turns, counted per finding (None: the stage's
    `max_turns`, shared by its conversations, as other stages count them)."""
    value = env.spec.agent.get("max_turns_per_finding")
    return int(value) if value else None


def ends_stage(run: StageRun, per_finding: bool) -> bool:
    """Whether a Green conversation's end ends the stage. With turns counted per finding,
    one out of its turns ends only itself: the next finding has turns of its own, so what
    a finding gets never depends on the order, or the lane, it is worked on in."""
    if per_finding and run.stop_reason == "max_turns":
        return False
    return run.stop_reason in STAGE_OVER


def conversation_groups(
    found: list[findings.Finding], size: int | None
) -> list[list[findings.Finding]]:
    """The findings each Green conversation is given: up to `size` findings of one file,
    in the order the first of each file comes; `size` None: all in one conversation.

    A conversation resends all its earlier turns on each turn, so one conversation for
    every finding costs about the square of the findings; a file's findings together
    still share what the agent reads of it."""
    if size is None:
        return [found] if found else []
    by_file: dict[str, list[findings.Finding]] = {}
    for finding in found:
        by_file.setdefault(_file_of(finding.location), []).append(finding)
    return [group[i : i + size] for group in by_file.values() for i in range(0, len(group), size)]


def _file_of(location: str) -> str:
    return location.strip().partition(":")[0].strip()


def _combined(runs: list[StageRun], per_finding: bool = False) -> StageRun:
    """A stage's conversations as one run: usage and turns summed; the stop that ended the
    stage early, if one did, else the last conversation's."""
    usage = Usage()
    for one in runs:
        usage.add(one.usage)
    last = next((r for r in runs if ends_stage(r, per_finding)), runs[-1])
    return StageRun(usage, sum(r.turns for r in runs), last.stop_reason, last.detail)


@dataclass
class GreenWork:
    """What a stage's Green conversations did: fixes and skips, the last refusal per
    finding (for its skip reason), and each conversation's run."""

    book: GreenLedger = field(default_factory=GreenLedger)
    refusals: dict[str, str] = field(default_factory=dict)
    runs: list[StageRun] = field(default_factory=list)


# Parallel Green's lanes applied onto the worktree at the stage's start commit: what they
# did, and one record per group of findings (green_lanes.merge).
Merge = Callable[[StageEnv, str, dict[str, findings.Finding]], tuple[GreenWork, list[dict]]]


def green(
    env: StageEnv, sanitized_md, markdown_out, record_out, merge: Merge | None = None
) -> None:
    """Green's stage. With `merge` (agent.parallel_green above 1), the findings were worked
    on in the lanes' own worktrees (green_lanes.py): `merge` applies their commits here."""
    red_record = env.stage_record("red")
    start = red_record["end_commit"]
    env.begin(start)
    todo = {f.id: f for f in findings.parse(sanitized_md.read_text())}
    groups: list[dict] | None = None
    if merge is not None:
        # Each lane's fixes were gated where it made them, on its own; together they are
        # a new tree, which the stage's end run decides as a batch (bisecting on a failure).
        gate: TestGate = BatchGate(env, env.reference_tests())
        work, groups = merge(env, start, todo)
    else:
        gate = gate_for(env)
        work = GreenWork()
        fix_findings(env, todo, gate, work, time.monotonic())
    book, refusals = work.book, work.refusals
    run = _combined(work.runs, turns_per_finding(env) is not None) if work.runs else None
    # An unfinished fix is never kept (a gate that settles by resetting does it itself).
    if not gate.resets_on_settle and git.is_dirty(env.worktree):
        git.restore(env.worktree)
    settled = gate.settle(start, [_landed(r, r["id"]) for r in book.fixed])
    settle_fixes(settled, book)
    for fid, finding in todo.items():
        if not book.handled(fid):
            reason = f"not kept: {refusals[fid]}" if fid in refusals else "not attempted"
            book.skipped.append({"id": fid, "key": finding.key(), "reason": reason})
    # The stage's full, uncached run: evaluate reuses it when Refactor changes nothing.
    final = env.measure_tests(uncached=True, reuse=True, known=settled.state)
    held = env.judge_tests(final, gate.reference)
    end = settled.end or git.head(env.worktree)
    lines = [f"# Green team: {env.label}", "", f"Start commit: {start}", f"End commit: {end}", ""]
    lines += [
        "## Fixed",
        *(f"- [{r['id']}] {r['summary']} ({r['commit'][:10]})" for r in book.fixed),
    ]
    if not book.fixed:
        lines.append("(none)")
    lines += ["", "## Skipped", *(f"- [{r['id']}] {r['reason']}" for r in book.skipped)]
    if not book.skipped:
        lines.append("(none)")
    if groups is not None:
        lines += ["", "## Groups (agent.parallel_green)"]
        for g in groups:
            why = f": {g['reason']}" if g.get("reason") else ""
            lines.append(f"- {g['lane']}: {', '.join(g['findings'])}: {g['status']}{why}")
    lines += ["", "## Final test status", final.summary, "", held.reason]
    write_text(markdown_out, "\n".join(lines) + "\n")
    write_json(
        record_out,
        {
            "stage": "green",
            "cycle": env.cycle,
            "track": env.track,
            "start_commit": start,
            "end_commit": end,
            "fixed": book.fixed,
            "skipped": book.skipped,
            "tests_pass": final.ok and held.ok,
            "test_summary": final.summary,
            "test_verdict": held.reason,
            # Tests the stage's end no longer has, let go by allow_test_removal (else the
            # gate took the change out): the ids, for the audit trail.
            "tests_removed": list(held.removed),
            "tests": env.as_left(final).to_record(),
            "stop": stop_reason_of(run) if run else None,
            "usage": asdict(run.usage) if run else asdict(Usage()),
            # agent.parallel_green: each group of findings, its lane, and whether its
            # commits were applied or, with the reason, skipped.
            **({"groups": groups} if groups is not None else {}),
        },
    )


def fix_findings(
    env: StageEnv,
    todo: dict[str, findings.Finding],
    gate: TestGate,
    work: GreenWork,
    began: float,
    data: dict[str, Any] | None = None,
) -> None:
    """Green's conversations on `todo` in `env`'s worktree, each fix gated and committed
    there; what they did goes to `work`, whose earlier runs count against the stage's
    limits, as does the time since `began`. `data` reaches the brief's structured facts."""
    book, refusals, runs = work.book, work.refusals, work.runs
    toolbox: Toolbox | None = None
    current: dict[str, findings.Finding] = {}  # the findings of the conversation under way

    def check_id(fid: str) -> str | None:
        if fid not in current:
            return f"unknown finding id {fid!r}; the findings are {sorted(current)}"
        if book.handled(fid):
            return f"{fid} was already handled"
        return None

    def maybe_finished() -> None:
        if toolbox is not None and all(book.handled(fid) for fid in current):
            toolbox.mark_finished()

    def finish_fix(finding_id: str, summary: str) -> ToolResult:
        problem = check_id(finding_id)
        if problem:
            return ToolResult(problem, is_error=True)
        finding = todo[finding_id]
        message = f"fix: [{finding_id}] {' '.join(summary.split())[:120]}"
        handed = hand_in(env, gate, toolbox.written if toolbox else {}, message)
        if handed.nothing:
            refusals[finding_id] = f"finish_fix was called with no change {handed.nothing}"
            return ToolResult(NOTHING_HANDED[handed.nothing], is_error=True)
        if handed.protected:
            env.log(f"green: {finding_id}: {handed.protected}")
            skipped(finding_id, handed.protected)
            return ToolResult(
                f"not kept, so the worktree was restored: {handed.protected}", is_error=True
            )
        if handed.sha:
            book.fixed.append(
                {
                    "id": finding_id,
                    "key": finding.key(),
                    "commit": handed.sha,
                    "summary": summary,
                    "message": message,
                }
            )
            maybe_finished()
            return ToolResult(f"{gate.kept_message()}; committed {handed.sha[:10]}: {message}")
        skipped(finding_id, gate.verdict.reason if gate.verdict else "the tests did not run")
        return ToolResult(
            f"not kept, so the worktree was restored and {finding_id} recorded as skipped: "
            f"{gate.refused()}"
        )

    def skipped(finding_id: str, reason: str) -> None:
        book.skipped.append({"id": finding_id, "key": todo[finding_id].key(), "reason": reason})
        maybe_finished()

    def skip_finding(finding_id: str, reason: str) -> ToolResult:
        problem = check_id(finding_id)
        if problem:
            return ToolResult(problem, is_error=True)
        git.restore(env.worktree)
        skipped(finding_id, reason)
        return ToolResult(f"{finding_id} recorded as skipped")

    conversational = env.spec.agent.get("backend") in CONVERSATIONS
    size = env.spec.agent.get("findings_per_conversation") if conversational else None
    groups = conversation_groups(list(todo.values()), size)
    timeout = env.limits().deadline_s
    per_finding = turns_per_finding(env)
    for number, group in enumerate(groups, 1):
        # An unfinished fix of the last conversation is not kept (the first starts on the
        # worktree the stage's start reset).
        if number > 1 and git.is_dirty(env.worktree):
            git.restore(env.worktree)
        left = None if timeout is None else timeout - (time.monotonic() - began)
        if left is not None and left <= 0:
            break
        current = {f.id: f for f in group}
        if len(groups) > 1:
            env.log(f"green: conversation {number} of {len(groups)}: {', '.join(current)}")
        # Each conversation is told only its own findings; the system prompt and tools are
        # the same bytes in each, so all but the first read them from the prompt cache.
        ctx = base_context(env, "green")
        ctx.findings = findings.as_dicts(group)
        toolbox = Toolbox(
            "green",
            env.worktree,
            hooks={"finish_fix": finish_fix, "skip_finding": skip_finding},
            **env.toolbox_options(),
        )
        ctx.excerpts = {
            f.id: code for f in group if (code := toolbox.excerpt(f.location)) is not None
        }
        earlier = _combined(runs, per_finding is not None) if runs else None
        turns = per_finding * len(group) if per_finding is not None else None
        runs.append(
            run_agent(
                env,
                "green",
                ctx,
                toolbox,
                deadline_s=left,
                earlier=earlier,
                extra_data=data,
                turns=turns,
            )
        )
        if ends_stage(runs[-1], per_finding is not None):
            break


def _landed(entry: dict, label: str) -> Landed:
    return Landed(entry["commit"], entry["message"], label)


def settle_fixes(settled: Settled, book: GreenLedger) -> None:
    """The fixes the gate took out move to skipped; the rest carry their sha now."""
    fixed = []
    for r in book.fixed:
        if r["commit"] in settled.dropped:
            book.skipped.append(
                {"id": r["id"], "key": r["key"], "reason": settled.dropped[r["commit"]]}
            )
        else:
            fixed.append({**r, "commit": settled.kept.get(r["commit"], r["commit"])})
    book.fixed = fixed


# --- Refactor -------------------------------------------------------------------

MAX_REFACTOR_COMMITS = 5


def refactor(env: StageEnv, markdown_out, record_out) -> None:
    green_record = env.stage_record("green")
    start = green_record["end_commit"]
    env.begin(start)
    # Clean room: the Refactor team learns which files changed, nothing of why.
    changed = git.changed_files(env.worktree, green_record["start_commit"], start)
    gate = gate_for(env)
    if green_record.get("tests"):  # held to the tree Green left, with the tests it added
        gate.hold_to(TestRun.from_record(green_record["tests"]), start)
    commits: list[dict] = []
    reverted: list[str] = []
    toolbox: Toolbox | None = None

    def finish_refactor(summary: str) -> ToolResult:
        message = f"refactor: {' '.join(summary.split())[:120]}"
        handed = hand_in(env, gate, toolbox.written if toolbox else {}, message)
        if handed.nothing:
            return ToolResult(NOTHING_HANDED[handed.nothing], is_error=True)
        if handed.sha:
            commits.append({"commit": handed.sha, "summary": summary, "message": message})
            if len(commits) >= MAX_REFACTOR_COMMITS and toolbox is not None:
                toolbox.mark_finished()
            return ToolResult(f"{gate.kept_message()}; committed {handed.sha[:10]}: {message}")
        why = handed.protected
        reverted.append(f"{summary} ({why})" if why else summary)
        if why and handed.passed:  # refused at the commit, after the tests passed
            env.log(f"refactor: {why}")
            return ToolResult(f"not kept, so the change was reverted: {why}", is_error=True)
        return ToolResult(f"not kept, so the change was reverted: {why or gate.refused()}")

    run = None
    if changed:
        ctx = base_context(env, "refactor")
        ctx.changed_files = changed
        toolbox = Toolbox(
            "refactor",
            env.worktree,
            hooks={"finish_refactor": finish_refactor},
            **env.toolbox_options(),
        )
        # The base tells a formatter which files the target keeps formatted (ruff backend).
        base = {"base_commit": env.track_base()}
        run = run_agent(env, "refactor", ctx, toolbox, extra_data=base)
    else:
        env.log("refactor: Green changed no files; nothing to look at")
    if not gate.resets_on_settle and git.is_dirty(env.worktree):
        git.restore(env.worktree)
    settled = gate.settle(start, [_landed(c, f"refactor {c['summary']!r}") for c in commits])
    reverted += [
        f"{c['summary']} ({settled.dropped[c['commit']]})"
        for c in commits
        if c["commit"] in settled.dropped
    ]
    commits = [
        {**c, "commit": settled.kept[c["commit"]]} for c in commits if c["commit"] in settled.kept
    ]
    end = settled.end or git.head(env.worktree)
    lines = [f"# Refactor team: {env.label}", "", f"## Changes: {len(commits)}", ""]
    lines += [f"Start commit: {start}", f"End commit: {end}", ""]
    lines += ["## Recently changed files given to the team", *(f"- {p}" for p in changed)]
    lines += ["", "## Commits", *(f"- {c['summary']} ({c['commit'][:10]})" for c in commits)]
    if reverted:
        lines += [
            "",
            "## Reverted (tests failed or a protected file changed)",
            *(f"- {s}" for s in reverted),
        ]
    write_text(markdown_out, "\n".join(lines) + "\n")
    write_json(
        record_out,
        {
            "stage": "refactor",
            "cycle": env.cycle,
            "track": env.track,
            "start_commit": start,
            "end_commit": end,
            "changes": len(commits),
            "commits": commits,
            "files": changed,
            "stop": stop_reason_of(run) if run else None,
            # It had no file it may change: its "no change" says nothing of the code.
            "idle": run is not None and run.stop_reason == NOTHING_TO_TOUCH,
            "usage": asdict(run.usage) if run else asdict(Usage()),
        },
    )

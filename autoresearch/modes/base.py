"""A mode in three parts, each with the plain cycle loop's defaults: `Mode`, the protocol a
loop needs (at most 25 members: tests/unit/test_architecture.py); `Views` (`mode.views`),
what is shown of the typed history; `Setup` (`mode.setup`), the session around the loop.
A mode subclasses `Mode`, and `Mode.views` or `Mode.setup` only where it differs
(`views = part(MyViews)`); docs/architecture.md lists which mode sets which hook."""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.agents import ledger
from autoresearch.agents.backends import api_key
from autoresearch.engine import findings, tally
from autoresearch.engine.findings import Finding
from autoresearch.engine.loop import Decision, Extra, JsonWriter, Judged, Keys
from autoresearch.engine.stage import StageEnv
from autoresearch.gate import verdict
from autoresearch.safety.words import a_or_an
from autoresearch.session.changesets import REFACTOR, ChangeNote, ReviewLoop, rule_of
from autoresearch.session.files import read_json, write_text
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec
from autoresearch.views import journal
from autoresearch.views.session_report import MetricChange, ReportStep

from ..checks import judge
from ..errors import SessionError, SpecError
from . import cycle_view

BROKEN = "tests broke in this cycle and reverting did not bring them back"
# Stop 7's question when the spec's goal is not given in words.
DEFAULT_GOAL = "The code in scope has no problem of {stop_below} severity or worse."


@dataclass(frozen=True)
class PlannedMetric:
    """What `autoresearch plan` measured and chose, for a mode to turn into its spec keys."""

    goal: str  # the goal in the person's words
    label: str  # a short name for the metric: "test time", "lint warnings"
    command: str
    format: str
    key: str | None
    direction: str  # minimize | maximize
    value: float  # measured on the current code
    seconds: float  # the slowest dry run
    guard: str | None
    scope: list[str] = field(default_factory=list)
    target: str | None = None  # "<= 90"; None: the mode's default
    max_iterations: int = 20  # an unattended run needs a bound

    @property
    def timeout_s(self) -> int:
        """A measurement's timeout: ten times the dry run, at least a minute (a loaded
        machine must not turn a good change into a crash)."""
        return max(60, math.ceil(10 * self.seconds))


@dataclass(frozen=True)
class Ended:
    """What `done` is rendered from once the loop ended: the session's records and the
    loop's decisions, oldest first (as `done` reads them, or as `verify` read them)."""

    layout: SessionLayout
    record: SetupRecord
    spec: SessionSpec
    decisions: list[dict[str, Any]]


@dataclass(frozen=True)
class Progress:
    """What `autoresearch status` shows of a loop, the same fields for every mode (broad:
    one figure per track, as text)."""

    started: bool  # a step of the loop has been decided
    cycles: int | str
    commits: int | str
    fixes: int | str
    tests: str
    open_issues: int | str
    open_rechecked: bool = False  # the open issues were re-checked on the current tree


class Part:
    """A part of a mode besides its loop (`Mode.views`, `Mode.setup`): made once per mode, it
    reads the mode's protocol (name, loop, tracks, ...) as its own attributes."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode

    def __getattr__(self, name: str) -> Any:
        if name == "mode":  # not made yet (a copy): no loop through this method
            raise AttributeError(name)
        return getattr(self.mode, name)


class part:  # noqa: N801 - used as a class attribute, like `property`
    """`views = part(MyViews)`: the mode's part of that class, made on first use. On the
    class it is the part's class, for a mode's own to build on (`Lens.views`)."""

    def __init__(self, cls: type[Part]) -> None:
        self.cls = cls

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, mode: Mode | None, owner: type | None = None) -> Any:
        if mode is None:
            return self.cls
        made = mode.__dict__[self.name] = self.cls(mode)
        return made


class Setup(Part):
    """A mode around its loop: the spec's checks, setup's files, `autoresearch plan`, the
    branch, the teams it needs, and what `redo` moves."""

    rule_prefix = ""  # the prefix of the mode's rule names, which a stage's name leaves out
    has_worktree = True  # a session worktree (broad: one per track instead)
    plannable = False  # `autoresearch plan` can write this mode's spec (see plan_spec)
    tests_optional = False  # may start with no test command detected (experiment: no guard)
    # The loop's stages in order, and the files each writes in its cycle folder (the
    # `.json` one is its record, with the commits it started and ended at). `redo` moves
    # a stage's files, and those of every stage after it, out of the way.
    loop_stages: tuple[str, ...] = ("red", "sanitize", "green", "refactor", "evaluate")
    stage_files: dict[str, tuple[str, ...]] = {
        "red": ("red-findings.md", "red.json"),
        "sanitize": ("sanitized.md",),
        "green": ("green-patch.md", "green.json"),
        "refactor": ("refactor-patch.md", "refactor.json"),
        "evaluate": ("eval-results.md", "decision.json"),
    }
    stage_rules: dict[str, str] = {}  # stage -> its rule's log folder, when not the stage name
    # The commented loop keys `autoresearch new` writes above the mode's own block: a mode
    # with a bound and teams of its own (experiment, learn) writes none of these.
    spec_loop_keys = (
        "# max_cycles: 5                # default: stop after 10 cycles\n"
        "# teams: [red, green, refactor]\n"
    )

    def unmade_files(self, decision: dict[str, Any]) -> frozenset[str]:
        """Stage files a decided step did not make by design (verify does not miss them):
        experiment's measurements when nothing was measured. Default: none."""
        return frozenset()

    def branch_name(
        self, session: str, values: dict[str, Any] | None = None, target: Path | None = None
    ) -> str:
        """The session branch to make (`values`, the spec, may name another)."""
        return self.branch.format(name=session)

    def check_spec(self, values: dict[str, Any], name: str) -> None:
        """Preflight: raise SpecError naming the key when the mode's spec is incomplete."""
        if self.qualitative:
            check_judge(values, name)

    def describe_spec(self, values: dict[str, Any], name: str) -> list[str]:
        """Lines a dry run prints about the spec as the mode reads it (default: none)."""
        return []

    def on_setup(
        self, layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log
    ) -> None:
        """Setup: the mode's own files (runs before the spec is frozen, may amend `values`)."""

    def plan_spec(self, plan: PlannedMetric) -> dict[str, Any]:
        """`autoresearch plan`: the spec keys of this mode for a dry-run metric."""
        raise SpecError(f"autoresearch plan cannot write {a_or_an(self.name)} session")

    def set_aside(self, layout: SessionLayout, cycle: int, track: str, dest: Path) -> None:
        """`redo`: move the mode's own log entries of `cycle` and later into `dest` (the
        shared results.tsv rows are set aside for every mode by `redo`)."""

    def teams_needed(self, values: dict[str, Any]) -> set[str]:
        """The teams this spec makes the backend play (checked before anything runs)."""
        return set(values.get("teams") or ["red", "green", "refactor"])

    def plays_with_ruff(self, values: dict[str, Any]) -> bool:
        """Whether the model-free ruff backend can play every team this spec needs
        (`autoresearch new` then writes a spec that runs without a key)."""
        from autoresearch.agents.backends import BACKEND_TEAMS

        return self.teams_needed(values) <= BACKEND_TEAMS["ruff"]


class Views(Part):
    """What a mode shows of its typed history: session.md, `done`, `status`, the report,
    `show` and finalize's review sets. The defaults render a cycle loop's decisions."""

    step_word = "cycle"  # what a progress line and `redo` call one step of the loop
    lists_cycles = True  # session.md lists every cycle
    kept_label = "fixes kept"  # what a step keeps on the branch, as the report counts it

    def summary_decisions(
        self, env: StageEnv, pending: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The decisions session.md shows; `pending` is the one being made (not on disk yet)."""
        decisions = journal.load_decisions(env.layout, env.track)
        if pending is None:
            return decisions
        return [d for d in decisions if d["cycle"] < pending["cycle"]] + [pending]

    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        """The mode's own blocks of session.md (Goal and Angles, Hypotheses, ...)."""
        return ""

    # Whether summary_sections reads the decisions (narrow's, broad's). A mode whose does
    # not has its cycle list made from the loop's running history: one new line a cycle.
    sections_read_decisions = False

    def write_summary(self, env: StageEnv, pending: dict[str, Any] | None = None) -> None:
        cycle_lines = None
        if self.lists_cycles and not self.sections_read_decisions:
            before = pending["cycle"] if pending else None
            history = tally.history(env.layout, env.track, before=before)
            if pending:
                history.add(pending)
            decisions, cycle_lines = [], history.sections()
        else:
            decisions = self.summary_decisions(env, pending)
        sections = self.summary_sections(env, decisions)
        journal.write_summary(
            env.layout, env.record, env.spec, decisions, sections, self.lists_cycles, cycle_lines
        )

    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        """What `done` and the session report wait for: by default, the loop's final decision."""
        return [self.final_decision(layout, checkpoints)]

    def report_steps(self, layout: SessionLayout) -> list[ReportStep]:
        """Every finished cycle of every track, for the session report: its evaluation
        (eval-results.md), the fixes it kept, its test run, the commits it left on the
        branch and why the loop stopped there."""
        steps = []
        for track in self.tracks(layout):
            decisions = journal.load_decisions(layout, track)
            ranged = any(d.get("end_commit") for d in decisions)
            repo = cycle_view.repo_of(layout, track) if ranged else None
            for d in decisions:
                tests = d.get("tests") or {}
                span = (d.get("start_commit"), d.get("end_commit"))
                steps.append(
                    ReportStep(
                        track=track,
                        cycle=d["cycle"],
                        evaluation=layout.cycle(d["cycle"], track) / "eval-results.md",
                        kept=len(d.get("fixed", [])),
                        tests_pass=bool(d.get("tests_pass")),
                        tests_passed=tests.get("passed"),
                        tests_failed=tests.get("failed"),
                        stopped=d.get("reason") or None,
                        commits=span if all(span) else None,  # type: ignore[arg-type]
                        repo=repo,
                    )
                )
        return steps

    def report_metric(self, env: StageEnv) -> MetricChange | None:
        """The session's metric before and after, for the report's outcome (none here)."""
        return None

    def cycle_page(self, spec: SessionSpec, decision: dict[str, Any]) -> tuple[str, str] | None:
        """The page a step's decision renders into its folder, as (file name, text):
        `verify` holds the page on disk to it and never reads the page's claims back.
        None: the mode's step has no such page."""
        from autoresearch.engine import evaluate

        return "eval-results.md", evaluate.render_results(decision)

    def render_done(self, ended: Ended) -> str | None:
        """`done` as the records render it: `verify` holds the file to it. None where
        the mode's `done` says what no record keeps."""
        return cycles_done(self.name, ended)

    def write_done(self, env: StageEnv, out: Path) -> None:
        decisions = journal.load_decisions(env.layout)
        write_text(out, cycles_done(self.name, Ended(env.layout, env.record, env.spec, decisions)))
        last = decisions[-1] if decisions else {}
        env.log(json.dumps({"done": env.layout.name, "reason": last.get("reason")}))

    def end_files(self, layout: SessionLayout, track: str = "") -> list[Path]:
        """What is made after the loop (of `track`) ended, logs included: `redo` moves
        these too, so they are made again from the new history."""
        made = [layout.done, layout.logs / "done.log", layout.root / "benchmarks" / "done.tsv"]
        made += [
            layout.report_dir,
            layout.logs / "session_report.log",
            layout.root / "benchmarks" / "session_report.tsv",
        ]
        return made

    def review_loops(
        self, layout: SessionLayout, record: SetupRecord, spec: SessionSpec
    ) -> list[ReviewLoop]:
        """The branches whose kept commits `finalize` splits into review sets."""
        return [ReviewLoop("", record.branch, record.base_commit)]

    def after_review(self, session: Any, sets: list, do_push: bool, remote: str, log) -> None:
        """`finalize`, once the review sets are made: what else the mode offers (broad: a
        merged branch, modes/broad/merged.py)."""

    def change_notes(
        self, layout: SessionLayout, track: str, spec: SessionSpec
    ) -> dict[str, ChangeNote]:
        """Why each kept commit was made, by commit: for a fix, the finding as sanitize
        passed it to Green (sanitized.md: never Red's own report, whose narrative and fix
        hints the team that made the change never saw); for a refactor, its cycle; and the
        cycle's metric line where the mode measures one."""
        notes: dict[str, ChangeNote] = {}
        for d in journal.load_decisions(layout, track):
            folder = layout.cycle(d["cycle"], track)
            sanitized = folder / "sanitized.md"
            passed = (
                {f.id: f for f in findings.parse(sanitized.read_text())}
                if sanitized.exists()
                else {}
            )
            metric = [f"Cycle {d['cycle']}'s measurement: {d['metric']}"] if d.get("metric") else []
            for fix in d.get("fixed", []):
                f = passed.get(fix["id"])
                lines = [f"Fixes {fix['id']} (cycle {d['cycle']}): {fix['summary']}"]
                if f is not None:
                    lines += [
                        f"Finding {f.id} ({f.severity}): {f.title}",
                        f"Location: {f.location}",
                        f"Issue: {f.issue}",
                        f"Impact: {f.impact}",
                    ]
                # A finding a lint rule names is that rule's mechanical fix (changesets.py).
                kind = rule_of(f.title) if f is not None else ""
                notes[fix["commit"]] = ChangeNote(fix["summary"], tuple(lines + metric), kind)
            refactor = folder / "refactor.json"
            done = json.loads(refactor.read_text()) if refactor.exists() else {}
            for change in done.get("commits", []):
                why = (
                    f"Refactor (cycle {d['cycle']}) of the files the cycle's fixes changed: "
                    f"{change['summary']}"
                )
                notes[change["commit"]] = ChangeNote(change["summary"], (why, *metric), REFACTOR)
        return notes

    def kept_count(self, layout: SessionLayout) -> int | str:
        """What the loop kept so far, as every progress line and `status` count it: here,
        the fixes kept (from the loop's running counts, not from every decision)."""
        return tally.read(layout).fixed

    def progress(self, layout: SessionLayout) -> Progress:
        """The figures `status` shows for every mode: cycles, commits, fixes, tests, open."""
        decisions = journal.load_decisions(layout)
        last = decisions[-1] if decisions else None
        return Progress(
            started=bool(decisions),
            cycles=len(decisions),
            commits=last.get("commits_total", 0) if last else 0,
            fixes=sum(len(d.get("fixed", [])) for d in decisions),
            tests="n/a" if last is None else self.tests_word(layout, last),
            open_issues=len(last.get("open_issues", [])) if last else 0,
            open_rechecked=bool(last and last.get("open_rechecked")),
        )

    @staticmethod
    def tests_word(layout: SessionLayout, last: dict[str, Any]) -> str:
        """The last decision's tests as `done` says them: a failure that is only the base's
        is said to be (the index keeps only counts: the ids are in decision.json)."""
        if last.get("tests_pass"):
            return "pass"
        setup = read_json(layout.setup) or {}
        return verdict.tests_word(full_decision(layout, last), setup.get("baseline") or {})

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        """Extra lines for `autoresearch status NAME`."""
        return []

    def show(
        self,
        layout: SessionLayout,
        spec: SessionSpec,
        iteration: int,
        candidate: str | None,
        track: str = "",
    ) -> str:
        """`autoresearch show NAME N`: one cycle's findings, kept commits with their diffs,
        and what was skipped and why (`track`: a broad track's cycle)."""
        if candidate is not None:
            raise SessionError(f"session {layout.name!r} has no candidates: drop --candidate")
        tracks = self.tracks(layout)
        if track not in tracks:
            have = ", ".join(t for t in tracks if t) or "none: drop --track"
            wanted = f"no track {track!r}" if track else "tracks: pass --track"
            raise SessionError(f"session {layout.name!r} has {wanted} (tracks: {have})")
        return cycle_view.render(layout, iteration, track)


def cycles_done(mode: str, ended: Ended) -> str:
    """A cycle loop's `done`: why it stopped, its counts and its final commit."""
    layout, record, decisions = ended.layout, ended.record, ended.decisions
    last = decisions[-1] if decisions else {}
    fixed = sum(len(d.get("fixed", [])) for d in decisions)
    lines = [
        f"session: {layout.name}",
        f"mode: {mode}",
        f"stopped: {last.get('reason') or 'finished'}",
        f"cycles: {len(decisions)}",
        f"fixes kept: {fixed}",
        f"commits on {record.branch}: {last.get('commits_total', 0)}",
        f"tests: {verdict.tests_word(full_decision(layout, last), record.baseline)}",
        f"final commit: {last.get('end_commit', record.base_commit)}",
        review_line(record),
    ]
    return "\n".join(lines) + "\n"


class Mode:
    """The protocol a loop needs: the mode's name, folder and branch, its record type, its
    judge and stop rules, what Red is handed, and where the loop ends. Its views and its
    setup are parts of their own (`views`, `setup`): a mode overrides only what differs."""

    name = "sweep"
    loop = "cycles"  # the layout's folder for the loop's steps
    branch = "autoresearch/improve"  # `{name}` is the session's name
    default_cycle_cap = 10
    spec_example = ""  # the mode's own keys, for `autoresearch new`
    qualitative = False  # the goal has no number: stop 7 (goal satisfied) may end the loop
    # The tamper screen every change of the mode passes before the gate (tamper.PROFILES):
    # a test gate's; a metric's where the code runs in the measured process; None where
    # the mode screens its changes itself (experiment).
    tamper_profile: str | None = "gate"
    decide_checkpoint = "evaluate"  # the checkpoint whose job writes a cycle's decision.json
    # What the mode adds to decision.json, as its record (loop.Extra); Keys: not typed yet.
    decision_extra: type[Extra] = Keys

    def layout(self, root: Path) -> SessionLayout:
        return SessionLayout(Path(root).absolute(), self.loop)

    def tracks(self, layout: SessionLayout) -> list[str]:
        """The loops of this session: one unnamed loop, or broad's tracks."""
        return [""]

    def red_scope(self, env: StageEnv) -> dict[str, Any] | None:
        """What Red is scoped to: {angle}, {hypothesis, aspiration}, or None for everything."""
        return None

    def held_back(self, env: StageEnv, findings: list[Finding]) -> list[Finding]:
        """Findings that wait in ideas.md instead of going on to sanitize (default: none)."""
        return []

    def cycle_cap(self, spec: SessionSpec) -> int | None:
        return spec.max_cycles or self.default_cycle_cap

    def cap_reason(self, spec: SessionSpec, cap: int) -> str:
        if spec.max_cycles:
            return f"max_cycles reached ({cap})"
        return f"cap of {cap} cycles reached (set max_cycles to run longer)"

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        """The mode's own stop rules, between the shared ones (see `stop_reason`)."""
        return None

    def judge(self, env: StageEnv, output: Any) -> Judged:
        """The step's judge, which `loop.decide` runs first (scripts/step.py): start at the
        loop's commit, apply the change, judge it, commit through the protection check or
        reset; the decision before the stop rules, and what writes the step's results.
        `output`: the decide rule's named outputs. Here the cycle's evaluate (tests, reverts,
        eval-results.md)."""
        from autoresearch.engine import evaluate

        return evaluate.judge(env, Path(output.results), self.previous_step(env))

    def apply_policy(self, env: StageEnv, decision: dict[str, Any]) -> None:
        """After a cycle's tests: set decision['stop'] and ['reason'] (and mode extras)."""
        reason = stop_reason(self, env, decision)
        decision["stop"] = reason is not None
        decision["reason"] = reason

    def log_line(self, env: StageEnv, decision: Decision) -> str:
        """The step's line in the log, once decided (loop.decide)."""
        return (
            f"{env.label}: {len(decision['fixed'])} fixes kept, tests "
            # As `done` and `status` say it: a FAIL of only the base's failing tests says so.
            f"{verdict.tests_word(decision, env.record.baseline)}"
            + (f"; stopping: {decision['reason']}" if decision["stop"] else "")
        )

    def previous_step(self, env: StageEnv) -> Decision | None:
        """The step before this one, the mode's keys read as its record (None: the first);
        parsed once per job, as `StageEnv.previous_decision` is."""
        path = env.layout.decision(env.cycle - 1, env.track)
        if env.cycle <= 1 or not path.exists():
            return None
        return Decision.from_json(env.finished(path), path, self.decision_extra)

    def decision_writer(self, env: StageEnv) -> JsonWriter | None:
        """What writes decision.json when the mode masks what it writes (None: plain)."""
        return None

    def next_open_cycle(self, layout: SessionLayout, track: str = "") -> int:
        """The first cycle with no decision yet, or the one whose decision stopped the loop."""
        return tally.next_open_cycle(layout, track)

    def final_decision(self, layout: SessionLayout, checkpoints: Any, track: str = "") -> str:
        """The decision of the first open cycle, or of the one that stopped the loop (of
        `track`), from the mode's `decide_checkpoint`.

        Completed decisions are read from disk and only the next open cycle is asked of the
        checkpoint: asking every cycle's makes a no-op rerun quadratic.
        """
        cycle = self.next_open_cycle(layout, track)
        wildcards = {"name": layout.name, "cycle": f"{cycle:03d}"} | (
            {"hid": track} if track else {}
        )
        job = getattr(checkpoints, self.decide_checkpoint).get(**wildcards)
        return job.output.decision

    setup = part(Setup)
    views = part(Views)


# --- the stop cascade and stop 7 ----------------------------------------------------------


def stop_reason(mode: Mode, env: StageEnv, decision: dict[str, Any]) -> str | None:
    """The one stop cascade, first match wins: the session must stop (budget, spend
    limit), tests broke beyond repair, a qualitative goal satisfied (stop 7), the mode's
    own rules, the cycle cap."""
    limit = env.spec.budget_usd
    if not decision.get("session_stop") and limit is not None:
        decision["session_stop"] = ledger.budget_exceeded(env.layout.root, limit)
    if decision.get("session_stop"):
        return decision["session_stop"]
    if decision.get("broken"):
        return BROKEN
    reason = goal_stop(mode, env, decision) or mode.loop_stop(env, decision)
    if reason:
        return reason
    cap = mode.cycle_cap(env.spec)
    if cap is not None and env.cycle >= cap:
        return mode.cap_reason(env.spec, cap)
    return None


def goal_text(spec: SessionSpec) -> str:
    """The goal the judges weigh: the spec's `goal:` in words, else the severity rule."""
    goal = spec.get("goal")
    if isinstance(goal, str) and goal.strip():
        return goal.strip()
    return DEFAULT_GOAL.format(stop_below=stop_below_of(spec) or "any")


def goal_cycle(mode: Mode, env: StageEnv, decision: dict[str, Any]) -> judge.CycleRecord:
    """Stop 7's view of the finished cycle: did Red look at everything, what it found,
    whether the tests (and a guard, where the mode has one) pass."""
    path = env.cycle_dir / "red-findings.md"
    reported = findings.parse(path.read_text()) if path.exists() else []
    return judge.CycleRecord(
        full_scope=mode.red_scope(env) is None and red_saw_everything(env),
        severities=tuple(f.severity for f in reported),
        tests_pass=bool(decision.get("tests_pass")),
        guard_pass=decision.get("guard_ok"),
    )


def goal_stop(mode: Mode, env: StageEnv, decision: dict[str, Any]) -> str | None:
    """Stop 7: a full cycle with nothing at or above `stop_below`, tests and guard
    passing, and (with `judge: {panel: N}`) two rounds in a row of a majority "met"."""
    stop_below = stop_below_of(env.spec)
    if not mode.qualitative or stop_below is None:
        return None
    cycle = goal_cycle(mode, env, decision)
    check = judge.goal_satisfied(cycle, stop_below)
    if check.satisfied and env.spec.get("judge"):
        check = judge.goal_satisfied(cycle, stop_below, judge_rounds(env, decision))
    decision["goal_check"] = check.reason
    return check.reason if check.satisfied else None


def judge_rounds(env: StageEnv, decision: dict[str, Any]) -> list[judge.PanelRound]:
    """This cycle's panel votes (asked now, kept in the decision) after the unbroken run
    of earlier cycles that had a round."""
    from autoresearch.measure import panel

    size = int((env.spec.get("judge") or {}).get("panel", judge.DEFAULT_PANEL))
    facts = [
        f"Red reported nothing at or above {stop_below_of(env.spec)} in a full cycle",
        f"tests: {'pass' if decision.get('tests_pass') else 'FAIL'}",
        f"commits on the session branch: {decision.get('commits_total', 0)}",
    ]
    votes = panel.ask(env, goal_text(env.spec), facts, size)
    decision["judge_votes"] = votes
    rounds = [judge.panel_round([v["vote"] for v in votes], size)]
    for earlier in reversed(env.decisions_before()):
        if not earlier.get("judge_votes"):
            break
        past = [v["vote"] for v in earlier["judge_votes"]]
        rounds.insert(0, judge.panel_round(past, len(past)))
    return rounds


# --- stop 7's spec keys ----------------------------------------------------------------------


def stop_below_of(spec: dict[str, Any]) -> str | None:
    """The severity at or above which a finding keeps a qualitative goal open; None: stop 7
    is off (`stop_below: null`)."""
    if "stop_below" not in spec:
        return judge.DEFAULT_STOP_BELOW
    return spec["stop_below"]


def check_judge(values: dict[str, Any], name: str) -> None:
    """`judge: {panel: N}` needs an odd panel and a model to ask (a key, or the script
    backend that stands in for one in rehearsals)."""
    agent = values.get("agent") or {}
    backend = agent.get("backend")
    has_key = api_key.read().present
    can_call = backend == "script" or (backend == "claude" and has_key)
    problem = judge.panel_problem(values.get("judge"), can_call)
    if problem:
        raise SpecError(f"config/sessions/{name}.yaml: key 'judge': {problem}")


def review_line(record: SetupRecord) -> str:
    """The command that lists what the session's branch holds beyond the base."""
    span = f"{record.base_commit[:12]}..{record.branch}"
    return f"review with: git -C {shlex.quote(record.target)} log --oneline {span}"


def full_decision(layout: SessionLayout, decision: dict[str, Any]) -> dict[str, Any]:
    """`decision` as its decision.json has it: the index keeps only a run's counts."""
    if not decision:
        return decision
    path = layout.decision(int(decision["cycle"]), decision.get("track") or "")
    return read_json(path) or decision


def red_saw_everything(env: StageEnv) -> bool:
    """Whether this cycle's Red had its whole checklist: the first cycle always; later ones
    drop the categories that found nothing the cycle before, unless every category found
    something or none did (then the whole checklist comes back; prompts._red_task)."""
    prev = env.previous_decision()
    if prev is None:
        return True
    found = set(prev.get("red_categories") or [])
    dropped = [c for c in findings.CATEGORIES if c not in found]
    return not dropped or len(dropped) == len(findings.CATEGORIES)

"""Narrow mode (seed 000): drive one measurable goal through priority-ranked angles.

The cycle is sweep's (Red, sanitize, Green, Refactor, evaluate); this module only adds
what the seed's narrow mode adds, through the engine's mode hooks (modes.py):

- the goal gate: `goal` (metric, command, target, ...) and ranked `angles` must be
  complete before anything runs (`check_spec`); the baseline is measured at setup in the
  session worktree (`on_setup`);
- Red is scoped to the current angle (`red_scope`);
- after every cycle the metric is measured, a regression against the baseline is reverted,
  and the angle's counters decide whether the angle is exhausted (`apply_policy`);
- session.md's Goal and Angles blocks, goal-progress.md and goal-progress.png.

All state is in the per-cycle decision.json files (key "narrow"), so a rerun of any
cycle recomputes the same answer from disk and the angle table can always be rebuilt.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import git, journal, metrics, spec, stopping
from .layout import SessionLayout

if TYPE_CHECKING:
    from .session import SetupRecord
    from .stage import StageEnv

BASELINE_FILE = "baseline.json"
PROGRESS_FILE = "goal-progress.md"
PLOT_FILE = "goal-progress.png"
GOAL_DEFAULTS: dict[str, Any] = {
    "format": "last_line",
    "key": None,
    "repeats": 1,
    "timeout_s": 300,
    "protect_tests": True,
}
# Seed 000: three consecutive regressions, or two consecutive cycles in which Green keeps
# nothing, exhaust an angle.
MAX_REGRESSIONS = 3
MAX_IDLE = 2
# What counts as a test file when `goal.protect_tests` is on (DESIGN §5: tests are
# protected in narrow mode, so an agent cannot make the goal "met" by weakening them).
TEST_GLOBS = [
    "tests",
    "test",
    "spec",
    "__tests__",
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*_spec.rb",
]
# Words that run the program named after them: the script they run is the measurement.
INTERPRETERS = {
    "python",
    "python3",
    "bash",
    "sh",
    "zsh",
    "node",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "Rscript",
    "julia",
    "lua",
}
# Words that only wrap the real command: `time`, `uv run python x.py`, `timeout 60 ./b.sh`.
WRAPPERS = {"time", "nice", "env", "exec", "command", "nohup", "timeout"}
RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "pdm": "run", "hatch": "run"}
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


# --- the goal gate -----------------------------------------------------------------------


@dataclass(frozen=True)
class Angle:
    name: str
    hypothesis: str
    priority: int


@dataclass(frozen=True)
class Goal:
    metric: str
    command: str
    target: metrics.Target
    target_text: str
    format: str = "last_line"
    key: str | None = None
    repeats: int = 1
    timeout_s: float = 300
    protect_tests: bool = True

    def measure(self, cwd: Path, secrets: list[str] | None = None) -> metrics.Measurement:
        return metrics.measure(
            self.command,
            cwd,
            fmt=self.format,
            key=self.key,
            repeats=self.repeats,
            timeout_s=self.timeout_s,
            secrets=secrets,
        )


def _spec_file(name: str) -> str:
    return f"config/sessions/{name}.yaml"


def check_spec(values: dict[str, Any], name: str) -> None:
    """The goal gate: refuse to start unless goal and ranked angles are complete."""
    goal_of(values, name)
    angles_of(values, name)


def goal_of(values: dict[str, Any], name: str = "<name>") -> Goal:
    where = _spec_file(name)
    raw = values.get("goal")
    if not isinstance(raw, dict) or not raw:
        raise spec.SpecError(
            f"{where}: narrow mode needs key 'goal' with metric, command and target, e.g.\n"
            "goal:\n  metric: lint warnings\n  command: ./count-warnings.sh\n  target: '<= 0'"
        )
    examples = {
        "metric": "a short label such as 'p99 latency' or 'lint warnings'",
        "command": "a shell command that prints the value when run in the target",
        "target": "a comparator and a number such as '<= 100' or '>= 80'",
    }
    for key, what in examples.items():
        value = raw.get(key)
        if value is None or not str(value).strip():
            raise spec.SpecError(
                f"{where}: key 'goal.{key}' is not set: narrow mode needs {what}. "
                "No cycle runs without a measurable goal."
            )
    try:
        target = metrics.parse_target(str(raw["target"]))
    except ValueError as err:
        raise spec.SpecError(f"{where}: key 'goal.target': {err}") from None
    merged = GOAL_DEFAULTS | {k: v for k, v in raw.items() if v is not None}
    try:
        metrics.check_format(str(merged["format"]))
    except ValueError as err:
        raise spec.SpecError(f"{where}: key 'goal.format': {err}") from None
    repeats = merged["repeats"]
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise spec.SpecError(f"{where}: key 'goal.repeats' must be a whole number >= 1")
    timeout = merged["timeout_s"]
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise spec.SpecError(f"{where}: key 'goal.timeout_s' must be a number of seconds > 0")
    return Goal(
        metric=str(raw["metric"]).strip(),
        command=str(raw["command"]),
        target=target,
        target_text=str(raw["target"]).strip(),
        format=str(merged["format"]),
        key=merged.get("key"),
        repeats=repeats,
        timeout_s=float(timeout),
        protect_tests=bool(merged["protect_tests"]),
    )


def angles_of(values: dict[str, Any], name: str = "<name>") -> list[Angle]:
    """The angles in the order they are worked: by explicit priority (seed: never guessed)."""
    where = _spec_file(name)
    raw = values.get("angles")
    if not isinstance(raw, list) or not raw:
        raise spec.SpecError(
            f"{where}: narrow mode needs key 'angles': at least one strategy for moving the "
            "metric, each {name, hypothesis, priority}"
        )
    angles: list[Angle] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise spec.SpecError(f"{where}: key 'angles.{i}' must be a mapping")
        for key in ("name", "hypothesis"):
            if not str(item.get(key) or "").strip():
                raise spec.SpecError(f"{where}: key 'angles.{i}.{key}' is not set")
        priority = item.get("priority")
        if priority is None and len(raw) > 1:
            raise spec.SpecError(
                f"{where}: key 'angles.{i}.priority' is not set: with {len(raw)} angles each "
                "needs an explicit, distinct priority (1 is worked first); the ranking is "
                "never guessed"
            )
        priority = 1 if priority is None else priority
        if not isinstance(priority, int) or isinstance(priority, bool) or priority < 1:
            raise spec.SpecError(f"{where}: key 'angles.{i}.priority' must be a whole number >= 1")
        angles.append(Angle(str(item["name"]).strip(), str(item["hypothesis"]).strip(), priority))
    for kind in ("name", "priority"):
        seen: dict[Any, str] = {}
        for angle in angles:
            value = getattr(angle, kind)
            if value in seen:
                raise spec.SpecError(
                    f"{where}: key 'angles': angles {seen[value]!r} and {angle.name!r} share "
                    f"the {kind} {value!r}; every angle needs a distinct {kind}"
                )
            seen[value] = angle.name
    return sorted(angles, key=lambda a: a.priority)


# --- protected measurement -----------------------------------------------------------------


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: the shell will complain; protect what we can
        return command.split()


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a pipeline or list, without redirections (`< file` is data)."""
    segments: list[list[str]] = [[]]
    skip_next = False
    for word in _words(command):
        if skip_next:
            skip_next = False
        elif set(word) <= set("<>|&;()"):
            if "<" in word or ">" in word:
                skip_next = True  # the redirection's file operand
            else:
                segments.append([])
        else:
            segments[-1].append(word)
    return [s for s in segments if s]


def _in_tree(root: Path, word: str) -> str | None:
    """`word` as a worktree-relative file path, if it names a file inside the worktree."""
    if not word or word.startswith("-") or "=" in word.split("/")[0]:
        return None
    path = (root / word).resolve()
    base = root.resolve()
    if path.is_file() and path.is_relative_to(base):
        return path.relative_to(base).as_posix()
    return None


def _strip_wrappers(words: list[str]) -> list[str]:
    while words:
        head = Path(words[0]).name
        if "=" in words[0] and not words[0].startswith("="):  # FOO=1 cmd
            words = words[1:]
        elif head in WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or words[0][:1].isdigit()):
                words = words[1:]  # options and `timeout 60`
        elif head in RUNNERS and len(words) > 1 and words[1] == RUNNERS[head]:
            words = words[2:]
        else:
            return words
    return words


def measurement_scripts(command: str, root: Path) -> list[str]:
    """Files in the target that make up the measurement: the program a pipeline step runs
    (`./bench.sh`), the script an interpreter runs (`python bench/p99.py`, `python -m
    bench.p99`), and the Makefile of `make bench`. Files the command only reads (`wc -c <
    dist/app.js`, `grep -c TODO src.py`) are what is being measured and stay editable."""
    found: list[str] = []
    for segment in _segments(command):
        words = _strip_wrappers(segment)
        if not words:
            continue
        program = Path(words[0]).name
        hit = _in_tree(root, words[0]) if "/" in words[0] else None
        if hit:
            found.append(hit)
        elif program in INTERPRETERS or program.startswith("python3."):
            args = words[1:]
            while args and args[0].startswith("-"):
                if args[0] == "-m" and len(args) > 1:
                    module = args[1].replace(".", "/")
                    for candidate in (f"{module}.py", f"{module}/__main__.py"):
                        if _in_tree(root, candidate):
                            found.append(candidate)
                    break
                args = args[1:]
            else:
                if args and _in_tree(root, args[0]):
                    found.append(_in_tree(root, args[0]) or "")
        elif program == "make":
            found += [m for m in MAKEFILES if (root / m).is_file()]
        elif _in_tree(root, words[0]):
            found.append(_in_tree(root, words[0]) or "")
    return sorted({f for f in found if f})


def protected_paths(goal: Goal, root: Path, existing: list[str]) -> list[str]:
    extra = measurement_scripts(goal.command, root)
    if goal.protect_tests:
        extra += TEST_GLOBS
    return list(dict.fromkeys([*existing, *extra]))


# --- setup ---------------------------------------------------------------------------------


def on_setup(layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log) -> None:
    """Measure the baseline in the session worktree; protect the measurement; write files."""
    goal = goal_of(values, layout.name)
    angles = angles_of(values, layout.name)
    worktree = layout.worktree()
    # The frozen spec is what the stages read, so the toolbox refuses edits to these paths
    # without any change to the engine; the frozen session.yaml shows them too.
    values["protected"] = protected_paths(goal, worktree, list(values.get("protected") or []))
    # Defaults filled in, so the frozen session.yaml shows exactly how the metric is read.
    values["goal"] = GOAL_DEFAULTS | {k: v for k, v in values["goal"].items() if v is not None}
    values["angles"] = [asdict(a) for a in angles]
    try:
        measured = goal.measure(worktree, values.get("secrets"))
    except metrics.MetricError as err:
        raise spec.SpecError(
            f"{_spec_file(layout.name)}: key 'goal.command': the baseline measurement "
            f"failed, so no cycle can start.\n{err}"
        ) from None
    if goal.target.met(measured.value):
        raise spec.SpecError(
            f"{_spec_file(layout.name)}: key 'goal.target': the baseline value "
            f"{measured.value:g} already meets the target {goal.target}; set a target "
            "that is not met yet"
        )
    baseline = {
        "metric": goal.metric,
        "command": goal.command,
        "format": goal.format,
        "key": goal.key,
        "repeats": goal.repeats,
        "target": str(goal.target),
        "value": measured.value,
        "samples": measured.samples,
        "raw": _short(measured.raw),
        "commit": record.base_commit,
        "measured_at": journal.now(),
        "protected": values["protected"],
    }
    _write_json(layout.root / BASELINE_FILE, baseline)
    log(f"baseline {goal.metric}: {measured.value:g} (samples {measured.samples})")
    write_progress(layout, values, [])
    journal.write_summary(layout, record, values, [], render_sections(layout, values, []))


def _short(raw: Any, limit: int = 2000) -> Any:
    text = raw if isinstance(raw, str) else json.dumps(raw)
    return raw if len(text) <= limit else text[:limit] + "..."


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def load_baseline(layout: SessionLayout) -> dict[str, Any]:
    return json.loads((layout.root / BASELINE_FILE).read_text())


# --- angle state (pure) --------------------------------------------------------------------


@dataclass
class AngleState:
    """Where the angles stand when a cycle starts."""

    angle: str | None  # the angle this cycle works on; None when every angle is exhausted
    regressions: int = 0  # consecutive regressions on `angle` so far
    idle: int = 0  # consecutive cycles in which Green kept nothing on `angle`
    exhausted: list[str] = field(default_factory=list)


def state_before(angles: list[Angle], prev: dict[str, Any] | None) -> AngleState:
    """The state entering a cycle, from the previous cycle's narrow record (None: cycle 1)."""
    if not prev:
        return AngleState(angles[0].name)
    nxt = prev.get("next_angle")
    same = nxt == prev.get("angle")
    return AngleState(
        angle=nxt,
        regressions=prev.get("regressions", 0) if same else 0,
        idle=prev.get("idle", 0) if same else 0,
        exhausted=list(prev.get("exhausted", [])),
    )


@dataclass
class Step:
    """What one cycle did to the angle state."""

    regressions: int
    idle: int
    exhausted_now: str | None  # why the angle is exhausted, if it is
    exhausted: list[str]
    next_angle: str | None


def step(angles: list[Angle], state: AngleState, regressed: bool, kept: int) -> Step:
    """Seed 000's angle rules: 3 consecutive regressions or 2 consecutive cycles in which Green
    keeps nothing exhaust the angle; the next angle by priority takes over."""
    regressions = state.regressions + 1 if regressed else 0
    idle = state.idle + 1 if kept == 0 else 0
    why = None
    if regressions >= MAX_REGRESSIONS:
        why = f"{regressions} consecutive regressions"
    elif idle >= MAX_IDLE:
        why = f"{idle} consecutive cycles in which Green kept nothing"
    exhausted = list(state.exhausted)
    nxt = state.angle
    if why and state.angle is not None:
        exhausted.append(state.angle)
        nxt = next((a.name for a in angles if a.name not in exhausted), None)
    return Step(regressions, idle, why, exhausted, nxt)


def angle_statuses(angles: list[Angle], last: dict[str, Any] | None) -> dict[str, str]:
    """not-started | in-progress | exhausted | goal-met, from the last cycle's record."""
    status = {a.name: "not-started" for a in angles}
    if not last:
        status[angles[0].name] = "in-progress"
        return status
    for name in last.get("exhausted", []):
        status[name] = "exhausted"
    if last.get("met"):
        status[last["angle"]] = "goal-met"
    elif last.get("next_angle"):
        status[last["next_angle"]] = "in-progress"
    return status


# --- per-cycle hooks -----------------------------------------------------------------------


def _records(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["narrow"] | {"cycle": d["cycle"]} for d in decisions if d.get("narrow")]


def red_scope(env: StageEnv) -> dict[str, Any]:
    """Seed 000's Red override: one angle, its hypothesis, the metric, current and target."""
    angles = angles_of(env.spec, env.layout.name)
    prev = env.previous_decision()
    state = state_before(angles, (prev or {}).get("narrow"))
    angle = next((a for a in angles if a.name == state.angle), angles[0])
    goal = goal_of(env.spec, env.layout.name)
    current = (prev or {}).get("narrow", {}).get("current")
    if current is None:
        current = load_baseline(env.layout)["value"]
    return {
        "angle": {
            "name": angle.name,
            "hypothesis": angle.hypothesis,
            "metric": goal.metric,
            "current": f"{current:g}",
            "target": str(goal.target),
        }
    }


# The decision apply_policy just made, for summary_sections (called next by evaluate, in the
# same process, before that decision is on disk).
_PENDING: dict[tuple[str, int], dict[str, Any]] = {}


def apply_policy(env: StageEnv, decision: dict[str, Any]) -> None:
    """Measure; revert a regression; count; decide whether the session goes on."""
    goal = goal_of(env.spec, env.layout.name)
    angles = angles_of(env.spec, env.layout.name)
    baseline = load_baseline(env.layout)["value"]
    prev = env.previous_decision()
    prev_record = (prev or {}).get("narrow")
    state = state_before(angles, prev_record)
    previous = prev_record["current"] if prev_record else baseline
    kept = len(decision["fixed"])
    secrets = env.spec.get("secrets")

    value, samples, error = _try_measure(goal, env.worktree, secrets)
    met = value is not None and goal.target.met(value)
    # Worse than the baseline: the baseline is strictly closer to the target (any comparator).
    regressed = not met and (value is None or metrics.is_closer(baseline, value, goal.target))
    reverted = False
    current = value
    if regressed:
        reverted = revert_cycle(env, decision, goal, value)
        if value is None:
            # The cycle broke the measurement; after the revert it must work again.
            retry, _, error_after = _try_measure(goal, env.worktree, secrets)
            current = retry
            error = error if retry is not None else error_after
        elif reverted:
            current = previous  # the tree is the cycle's start again
    moved = step(angles, state, regressed, kept)
    reason = None
    if decision.get("session_stop"):
        reason = decision["session_stop"]
    elif decision["broken"]:
        reason = "tests broke in this cycle and reverting did not bring them back"
    elif current is None:
        reason = f"the measurement command fails even after reverting the cycle: {error}"
    elif met:
        reason = f"goal met: {goal.metric} is {value:g} (target {goal.target})"
    elif moved.next_angle is None:
        reason = (
            f"all angles exhausted (angle {state.angle!r}: {moved.exhausted_now}); "
            f"{goal.metric} is {current:g}, target {goal.target}"
        )
    elif env.cycle >= stopping.cycle_cap(env.spec):
        cap = env.spec.get("max_cycles")
        reason = (
            f"max_cycles reached ({cap})"
            if cap
            else f"cap of {stopping.DEFAULT_CYCLE_CAP} cycles reached "
            "(set max_cycles to run longer)"
        )
    record = {
        "angle": state.angle,
        "value": value,
        "samples": samples,
        "error": error if value is None else None,
        "baseline": baseline,
        "previous": previous,
        "current": current,
        "delta_baseline": None if value is None else value - baseline,
        "delta_previous": None if value is None else value - previous,
        "met": met,
        "regressed": regressed,
        "reverted": reverted,
        "kept_fixes": kept,
        "regressions": moved.regressions,
        "idle": moved.idle,
        "exhausted_now": moved.exhausted_now,
        "exhausted": moved.exhausted,
        "next_angle": moved.next_angle,
    }
    decision["narrow"] = record
    decision["metric"] = metric_line(goal, record)
    decision["stop"] = reason is not None
    decision["reason"] = reason
    env.log(f"narrow: {decision['metric']}")

    decisions = [d for d in journal.load_decisions(env.layout) if d["cycle"] < env.cycle]
    _PENDING[(str(env.layout.root), env.cycle)] = decision
    write_progress(env.layout, env.spec, decisions + [decision], env.worktree)


def _try_measure(
    goal: Goal, cwd: Path, secrets: list[str] | None
) -> tuple[float | None, list[float], str | None]:
    try:
        m = goal.measure(cwd, secrets)
    except metrics.MetricError as err:
        return None, [], str(err)
    return m.value, m.samples, None


def revert_cycle(env: StageEnv, decision: dict[str, Any], goal: Goal, value: float | None) -> bool:
    """Undo what the cycle kept, in the seed's order (Refactor's commits newest first, then
    Green's, a hard reset to the cycle's start if a revert conflicts), and update the
    decision so it says what is on the branch now. True if anything was undone."""
    start = decision["start_commit"]
    worktree = env.worktree
    done = {r["commit"] for r in decision["reverted"]}
    refactor_path = env.cycle_dir / "refactor.json"
    refactor = (
        json.loads(refactor_path.read_text())
        if refactor_path.exists() and "refactor" in env.spec["teams"]
        else {}
    )
    shown = "unmeasurable" if value is None else f"{value:g}"
    why = f"{goal.metric} {shown} is worse than the baseline"
    order = [c["commit"] for c in reversed(refactor.get("commits", [])) if c["commit"] not in done]
    order += [f["commit"] for f in reversed(decision["fixed"])]
    if any(r["how"] == "reset" for r in decision["reverted"]):
        order = []  # evaluate already reset the worktree to the cycle's start
    undone: list[dict[str, str]] = []
    for sha in order:
        subject = git.subject(worktree, sha)
        if not git.revert(worktree, sha):
            env.log(f"narrow: reverting {sha[:10]} conflicts; hard reset to {start[:10]}")
            git.reset_to(worktree, start)
            undone.append({"commit": sha, "subject": subject, "how": "reset", "why": why})
            break
        undone.append({"commit": sha, "subject": subject, "how": "revert", "why": why})
    if git.changed_files(worktree, start, "HEAD"):
        # Whatever is left (a commit no record names) goes too: the cycle is undone whole.
        git.reset_to(worktree, start)
        undone.append(
            {"commit": start, "subject": "hard reset to cycle start", "how": "reset", "why": why}
        )
    if not undone:
        return False
    env.log(f"narrow: {why}; reverted {len(undone)} commit(s)")
    end = git.head(worktree)
    decision["reverted"] = decision["reverted"] + undone
    # The reverted fixes were tried: listing them as skipped keeps Red from reporting them
    # again (journal.tried_list) and the audit trail says why they are gone.
    decision["skipped"] = decision["skipped"] + [
        {"id": f["id"], "key": f["key"], "reason": f"reverted: {why}"} for f in decision["fixed"]
    ]
    decision["fixed"] = []
    decision["refactor_changes"] = 0
    decision["end_commit"] = end
    decision["files_changed"] = git.changed_files(worktree, start, end)
    decision["commits_total"] = len(git.commits_between(worktree, env.track_base(), end))
    # The tree is the cycle's start again, whose test result the previous cycle recorded.
    decision["tests_pass"] = env.cycle_start_tests_pass()
    decision["test_summary"] = "after reverts"
    return True


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+g}" if signed else f"{value:g}"


def metric_line(goal: Goal, r: dict[str, Any]) -> str:
    if r["value"] is None:
        head = f"{goal.metric}: not measurable ({(r.get('error') or '').splitlines()[0]})"
    else:
        head = (
            f"{goal.metric}: {r['value']:g} (baseline {r['baseline']:g}, "
            f"Δ baseline {_fmt(r['delta_baseline'], True)}, "
            f"Δ previous {_fmt(r['delta_previous'], True)}; target {goal.target}"
            f"{': met' if r['met'] else ''})"
        )
    notes = [f"angle {r['angle']}"]
    if r["reverted"]:
        notes.append(f"regression {r['regressions']} on this angle, cycle reverted")
    elif r["regressed"]:
        notes.append(f"regression {r['regressions']} on this angle")
    if r["exhausted_now"]:
        notes.append(f"angle exhausted: {r['exhausted_now']}")
    return f"{head}; {', '.join(notes)}"


# --- goal-progress.md ----------------------------------------------------------------------


def write_progress(
    layout: SessionLayout,
    values: dict[str, Any],
    decisions: list[dict[str, Any]],
    worktree: Path | None = None,
) -> None:
    """Rewritten whole from the per-cycle records, so a rerun never duplicates a row."""
    goal = goal_of(values, layout.name)
    base = load_baseline(layout)
    records = _records(decisions)
    current = records[-1]["current"] if records else base["value"]
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
    for r in records:
        lines.append(
            f"| {r['cycle']} | {_fmt(r['value'])} | {_fmt(r['delta_baseline'], True)} | "
            f"{_fmt(r['delta_previous'], True)} | {r['angle']} | {_samples(r['samples'])} | "
            f"{_outcome(r)} |"
        )
    last = decisions[-1] if decisions else None
    if last and last.get("stop"):
        lines += ["", "## Final", f"- Stopped: {last['reason']}", f"- Final value: {_fmt(current)}"]
        if worktree is not None:
            history = git.git(
                worktree, "log", "--oneline", "--no-decorate", f"{base['commit']}..HEAD"
            )
            lines += ["", "## Commit history", "```", history or "(no commits)", "```"]
    tmp = layout.root / (PROGRESS_FILE + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(layout.root / PROGRESS_FILE)


def _samples(samples: list[float]) -> str:
    return ", ".join(f"{s:g}" for s in samples) if samples else "-"


def _outcome(r: dict[str, Any]) -> str:
    if r["met"]:
        return "goal met"
    parts = []
    if r["value"] is None:
        parts.append("not measurable")
    if r["reverted"]:
        parts.append(f"regression {r['regressions']}, reverted")
    elif r["regressed"]:
        parts.append(f"regression {r['regressions']}")
    elif r["kept_fixes"]:
        parts.append(f"kept ({r['kept_fixes']} fixes)")
    else:
        parts.append(f"nothing kept (idle {r['idle']})")
    if r["exhausted_now"]:
        parts.append(f"angle exhausted ({r['exhausted_now']})")
    return "; ".join(parts)


# --- session.md and status -------------------------------------------------------------------


def render_sections(
    layout: SessionLayout, values: dict[str, Any], decisions: list[dict[str, Any]]
) -> str:
    goal = goal_of(values, layout.name)
    angles = angles_of(values, layout.name)
    base = load_baseline(layout)
    records = _records(decisions)
    last = records[-1] if records else None
    current = last["current"] if last else base["value"]
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
    return "\n".join(lines) + "\n"


def summary_sections(env: StageEnv) -> str:
    decisions = [d for d in journal.load_decisions(env.layout) if d["cycle"] < env.cycle]
    pending = _PENDING.get((str(env.layout.root), env.cycle))
    if pending is None and env.layout.decision(env.cycle).exists():
        pending = json.loads(env.layout.decision(env.cycle).read_text())
    return render_sections(env.layout, env.spec, decisions + ([pending] if pending else []))


def status_lines(layout: SessionLayout, values: dict[str, Any]) -> list[str]:
    """`autoresearch status` extras: baseline, current, target, delta, angle table."""
    if not (layout.root / BASELINE_FILE).exists():
        return ["Goal: baseline not measured yet"]
    goal = goal_of(values, layout.name)
    base = load_baseline(layout)
    records = _records(journal.load_decisions(layout))
    last = records[-1] if records else None
    current = last["current"] if last else base["value"]
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
    return lines


# --- goal-progress.png -----------------------------------------------------------------------


def plot_progress(layout: SessionLayout, values: dict[str, Any], out: Path) -> None:
    """Metric per cycle, baseline and target lines; reverted cycles marked."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a cluster node or in CI
    import matplotlib.pyplot as plt

    goal = goal_of(values, layout.name)
    base = load_baseline(layout)
    records = _records(journal.load_decisions(layout))
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    xs = [0] + [r["cycle"] for r in records]
    current = [base["value"]] + [r["current"] for r in records]
    ax.step(xs, current, where="post", color="tab:blue", label="value kept on the branch")
    kept = [
        (r["cycle"], r["value"]) for r in records if r["value"] is not None and not r["reverted"]
    ]
    if kept:
        ax.plot(*zip(*kept, strict=True), "o", color="tab:blue", label="measured, kept")
    gone = [(r["cycle"], r["value"]) for r in records if r["value"] is not None and r["reverted"]]
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
    plt.close(fig)

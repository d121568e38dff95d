"""`autoresearch plan`: from a goal in words to a session spec whose metric command was dry-run.

Candidates come from the person (`--metric-command`) or from the detected stack (test time,
coverage, lint count, bundle size, a benchmark script), those the goal's words name first. Each
is screened and run twice in a throwaway checkout of the target's HEAD before it can be written
(the rules are in checks/command_checks.py); the guard must pass there too; the spec is checked
the way a session start checks it. Nothing is written without `--yes` or a confirmation.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from autoresearch import modes
from autoresearch.checks import command_checks
from autoresearch.checks.command_checks import Run, Verdict
from autoresearch.errors import SpecError
from autoresearch.gate import diagnosis
from autoresearch.measure import measured
from autoresearch.modes.base import PlannedMetric
from autoresearch.safety import commands, git, worktree_files
from autoresearch.safety.command_files import measurement_scripts
from autoresearch.safety.words import a_or_an
from autoresearch.session import spec, stack

DRY_RUNS = 2
# A run is stopped a little after the point where it is refused as too slow, so the verdict
# can say "too slow" with the time it took.
DEFAULT_TIMEOUT_S = command_checks.SLOW_S * 1.5
MAX_TRIES = 5  # interactive: candidates tried before giving up
NO_GUARD = "none"
TEST_DIRS = {"tests", "test", "spec", "__tests__", "docs", "examples"}


@dataclass(frozen=True)
class Candidate:
    label: str  # a short name: "test time"
    command: str
    format: str = "last_line"
    key: str | None = None
    direction: str = "minimize"
    source: str = "given"  # where the suggestion came from
    words: tuple[str, ...] = ()  # goal words that put it first


# --- suggestions from the stack ------------------------------------------------------------


def timed(command: str) -> str:
    """A command printing how many seconds `command` took (it must succeed)."""
    code = (
        "import subprocess, sys, time; t = time.perf_counter(); "
        "r = subprocess.run(sys.argv[1], shell=True, capture_output=True); "
        # A failure shows what the command said: the diagnosis reads it.
        "r.returncode and sys.stderr.buffer.write(r.stdout + r.stderr); "
        "sys.exit(r.returncode) if r.returncode else print(round(time.perf_counter() - t, 3))"
    )
    return f"python -c {shlex.quote(code)} {shlex.quote(command)}"


PY_LINT = (
    "python -m ruff check --no-cache --no-fix --exit-zero --output-format json . "
    '| python -c "import json, sys; print(len(json.load(sys.stdin)))"'
)
PY_COVERAGE = (
    "python -m coverage run -m pytest -q >/dev/null 2>&1 "
    "&& python -m coverage report --format=total"
)
JS_LINT = (
    "npx --no-install eslint -f json . | node -e \"let s='';process.stdin.on('data',d=>s+=d)"
    ".on('end',()=>console.log(JSON.parse(s).reduce((n,f)=>n+f.errorCount+f.warningCount,0)))\""
)
SPEED = ("fast", "slow", "speed", "quick", "time", "duration")


def suggest(target: Path, goal: str = "") -> list[Candidate]:
    """Metric commands for the target's stack, the ones the goal's words name first."""
    found = stack.detect(target)
    out: list[Candidate] = []
    if found is not None:
        out.append(
            Candidate(
                "test time",
                timed(found.test_command),
                source=f"the {found.name} test command",
                words=("test", "suite", *SPEED),
            )
        )
    if found is not None and found.name == "Python":
        out.append(
            Candidate(
                "coverage",
                PY_COVERAGE,
                direction="maximize",
                source="coverage.py",
                words=("coverage", "covered", "untested"),
            )
        )
        out.append(
            Candidate(
                "lint warnings",
                PY_LINT,
                source="ruff",
                words=("lint", "warning", "warnings", "ruff", "style", "clean"),
            )
        )
    if found is not None and found.name == "Node/TS":
        out.append(
            Candidate(
                "lint warnings",
                JS_LINT,
                source="eslint",
                words=("lint", "warning", "warnings", "eslint", "style", "clean"),
            )
        )
        if _npm_script(target, "build"):
            out.append(
                Candidate(
                    "bundle size (KiB)",
                    "npm run build --silent >/dev/null 2>&1 && du -sk dist | cut -f1",
                    source="package.json's build script",
                    words=("bundle", "size", "smaller", "bytes", "weight"),
                )
            )
    for script in _bench_scripts(target):
        out.append(
            Candidate(
                f"benchmark {script}",
                f"python {shlex.quote(script)}",
                source=f"the benchmark script {script}",
                words=("bench", "benchmark", "latency", "throughput", "perf", *SPEED),
            )
        )
    return rank(out, goal)


def rank(candidates: list[Candidate], goal: str) -> list[Candidate]:
    """Stable order by how many of a candidate's words the goal uses."""
    said = {w.strip(".,;:!?'\"").lower() for w in goal.split()}

    def hits(c: Candidate) -> int:
        return sum(1 for w in said if any(w.startswith(k) for k in c.words))

    return sorted(candidates, key=lambda c: -hits(c))


def _npm_script(target: Path, name: str) -> bool:
    try:
        scripts = json.loads(worktree_files.read_text(target, "package.json")).get("scripts") or {}
    except (worktree_files.Refused, ValueError, AttributeError):
        return False
    return isinstance(scripts, dict) and name in scripts


def _bench_scripts(target: Path) -> list[str]:
    found = [*target.glob("bench*.py"), *target.glob("benchmark*/*.py"), *target.glob("bench/*.py")]
    return sorted({p.relative_to(target).as_posix() for p in found if p.is_file()})[:3]


def default_scope(target: Path) -> list[str]:
    """What the agent may change unless told: src/, else the top-level packages, else all."""
    if (target / "src").is_dir():
        return ["src"]
    packages = sorted(
        p.name
        for p in target.iterdir()
        if p.is_dir() and (p / "__init__.py").is_file() and p.name not in TEST_DIRS
    )
    return packages or ["*"]


# --- dry runs --------------------------------------------------------------------------------


@contextmanager
def scratch_checkout(target: Path) -> Iterator[Path]:
    """A detached checkout of the target's HEAD, removed afterwards: the dry runs may leave
    files behind, and the person's checkout must stay as it was."""
    with tempfile.TemporaryDirectory(prefix="autoresearch-plan-") as tmp:
        path = Path(tmp) / "checkout"
        # Made as a session's worktrees are: its checkout (a filter the repository's config
        # names) runs in the harness's git box.
        git.add_detached_worktree(target, path, "HEAD")
        try:
            yield path
        finally:
            git.git(target, "worktree", "remove", "--force", str(path), check=False)
            git.git(target, "worktree", "prune", check=False)


def run_once(
    command: str,
    cwd: Path,
    timeout_s: float,
    secrets: list[str] | None = None,
    trace_to: Path | None = None,
) -> tuple[Run, str]:
    """One run: stdout is what counts; stderr is kept apart for the diagnostic. With
    `trace_to`, the run is traced there (commands.run)."""
    with tempfile.TemporaryDirectory(prefix="autoresearch-plan-err-") as tmp:
        err = Path(tmp) / "stderr"
        # The newline ends a trailing `# comment` in the command (as in metrics.py).
        wrapped = f"(\n{command}\n) 2>{shlex.quote(str(err))}"
        result = commands.run(
            wrapped,
            cwd,
            timeout_s=timeout_s,
            extra_secrets=secrets,
            stdout_only=True,
            trace_to=trace_to,
        )
        stderr = err.read_text(errors="replace") if err.exists() else ""
    run = Run(result.exit_code, result.output, round(result.duration_s, 3), result.timed_out)
    return run, stderr


def dry_run(
    candidate: Candidate,
    cwd: Path,
    tolerance: float = command_checks.DEFAULT_TOLERANCE,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> tuple[Verdict, str]:
    """Screen the command, then run it twice (once if the first run already fails): the
    verdict, and the stderr of the last run."""

    def verdict(runs: list[Run]) -> Verdict:
        return command_checks.judge(
            candidate.command,
            runs,
            candidate.format,
            candidate.key,
            tolerance,
            cwd=cwd,
            target=cwd,
        )

    if command_checks.dangers(candidate.command, cwd):
        return verdict([]), ""  # refused without running
    runs: list[Run] = []
    stderr = ""
    for _ in range(DRY_RUNS):
        run, stderr = run_once(candidate.command, cwd, timeout_s)
        runs.append(run)
        if run.timed_out or run.exit_code != 0:
            break
    judged = verdict(runs)
    fix = _likely_fix(candidate.command, runs[-1], stderr, cwd, "--metric-command")
    if fix and not judged.ok and runs[-1].exit_code != 0:
        judged.hint = f"likely fix: {fix}"
    return judged, stderr


def _likely_fix(command: str, run: Run, stderr: str, cwd: Path, key: str) -> str | None:
    """The diagnosis setup gives a test command that did not run (diagnosis.py)."""
    if run.timed_out or run.exit_code == 0:
        return None
    return diagnosis.likely_fix(command, f"{run.stdout}\n{stderr}", run.exit_code, cwd, key=key)


def check_guard(
    command: str, cwd: Path, timeout_s: float, trace_to: Path | None = None
) -> tuple[str | None, str]:
    """(why the guard cannot be used or None, its diagnostic)."""
    refused = command_checks.dangers(command, cwd)
    if refused:
        return "refused: " + "; ".join(d.reason for d in refused), f"guard: {command}\n"
    run, stderr = run_once(command, cwd, timeout_s, trace_to=trace_to)
    tail = "\n".join((run.stdout + stderr).rstrip("\n").splitlines()[-command_checks.TAIL_LINES :])
    diagnostic = (
        f"guard:      {command}\nexit code:  {run.exit_code}\ntime (s):   {run.seconds:.2f}\n"
        f"last lines: {tail or '(none)'}\n"
    )
    problem = command_checks.guard_problem(run)
    fix = _likely_fix(command, run, stderr, cwd, "--guard")
    return (f"{problem}; likely fix: {fix}" if problem and fix else problem), diagnostic


# --- asking ----------------------------------------------------------------------------------


class Asker(Protocol):
    interactive: bool

    def ask(self, question: str, default: str) -> str: ...

    def confirm(self, question: str) -> bool: ...


class Terminal:
    """Questions one at a time on a terminal; an empty answer takes the default."""

    interactive = True

    def __init__(self, read: Callable[[str], str] = input) -> None:
        self.read = read

    def ask(self, question: str, default: str) -> str:
        answer = self.read(f"{question} [{default}]: ").strip()
        return answer or default

    def confirm(self, question: str) -> bool:
        return self.read(f"{question} [y/N]: ").strip().lower() in ("y", "yes")


class Flags:
    """No questions: every answer is the default; writing needs `--yes`."""

    interactive = False

    def __init__(self, yes: bool) -> None:
        self.yes = yes

    def ask(self, question: str, default: str) -> str:
        return default

    def confirm(self, question: str) -> bool:
        return self.yes


# --- the plan --------------------------------------------------------------------------------


@dataclass
class Request:
    """What the person asked for; None means ask (or take the default)."""

    name: str
    target: Path
    goal: str
    mode: str | None = None
    metric_command: str | None = None
    format: str = "last_line"
    key: str | None = None
    direction: str | None = None
    goal_target: str | None = None
    guard: str | None = None  # NO_GUARD for none; None: the detected test command
    scope: list[str] = field(default_factory=list)
    tolerance: float = command_checks.DEFAULT_TOLERANCE
    timeout_s: float = DEFAULT_TIMEOUT_S
    backend: str = "claude"
    max_iterations: int = 20


@dataclass
class Outcome:
    values: dict[str, Any]  # the spec
    text: str  # the spec as written
    approved: bool


def plan(
    req: Request, asker: Asker, out: Callable[[str], None] = print, root: Path | None = None
) -> Outcome:
    """Choose and dry-run the metric, check the guard, build and check the spec, confirm.
    Raises SpecError (one line naming the flag or key) when no usable spec can be made."""
    target = req.target
    mode_name = req.mode or asker.ask("Mode (experiment or narrow)", "experiment")
    try:
        mode = modes.get(mode_name)
    except ValueError as err:
        raise SpecError(f"--mode: {err}") from None
    if not mode.setup.plannable:
        planned = ", ".join(m for m in modes.MODES if modes.get(m).setup.plannable)
        raise SpecError(f"--mode: plan writes {planned} sessions, not {mode_name}")
    _check_backend(req.backend, mode)
    goal = req.goal.strip() or asker.ask("Goal, in one sentence", "improve the metric")
    with scratch_checkout(target) as checkout, tempfile.TemporaryDirectory() as traces:
        candidate, verdict = _choose_metric(req, goal, asker, checkout, out)
        direction = req.direction or asker.ask(
            "Direction (minimize or maximize)", candidate.direction
        )
        if direction not in ("minimize", "maximize"):
            raise SpecError(f"--direction: {direction!r}; expected minimize or maximize")
        guard = _choose_guard(req, asker, checkout, out, Path(traces))
        watch = _watch(candidate.command, guard, checkout, Path(traces), req.timeout_s)
    scope = req.scope or _split(
        asker.ask(
            "Files the agent may change (globs, comma-separated)", ",".join(default_scope(target))
        )
    )
    goal_target = req.goal_target or (
        asker.ask("Target value, e.g. '<= 90' (empty: 10% better than now)", "") or None
    )
    planned = PlannedMetric(
        goal=goal,
        label=candidate.label,
        command=candidate.command,
        format=candidate.format,
        key=candidate.key,
        direction=direction,
        value=float(verdict.value if verdict.value is not None else 0.0),
        seconds=max(r.seconds for r in verdict.runs),
        guard=guard,
        scope=scope,
        target=goal_target,
        max_iterations=req.max_iterations,
    )
    values: dict[str, Any] = {
        "mode": mode_name,
        "target": str(target),
        **mode.setup.plan_spec(planned),
        "agent": {"backend": req.backend},
    }
    check_values(req.name, values, mode, root)
    listing = measured.lines(watch.rescoped(measured.scope_rule(scope)).to_record([], {}))
    text = render_spec(req.name, values, planned, verdict, git.head(target), listing)
    out(text)
    where = f"config/sessions/{req.name}.yaml"
    return Outcome(values, text, asker.confirm(f"Write {where}?"))


def _check_backend(backend: str, mode: Any) -> None:
    """Refuse a backend that cannot play the mode's teams before any dry run: the spec it
    would write is one the workflow refuses."""
    from autoresearch.agents.backends import BACKEND_TEAMS

    missing = sorted(
        mode.setup.teams_needed({"mode": mode.name}) - BACKEND_TEAMS.get(backend, set())
    )
    if missing:
        raise SpecError(
            f"--backend: {backend!r} cannot play the {' and '.join(missing)} team "
            f"{a_or_an(mode.name)} session needs; pass --backend claude (with ANTHROPIC_API_KEY)"
        )


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _choose_metric(
    req: Request, goal: str, asker: Asker, checkout: Path, out: Callable[[str], None]
) -> tuple[Candidate, Verdict]:
    """The first candidate whose dry run passes (asking, on a terminal, which to try)."""
    if req.metric_command:
        queue = [Candidate("metric", req.metric_command, req.format, req.key, source="the flag")]
    else:
        queue = suggest(req.target, goal)
    if asker.interactive and not req.metric_command:
        return _ask_metric(req, queue, asker, checkout, out)
    if not queue:
        raise SpecError(
            f"--metric-command: no metric could be suggested for {req.target} (no known build "
            "file); give a command that prints the number"
        )
    for candidate in queue:
        out(f"dry run: {candidate.label} (from {candidate.source})")
        verdict, stderr = dry_run(candidate, checkout, req.tolerance, req.timeout_s)
        out(command_checks.render(verdict, stderr))
        if verdict.ok:
            return candidate, verdict
    flag = "--metric-command" if req.metric_command else "--metric-command (no suggestion passed)"
    raise SpecError(
        f"{flag}: rejected — {verdict.reason}" + (f"; {verdict.hint}" if verdict.hint else "")
    )


def _ask_metric(
    req: Request, queue: list[Candidate], asker: Asker, checkout: Path, out: Callable[[str], None]
) -> tuple[Candidate, Verdict]:
    for i, c in enumerate(queue, 1):
        out(f"  {i}. {c.label} ({c.direction}, from {c.source}): {c.command}")
    default = "1" if queue else ""
    for _ in range(MAX_TRIES):
        answer = asker.ask(
            "Metric: a number from the list, or a command that prints the number", default
        )
        if answer.isdigit() and 1 <= int(answer) <= len(queue):
            candidate = queue[int(answer) - 1]
            nxt = int(answer) + 1
        elif answer and not answer.isdigit():
            fmt = asker.ask(
                "Output format (last_line, json_stdout, metric, regex:<pattern>)", req.format
            )
            candidate = Candidate("metric", answer, fmt, req.key)
            nxt = None
        else:
            out(f"no candidate {answer!r}")
            continue
        verdict, stderr = dry_run(candidate, checkout, req.tolerance, req.timeout_s)
        out(command_checks.render(verdict, stderr))
        if verdict.ok:
            return candidate, verdict
        default = str(nxt) if nxt and nxt <= len(queue) else ""
    raise SpecError(f"no metric command passed its dry run in {MAX_TRIES} tries; nothing written")


def _watch(
    metric: str, guard: str | None, checkout: Path, traces: Path, timeout_s: float
) -> measured.Watch:
    """What the metric and the guard run (measured.py), as a session start will protect it:
    the metric in a traced run of its own (a traced run's timing is not the dry run's),
    the guard from its traced check. The scope is applied later (Watch.rescoped)."""
    head = git.git(checkout, "rev-parse", "HEAD")
    # The scratch checkout is not a session worktree: its files are read with plain git.
    files = git.git(checkout, "ls-tree", "-r", "-z", "--name-only", "--full-tree", head)
    watcher = measured.Watcher(
        checkout,
        head,
        lambda rel: True,
        measurement_scripts,
        tracked=set(files.split("\0")),
        ignored=lambda paths: set(),  # a preview: the session's setup asks git
    )
    # Last in the checkout: nothing runs there after it, so what it leaves does not matter.
    seen, note = measured.traced_run(metric, checkout, timeout_s=timeout_s)
    watcher.saw("metric command", metric, seen, note)
    if guard:
        watcher.saw("guard", guard, *measured.read_run(traces / "guard", checkout))
    return watcher.watch


def _choose_guard(
    req: Request,
    asker: Asker,
    checkout: Path,
    out: Callable[[str], None],
    traces: Path | None = None,
) -> str | None:
    detected = stack.resolve_commands(req.target, None, None)[1]
    default = req.guard or detected or NO_GUARD
    guard = asker.ask("Guard: must pass for a change to be kept ('none' for no guard)", default)
    if not guard or guard == NO_GUARD:
        return None
    problem, diagnostic = check_guard(
        guard, checkout, req.timeout_s, traces / "guard" if traces else None
    )
    out(diagnostic)
    if problem:
        raise SpecError(f"--guard: {problem}; make it pass first, or pass --guard none")
    return guard


def check_values(name: str, values: dict[str, Any], mode: Any, root: Path | None = None) -> None:
    """The spec as a session start would check it: schema, then the mode's own keys."""
    merged = spec.load(name, root or spec.workflow_root(), overrides=values)
    mode.setup.check_spec(merged.values, name)


def render_spec(
    name: str,
    values: dict[str, Any],
    planned: PlannedMetric,
    verdict: Verdict,
    commit: str,
    protected: list[str] | None = None,
) -> str:
    measured = ", ".join(f"{v:g}" for v in verdict.values)
    times = ", ".join(f"{r.seconds:.2f}" for r in verdict.runs)
    lines = [
        f"# Session spec for '{name}', written by `autoresearch plan`. Run it (or resume it) with:",
        f"#     snakemake --cores 1 sessions/{name}/done",
        f"# Goal: {planned.goal}",
        f"# Metric '{planned.label}' dry-run on {commit[:12]}: {measured} ({times} s per run)",
    ]
    lines += [f"# Warning: {w}" for w in verdict.warnings]
    if protected:
        # Found by tracing the dry run; the session's setup traces its own baseline again.
        lines += ["# When the session starts, the measurement's files are protected:"]
        lines += [f"#   {line.strip()}" for line in protected]
    body = yaml.safe_dump(values, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(lines) + "\n" + body


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()

"""Starting a session: preflight checks (no writes), then the setup job.

`preflight` runs while Snakemake builds the DAG, so bad input stops the run before
any job starts and nothing is written anywhere. `create` is the setup job itself.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch import __version__, modes
from autoresearch.agents.backends import api_key
from autoresearch.engine.loop import read_decision
from autoresearch.engine.stage import jail_for
from autoresearch.errors import SessionError
from autoresearch.gate import baseline
from autoresearch.gate.testrun import TestRun
from autoresearch.safety import git, worktree_files, worktrees
from autoresearch.safety.jail import Jail
from autoresearch.safety.words import a_or_an
from autoresearch.session import files, lintconfig, setup_undo, spec, stack
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.views import journal

CONTEXT_FILES = ("CLAUDE.md", "AGENTS.md", "README.md")
CONTEXT_CHARS = 6000
MODELS_CHECKED: set[str] = set()


@dataclass
class Preflight:
    spec: spec.Spec
    target: Path
    stack: str | None
    test_command: str
    linter_command: str | None


def preflight(
    name: str,
    root: Path,
    overrides: dict[str, Any] | None = None,
    origins: dict[str, str] | None = None,
) -> Preflight:
    """Everything that can be checked before touching anything; raises SpecError."""
    merged = spec.load(name, root, overrides, origins)
    values = merged.values
    where = merged.source_of("target")
    target = spec.resolve_target(str(values["target"]))
    if not target.exists():
        raise spec.SpecError(f"{where}: key 'target': {target} does not exist")
    if not git.is_repo(target):
        if git.git(target, "rev-parse", "--is-bare-repository", check=False) == "true":
            raise spec.SpecError(
                f"{where}: key 'target': {target} is a bare repository (no files to work on); "
                "point it at a clone with a working tree"
            )
        raise spec.SpecError(f"{where}: key 'target': {target} is not a git repository")
    target = git.toplevel(target)
    if git.git(target, "config", "--get", "extensions.refStorage", check=False) == "reftable":
        # The harness reads and checks its worktree's HEAD and branch as files (git.py), and
        # moves the branch outside the confined git: a reftable is one store it cannot check.
        raise spec.SpecError(
            f"{where}: key 'target': {target} keeps its refs in a reftable "
            "(extensions.refStorage), which autoresearch does not support yet; convert a "
            "clone with `git refs migrate --ref-format=files` and point the key at it"
        )
    if not git.git(target, "rev-parse", "--verify", "--quiet", "HEAD", check=False):
        raise spec.SpecError(
            f"{where}: key 'target': {target} has no commits yet; commit its files first "
            "(a session starts from a commit and never touches uncommitted work)"
        )
    if values["on_dirty"] == "abort" and git.is_dirty(target):
        raise spec.SpecError(
            f"{target} has uncommitted changes. Commit them, or set 'on_dirty: stash' in "
            f"config/sessions/{name}.yaml to record them in a stash entry and start from HEAD"
        )
    try:
        mode = modes.get(values["mode"])
    except ValueError as err:
        raise spec.SpecError(f"{merged.source_of('mode')}: key 'mode': {err}") from None
    mode.setup.check_spec(values, name)
    check_backend_plays(values, mode.setup.teams_needed(values), merged)
    check_agent(values, merged)
    found, test_command, linter_command = stack.resolve_commands(
        target, values.get("test_command"), values.get("linter_command")
    )
    if not test_command and not mode.setup.tests_optional:
        raise spec.SpecError(
            f"config/sessions/{name}.yaml: no test command could be detected for {target}; "
            "set key 'test_command'"
        )
    if test_command and not stack.command_exists(test_command, target):
        raise spec.SpecError(
            f"{merged.source_of('test_command')}: key 'test_command': {test_command!r} "
            "is not a command found on PATH or in the target"
        )
    stack_name = found.name if found else None
    return Preflight(merged, target, stack_name, test_command or "", linter_command)


def spec_file_of(merged: spec.Spec, key: str, name: str) -> str:
    """Where the user sets `key`: the file that set it, else their session spec."""
    where = merged.source_of(key)
    return f"config/sessions/{name}.yaml" if where == "config/config.yaml" else where


def check_backend_plays(values: dict[str, Any], needed: set[str], merged: spec.Spec) -> None:
    """Refuse a backend that cannot play a team the session needs: it would do nothing."""
    from autoresearch.agents.backends import BACKEND_TEAMS

    backend = values["agent"]["backend"]
    missing = sorted(needed - BACKEND_TEAMS.get(backend, frozenset()))
    if missing:
        raise spec.SpecError(
            f"{merged.source_of('agent.backend')}: key 'agent.backend': {backend!r} cannot play "
            f"the {' and '.join(missing)} team {a_or_an(values['mode'])} session needs; set "
            "agent.backend: claude (with ANTHROPIC_API_KEY)"
        )


def check_prices(values: dict[str, Any], merged: spec.Spec | None = None) -> None:
    """A budget needs a price for the model: an unpriced model costs $0 and never stops."""
    from autoresearch.agents.ledger import model_prices

    agent, budget = values["agent"], values.get("budget") or {}
    limits = [k for k in ("max_cost_usd", "max_cost_usd_per_stage") if budget.get(k) is not None]
    model = agent.get("model")
    priced = model_prices(model, values.get("prices") or {})
    if agent["backend"] != "claude" or not limits or priced:
        return
    origin = merged.source_of(f"budget.{limits[0]}") if merged else "session.yaml"
    raise spec.SpecError(
        f"{origin}: key 'budget.{limits[0]}' is set, but key 'prices' has no entry for model "
        f"{model!r}, so its cost would count as $0 and the budget would never stop the "
        f"session; add prices.{model}: {{input: USD, output: USD}} (per million tokens)"
    )


def check_output_limit(values: dict[str, Any], merged: spec.Spec | None = None) -> None:
    """An agent.max_tokens above the model's documented output limit is a 400 on every
    request: refused before the session starts, naming both keys."""
    from autoresearch.agents.ledger import model_prices

    agent = values["agent"]
    model, asked = agent.get("model"), agent.get("max_tokens")
    facts = model_prices(model, values.get("models") or {}) if model else None
    limit = (facts or {}).get("max_output_tokens")
    if agent["backend"] != "claude" or limit is None or asked is None or asked <= limit:
        return
    origin = merged.source_of("agent.max_tokens") if merged else "session.yaml"
    raise spec.SpecError(
        f"{origin}: key 'agent.max_tokens' is {asked}, above the output limit of {model} "
        f"({limit}, key 'models.{model}.max_output_tokens'); set it to at most {limit}"
    )


def check_model(values: dict[str, Any], merged: spec.Spec) -> None:
    """With a key, ask the Models API if it serves the model (once per model and process:
    Snakemake evaluates input functions more than once)."""
    model = values["agent"]["model"]
    if values["agent"]["backend"] != "claude" or not has_key() or model in MODELS_CHECKED:
        return
    from autoresearch.agents.backends.claude import unknown_model

    problem = unknown_model(model)
    MODELS_CHECKED.add(model)
    if problem:
        raise spec.SpecError(f"{merged.source_of('agent.model')}: key 'agent.model': {problem}")


def has_key() -> bool:
    return api_key.read().present


def check_agent(values: dict[str, Any], merged: spec.Spec | None = None) -> None:
    """What the agent backend needs before any stage runs: a key, prompt files."""
    agent = values["agent"]
    check_prices(values, merged)
    check_output_limit(values, merged)
    if agent["backend"] == "claude" and not has_key():
        origin = merged.source_of("agent.backend") if merged else "session.yaml"
        raise spec.SpecError(
            f"{origin}: key 'agent.backend' is 'claude' but ANTHROPIC_API_KEY is not set: "
            "export it (for a local server also set ANTHROPIC_BASE_URL), or use "
            "agent.backend: ruff"
        )
    for team, path in (agent.get("prompts") or {}).items():
        if not Path(path).expanduser().is_file():
            origin = merged.source_of(f"agent.prompts.{team}") if merged else "session.yaml"
            raise spec.SpecError(f"{origin}: key 'agent.prompts.{team}': no file {path}")
    if agent["backend"] == "script" and not Path(agent.get("script") or "").is_file():
        raise spec.SpecError("key 'agent.script': the script backend needs a YAML file to replay")


def read_conventions(worktree: Path, log=None) -> str:
    """The target's own agent notes, for every agent's brief. A file the worktree reader
    refuses (a link out of the worktree) is left out and said so in the log: it would
    otherwise land in every prompt sent to the model."""
    parts, refused = [], []
    for file_name in CONTEXT_FILES:
        text = worktree_files.read_if_any(worktree, file_name, refused)
        if text is not None:
            parts.append(f"--- {file_name} ---\n{text[:CONTEXT_CHARS].strip()}")
    for note in refused if log is not None else []:
        log(f"conventions: {note}")
    return "\n\n".join(parts)


def create(pre: Preflight, layout: SessionLayout, log) -> SetupRecord:
    """The setup job: worktree on the session branch, baseline, initial files, frozen spec."""
    values = pre.spec.values
    mode = modes.get(values["mode"])
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    for warning in pre.spec.warnings:
        log(f"warning: {warning}")
    setup_undo.note(layout, target=str(pre.target))
    stashed = None
    if git.is_dirty(pre.target):
        # on_dirty: stash. The changes are recorded as a stash entry without touching the
        # user's files or index; the session simply starts from HEAD. A failed setup drops
        # the entry again (the user's files never lost the changes).
        stashed = git.record_dirty_state(pre.target, f"autoresearch {layout.name}")
        if stashed:
            setup_undo.note(layout, stash=stashed)
            log(f"warning: uncommitted changes in {pre.target} saved as stash {stashed[:10]}")

    store = worktrees.store_for(layout, values.get("worktree_root"))
    base = git.head(pre.target)
    if mode.setup.has_worktree:
        real = worktrees.real_place(layout.worktree(), store, "worktree")
        # Noted before they exist, so that a setup killed half-way is undone by the next.
        wanted = mode.setup.branch_name(layout.name, values, pre.target)
        if not (real / ".git").exists():
            setup_undo.note(layout, worktree=str(real))
            setup_undo.note(layout, branch=git.free_branch_name(pre.target, wanted))
        try:
            branch = git.open_worktree(pre.target, real, wanted, base)
        except git.StaleWorktree:
            # An earlier session of this name on a repository since deleted (a checkout
            # cloned again at the same path): set aside, never deleted, and start anew.
            aside = worktrees.set_aside(real)
            log(f"{real} belonged to a repository that is gone; moved it to {aside}")
            setup_undo.note(layout, worktree=str(real))
            setup_undo.note(layout, branch=git.free_branch_name(pre.target, wanted))
            branch = git.open_worktree(pre.target, real, wanted, base)
        worktrees.link(layout.worktree(), real)
        left = git.head(real)
        if left != base:
            # Setup undoes what a killed or failed setup made, so a worktree that is still
            # here belonged to an earlier session of this name whose folder was deleted.
            # Starting on it would carry that session's commits into this one unseen.
            raise SessionError(
                f"sessions/{layout.name} is new, but the worktree of an earlier session of "
                f"that name is still at {real} on branch {branch} ({left[:12]}, not the "
                f"target's HEAD {base[:12]}); to start over, remove it: git -C {pre.target} "
                f"worktree remove --force {real} && git -C {pre.target} branch -D {branch} "
                "(or name the session differently)"
            )
        checkout = measured_in = real
    else:
        branch = mode.setup.branch_name(layout.name)
        measured_in = worktrees.real_place(layout.baseline_worktree, store, "baseline")
        setup_undo.note(layout, worktree=str(measured_in))
        git.add_detached_worktree(pre.target, measured_in, base)
        worktrees.link(layout.baseline_worktree, measured_in)
        checkout = pre.target
    box = jail_for(layout, str(store), values.get("commands"), measured_in)
    warnings = list(pre.spec.warnings)
    if box.note:
        log(f"warning: {box.note}")
        warnings.append(box.note)
    if not pre.test_command:  # a mode that may go on without tests (tests_optional)
        run = baseline.no_tests()
        log("warning: no test command could be detected for the target; going on without one")
    else:
        run = setup_tests(pre, layout, measured_in, box, log)

    config_file = pre.target / spec.TARGET_CONFIG
    record = SetupRecord(
        name=layout.name,
        mode=mode.name,
        version=__version__,
        target=str(pre.target),
        stack=pre.stack,
        test_command=pre.test_command,
        linter_command=pre.linter_command,
        branch=branch,
        base_commit=base,
        baseline=run.to_record(),
        date=dt.date.today().isoformat(),
        config_file=str(config_file) if config_file.is_file() else None,
        conventions=read_conventions(checkout, log),
        warnings=warnings,
        stashed=stashed,
        worktrees=str(store),
        sandbox=box.describe() | {"harness_git": git.confinement()},
        started=started,
        lint_config=lintconfig.read(checkout).describe(),
    )
    layout.cycles().mkdir(parents=True, exist_ok=True)
    journal.init_files(layout, record, spec.SessionSpec(values))
    mode.setup.on_setup(layout, record, values, log)
    record.save(layout)
    frozen = pre.spec
    frozen.values["test_command"] = pre.test_command
    frozen.values["linter_command"] = pre.linter_command
    spec.freeze(frozen, layout.spec)
    setup_undo.setup_succeeded(layout)
    return record


def setup_tests(
    pre: Preflight, layout: SessionLayout, measured_in: Path, box: Jail, log: Callable[[str], None]
) -> TestRun:
    """Setup's run of the test command where the session starts; SpecError when later runs
    could not be compared with it."""
    values = pre.spec.values
    run, error = baseline.measure_baseline(
        pre.test_command,
        measured_in,
        stack=pre.stack,
        timeout_s=values["test_timeout_s"],
        secrets=values.get("secrets"),
        allow_failing_baseline=bool(values.get("allow_failing_baseline")),
        # A key to set goes in the session's own spec, not in the workflow's defaults.
        origin=spec_file_of(pre.spec, "test_command", layout.name),
        jail=box,
        full_log=rel(setup_log(layout)),
    )
    if error:
        # The error shows the last lines; the log keeps all the run gave us.
        with setup_log(layout).open("a") as handle:
            handle.write(f"`{run.ran}` ({run.summary}), its output:\n{run.tail.rstrip()}\n")
        raise spec.SpecError(error)
    log(baseline.describe_baseline(run))
    return run


def setup_log(layout: SessionLayout) -> Path:
    """The setup job's log (rules/session.smk), where a failed baseline's output goes."""
    return layout.logs / "session.log"


def start(
    name: str,
    session_dir: Path,
    overrides: dict[str, Any],
    log_path: str,
    root: Path,
    origins: dict[str, str] | None = None,
) -> None:
    """The setup job: check everything again (the DAG-time check may have been skipped
    while an example repository was still being made), then set the session up."""

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)  # setup says what it found, once
        with open(log_path, "a") as handle:
            handle.write(line + "\n")

    pre = preflight(name, root, dict(overrides or {}), origins)
    layout = modes.get(pre.spec.values["mode"]).layout(session_dir)
    if setup_undo.ledger_path(layout).exists():
        # An earlier setup of this session was killed half-way: start fresh.
        setup_undo.undo(layout, pre.target, log)
    try:
        create(pre, layout, log)
    except BaseException:
        # A failed setup leaves nothing behind: no branch, no worktree, no session
        # files (the log keeps the reason), so a corrected rerun starts fresh.
        setup_undo.undo(layout, pre.target, log)
        setup_undo.leave_only(layout, Path(log_path))
        raise


# --- resuming ------------------------------------------------------------------------


def version_verdict(stamp: str, installed: str) -> str:
    """How a session stamped `stamp` may resume under `installed`: 'same', 'upgrade'
    (minor or patch), 'major' or 'older'."""

    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    old, new = parts(stamp), parts(installed)
    if new == old:
        return "same"
    if new < old:
        return "older"
    return "major" if new[0] != old[0] else "upgrade"


def check_resumable(
    layout: SessionLayout, overrides: dict[str, Any], frozen: spec.SessionSpec
) -> None:
    """Refuse to resume a session stamped by a newer autoresearch, or across a MAJOR
    version without `--config allow_major_upgrade=true` (no one is there to ask); and a
    resumed session (its frozen spec, parsed once by the caller) still needs what its
    backend needs (a key)."""
    if not layout.setup.exists():
        return
    check_version(layout, overrides)
    check_agent(frozen)
    check_checkouts(layout)


# This process's run, as a session's upgrades.log names it: its pid and a random part (a
# container's pid repeats from one run to the next).
RUN = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


def upgrades_log(layout: SessionLayout) -> Path:
    """The session's record of each run that resumed it under a newer autoresearch."""
    return layout.logs / "upgrades.log"


def check_version(layout: SessionLayout, overrides: dict[str, Any], installed: str = "") -> None:
    """The protocol's version rule on resume: a MINOR or PATCH upgrade goes on with one line
    saying so (once per run: Snakemake asks more than once), a MAJOR one only when
    allowed, a newer stamp never."""
    installed = installed or __version__
    name = layout.name
    stamp = json.loads(layout.setup.read_text())["version"]
    verdict = version_verdict(stamp, installed)
    if verdict == "older":
        raise SessionError(
            f"session {name!r} was made by autoresearch {stamp}, newer than the installed "
            f"{installed}; upgrade autoresearch before resuming it"
        )
    if verdict == "major" and not overrides.get("allow_major_upgrade"):
        raise SessionError(
            f"session {name!r} was made by autoresearch {stamp}; the installed {installed} "
            "is a new MAJOR version whose protocol may differ. Read its entry in CHANGELOG.md, "
            "then resume with --config allow_major_upgrade=true"
        )
    if verdict != "same":
        say_upgrade(layout, f"autoresearch upgraded {stamp} → {installed}")


def say_upgrade(layout: SessionLayout, line: str) -> None:
    """Print `line` once per run of this session. What was said is kept in the session's
    own log, by process: jobs are threads of one process, which may run other sessions
    too, so no memory of the process's is a session's."""
    run = f"run {RUN}"
    log = upgrades_log(layout)
    try:
        if any(e.endswith(f"\t{run}") for e in log.read_text().splitlines()):
            return
    except FileNotFoundError:
        pass
    try:
        files.append_line(log, f"{journal.now()}\t{line}\t{run}")
    except OSError:
        pass  # a session folder we cannot write to: the line is said again, never lost
    print(line, file=sys.stderr, flush=True)


# (target, branch) pairs check_checkouts found there in this process.
_HAS_BRANCH: set[tuple[Path, str]] = set()


def check_checkouts(layout: SessionLayout) -> None:
    """A session's branch and worktree (each broad track's) must still be there: a stage
    would crash on a missing one. Says how to recover instead."""
    if layout.done.exists():
        return  # nothing will run: the user may have cleaned up
    record = json.loads(layout.setup.read_text())
    mode = modes.get(record["mode"])
    layout = mode.layout(layout.root)  # the mode's loop folder, for the last decision
    target = Path(record["target"])
    loops = [("", record["branch"], record["base_commit"])] if mode.setup.has_worktree else []
    for hid in [t for t in mode.tracks(layout) if t]:
        if layout.track_meta(hid).exists():
            meta = json.loads(layout.track_meta(hid).read_text())
            loops.append((hid, meta["branch"], meta["base_commit"]))
    for track, branch, base in loops:
        done = layout.completed_cycles(track)
        last = read_decision(layout.decision(done[-1], track)).end_commit if done else base
        worktree = layout.worktree(track)
        # The session's link points into the worktree store: git must add it there.
        recreate = f"git -C {target} worktree add {worktree.resolve()} {branch}"
        if (target, branch) not in _HAS_BRANCH and not git.has_branch(target, branch):
            raise SessionError(
                f"session {layout.name!r}: branch {branch} is gone from {target}. Recreate it "
                f"from the last recorded commit (git -C {target} branch {branch} {last[:12]}; "
                f"then {recreate} if the worktree is gone too), or start a new session"
            )
        if not (worktree / ".git").exists():
            raise SessionError(
                f"session {layout.name!r}: its worktree {worktree} is gone. Recreate it with "
                f"`{recreate}`, or start a new session"
            )
        # Checked once per process: the workflow asks again at each re-evaluation, and a
        # branch deleted while this run goes on fails the next stage's git call anyway.
        _HAS_BRANCH.add((target, branch))

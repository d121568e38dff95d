"""The `autoresearch` command: new, plan, status, run, show, check, redo, finalize, verify,
version.
Running a session is Snakemake's job.

Every command works on a workflow folder: the checkout holding the Snakefile (where
`snakemake` runs and `sessions/` lives), found from the working directory upwards.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from autoresearch import __version__, modes
from autoresearch.errors import UserError
from autoresearch.safety import git
from autoresearch.safety.words import a_or_an
from autoresearch.session import spec
from autoresearch.views import status

EPILOG = """\
run a session (or resume it) with Snakemake, from the workflow folder:
  snakemake --cores 1 sessions/NAME/done      run or resume session NAME to its end
  snakemake -n sessions/NAME/done             dry run: what would run next
the spec of session NAME is config/sessions/NAME.yaml (`autoresearch new` writes one)"""

SPEC_TEMPLATE = """\
# Session spec for '{name}'. Run it (or resume it) with:
#     snakemake --cores 1 sessions/{name}/done
# Keys you leave out come from config/config.yaml; the target's .autoresearch.yml
# sits between the two. The spec is frozen into sessions/{name}/session.yaml when
# the session starts: edits after that do not change a running session.

mode: {mode}
target: {target}

# test_command: pytest -q      # default: detected from the target's build files
{loop_keys}# scope:
#   include: ["src/**"]
#   exclude: []
# on_dirty: abort              # or stash: record uncommitted changes in a stash entry

agent:
  # ruff: no model and no key (the demo uses it). To let Claude do the work, set
  # backend: claude and export ANTHROPIC_API_KEY before running snakemake.
  backend: {backend}
  # model: {model}
  # max_turns: 60

# budget:
#   max_cost_usd: 5.0
{mode_block}"""


class NoWorkflow(UserError):
    """The working directory is not inside a workflow folder."""


def find_root(start: Path) -> Path:
    """The nearest folder at or above `start` holding the Snakefile; refuses rather than
    quietly using the working directory."""
    for folder in (start, *start.parents):
        if (folder / "Snakefile").exists():
            return folder
    raise NoWorkflow(
        f"no Snakefile in {start} or above: run autoresearch inside the workflow checkout "
        "(the folder holding Snakefile, config/ and sessions/), or pass -C DIR"
    )


def sessions_root(start: Path) -> Path:
    """Where `sessions/` is: the workflow checkout, or a folder Snakemake ran in."""
    for folder in (start, *start.parents):
        if (folder / "Snakefile").exists() or (folder / "sessions").is_dir():
            return folder
    return find_root(start)  # raises, naming the Snakefile


def default_model() -> str:
    """The model config/config.yaml names, for the commented line of a new spec."""
    try:
        defaults = spec.read_yaml(spec.workflow_root() / "config/config.yaml", "the defaults")
        return str(defaults["agent"]["model"])
    except (OSError, KeyError, TypeError, UserError):
        return "(see config/config.yaml)"


def spec_path_for(root: Path, name: str, force: bool) -> Path:
    """config/sessions/NAME.yaml for a new spec: never a silent NAME-2, never a started one."""
    path = root / "config" / "sessions" / f"{name}.yaml"
    rel = path.relative_to(root)
    if path.exists() and not force:
        raise spec.SpecError(
            f"{rel} already exists: edit it, pick another name, or pass --force to replace it"
        )
    if (root / "sessions" / name).exists():
        raise spec.SpecError(
            f"session {name!r} has already started (sessions/{name}/ exists): its spec "
            "is frozen there; pick another name"
        )
    return path


def default_backend(mode: modes.Mode) -> str:
    """ruff when it can play the mode as `new` writes it (no key needed), else claude."""
    import yaml

    example = yaml.safe_load(mode.spec_example or "") or {}
    values = {"mode": mode.name, **(example if isinstance(example, dict) else {})}
    return "ruff" if mode.setup.plays_with_ruff(values) else "claude"


def target_repo(given: str) -> Path:
    """--target as an absolute path, refused unless it is a git repository."""
    target = Path(given).expanduser().resolve()
    if not target.exists():
        raise spec.SpecError(f"--target: {target} does not exist")
    if not git.is_repo(target):
        raise spec.SpecError(f"--target: {target} is not a git repository")
    return target


def cmd_new(args: argparse.Namespace) -> int:
    root = find_root(args.directory)
    spec.check_session_name(args.name)
    target = target_repo(args.target)
    path = spec_path_for(root, args.name, args.force)
    rel = path.relative_to(root)
    mode = modes.get(args.mode)
    backend = args.backend or default_backend(mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = SPEC_TEMPLATE.format(
        name=args.name,
        mode=args.mode,
        target=target,
        backend=backend,
        model=default_model(),
        loop_keys=mode.setup.spec_loop_keys,
        mode_block=mode.spec_example,
    )
    path.write_text(text)
    print(f"wrote {rel}")
    if backend == "claude" and not args.backend:
        print(
            f"{a_or_an(args.mode)} session needs a model: "
            "export ANTHROPIC_API_KEY before running it"
        )
    print(f"edit it, then run: snakemake --cores 1 sessions/{args.name}/done")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """From a goal to config/sessions/NAME.yaml; the metric command is dry-run first."""
    from autoresearch.session import plan

    root = find_root(args.directory)
    spec.check_session_name(args.name)
    target = git.toplevel(target_repo(args.target))
    path = spec_path_for(root, args.name, args.force)
    request = plan.Request(
        name=args.name,
        target=target,
        goal=args.goal,
        mode=args.mode,
        metric_command=args.metric_command,
        format=args.format,
        key=args.key,
        direction=args.direction,
        goal_target=args.goal_target,
        guard=args.guard,
        scope=[s for part in args.scope for s in part.split(",") if s.strip()],
        tolerance=args.tolerance,
        timeout_s=args.timeout,
        backend=args.backend,
        max_iterations=args.max_iterations,
    )
    interactive = plan.stdin_is_terminal() and not args.yes and not args.no_input
    asker = plan.Terminal() if interactive else plan.Flags(args.yes)
    outcome = plan.plan(request, asker)
    if not outcome.approved:
        print(f"nothing written; pass --yes (or answer y) to write {path.relative_to(root)}")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(outcome.text)
    print(f"wrote {path.relative_to(root)}")
    print(f"run: snakemake --cores 1 sessions/{args.name}/done")
    return 0


def add_plan_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="from a goal to config/sessions/NAME.yaml, its metric command dry-run first",
    )
    p.add_argument("name", help="the session's name: letters, digits, '.', '_', '-'")
    p.add_argument(
        "goal", nargs="?", default="", help='the goal in words: "make the test suite faster"'
    )
    p.add_argument("--target", required=True, help="path of the target git repository")
    p.add_argument("--mode", help="a mode plan can write (experiment, narrow); asked on a terminal")
    p.add_argument("--metric-command", help="the command that prints the number")
    p.add_argument("--format", default="last_line", help="how to read it (default last_line)")
    p.add_argument("--key", help="json_stdout / metric formats: which value")
    p.add_argument(
        "--direction", choices=["minimize", "maximize"], help="which way the number should go"
    )
    p.add_argument("--goal-target", help="the value to reach, e.g. '<= 90'")
    p.add_argument("--guard", help="must pass for a change to be kept; 'none' for no guard")
    p.add_argument("--scope", action="append", default=[], help="files the agent may change")
    p.add_argument("--tolerance", type=float, default=0.05, help="noise accepted between runs")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per dry run")
    p.add_argument("--max-iterations", type=int, default=20, help="the run's bound")
    p.add_argument(
        "--backend",
        default="claude",
        choices=["claude", "ruff"],
        help="who proposes the changes (default: claude, which needs ANTHROPIC_API_KEY)",
    )
    p.add_argument("--yes", action="store_true", help="write the spec without asking")
    p.add_argument("--no-input", action="store_true", help="never ask, even on a terminal")
    p.add_argument("--force", action="store_true", help="replace an existing spec of NAME")
    p.set_defaults(func=cmd_plan, words="goal")


def cmd_status(args: argparse.Namespace) -> int:
    sessions = sessions_root(args.directory) / "sessions"
    if args.name:
        root = (sessions / args.name).absolute()
        if not root.is_dir():
            raise UserError(f"no session {args.name!r} under {sessions}/")
        print(status.render_one(root))
        if args.log:
            spec.check_session_name(args.name)
            print("\n".join(run_log_tail(sessions.parent, args.name) or ["(no run log)"]))
    else:
        print(status.render_table(sessions))
    return 0


RUN_LOGS = "sessions/_runs"  # where `run` writes a session's console output
LOG_TAIL = 20


def cmd_run(args: argparse.Namespace) -> int:
    """Run (or resume) session NAME with Snakemake, its console output in
    sessions/_runs/NAME.log; `--dry-run` prints what would run instead. The command line is
    fixed here, so a caller allowed to run this may run a session and nothing else (the
    Claude Code plugin's `/autoresearch:run`)."""
    from autoresearch.session import redo

    root = find_root(args.directory)
    spec.check_session_name(args.name)
    if args.cores < 1:
        raise UserError(f"--cores: {args.cores}; give 1 or more")
    command = redo.snakemake_command(root, args.name, args.cores)
    if args.dry_run:
        return redo.run_snakemake(root, [command[0], "-n", *command[1:]])
    log = root / RUN_LOGS / f"{args.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"running: {' '.join(command)}; its output: {log.relative_to(root)}", flush=True)
    with open(log, "w") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        proc = subprocess.run(
            [sys.executable, "-m", *command],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    print(f"snakemake exited with {proc.returncode}; see {log.relative_to(root)}")
    return proc.returncode


def run_log_tail(root: Path, name: str) -> list[str]:
    """The last lines of the session's `run` log, headed by its path; none without one."""
    log = root / RUN_LOGS / f"{name}.log"
    if not log.is_file():
        return []
    lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
    return [f"Last lines of {RUN_LOGS}/{name}.log:", *(f"  {line}" for line in lines)]


def cmd_show(args: argparse.Namespace) -> int:
    """One cycle's findings, kept commits and diffs (sweep, narrow, broad), or one
    experiment's hypothesis, measurements, verdict and diff (experiment sessions)."""
    root = (sessions_root(args.directory) / "sessions" / args.name).absolute()
    if not (root / "setup.json").exists():
        print(f"no set-up session {args.name!r} under {root.parent}/", file=sys.stderr)
        return 1
    try:
        mode, layout = status.mode_of(root)
        frozen = spec.load_frozen(layout.spec)
        text = mode.views.show(
            layout, frozen, args.iteration, args.candidate, track=args.track or ""
        )
    except UserError as err:
        print(f"autoresearch: {err}", file=sys.stderr)
        return 1
    print(text, end="")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """A CI gate on a finished lens session: 0 PASSED, 1 FAILED, 2 nothing to judge yet."""
    from autoresearch.checks.finding_schema import gate_of

    done = sessions_root(args.directory) / "sessions" / args.name / "done"
    if not done.is_file():
        print(f"session {args.name!r} has not finished (no {done})", file=sys.stderr)
        return 2
    verdict = gate_of(done.read_text())
    if verdict is None:
        print(f"session {args.name!r} is not a lens session: it has no gate", file=sys.stderr)
        return 2
    print(f"{args.name}: {verdict}")
    return 1 if verdict == "FAILED" else 0


def cmd_redo(args: argparse.Namespace) -> int:
    from autoresearch.session import redo

    root = sessions_root(args.directory)
    plan = redo.plan(
        root / "sessions" / args.name, redo.Step(args.cycle, args.stage, args.track or "")
    )
    command = redo.snakemake_command(root, args.name, args.cores)
    if args.no_run:
        print("\n".join(redo.preview(plan, command)))
        return 0
    moved_to = redo.apply(plan)
    print(f"moved {len(plan.moves)} files of {plan.describe()} and after to {moved_to}")
    print(f"reset {plan.branch} to {plan.start_commit[:12]}")
    if args.move_only:
        print("run it with: " + " ".join(command))
        return 0
    print("running: " + " ".join(command), flush=True)
    return redo.run_snakemake(root, command)


def cmd_verify(args: argparse.Namespace) -> int:
    """Every claim of a session's files checked against git and its test runs (docs/verify.md)."""
    from autoresearch.session import verify

    found = verify.audit(sessions_root(args.directory) / "sessions" / args.name)
    if not found.ok:
        print(found.report())
        return 1
    print(found.summary())
    return 0


def cmd_finalize(args: argparse.Namespace) -> int:
    """A finished session's kept commits as tested review branches (docs/finalize.md)."""
    from autoresearch.session import finalize as review
    from autoresearch.session.record import load_record

    root = (sessions_root(args.directory) / "sessions" / args.name).absolute()
    if not (root / "setup.json").exists():
        raise UserError(f"no set-up session {args.name!r} under {root.parent}/")
    from autoresearch.session import verify

    found = verify.audit(root)
    if not found.ok:  # finalizing what verify rejects would publish claims that do not hold
        raise UserError(
            f"sessions/{args.name}: verify rejects it ({found.differences[0]}); nothing "
            f"finalized: run `autoresearch verify {args.name}`"
        )
    mode, layout = status.mode_of(root)
    session = review.Session(layout, load_record(layout), spec.load_frozen(layout.spec), mode)
    session.grouping = args.grouping
    sets = review.finalize(session, do_push=args.push, remote=args.remote)
    return 0 if all(s.ok for s in sets) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoresearch",
        description="Set up, inspect and redo autoresearch sessions. Running one is "
        "Snakemake's job (see below).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"autoresearch {__version__}")
    parser.add_argument(
        "-C",
        "--directory",
        type=Path,
        default=None,
        metavar="DIR",
        help="the workflow folder (default: found from the working directory upwards)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    new = sub.add_parser("new", help="write config/sessions/NAME.yaml to edit")
    new.add_argument("name", help="the session's name: letters, digits, '.', '_', '-'")
    new.add_argument("--target", required=True, help="path of the target git repository")
    new.add_argument(
        "--mode",
        default=modes.DEFAULT,
        choices=sorted(modes.MODES),
        help=f"what the session is for (default: {modes.DEFAULT}; see README.md, Modes)",
    )
    new.add_argument(
        "--backend",
        default=None,
        choices=["ruff", "claude", "script"],
        help="who does the work (default: ruff, which needs no key, where it can play the "
        "mode; else claude, which needs ANTHROPIC_API_KEY)",
    )
    new.add_argument("--force", action="store_true", help="replace an existing spec of NAME")
    new.set_defaults(func=cmd_new)
    add_plan_parser(sub)

    stat = sub.add_parser("status", help="progress of one session, or a table of all")
    stat.add_argument("name", nargs="?", help="a session's name (default: every session)")
    stat.add_argument(
        "--log", action="store_true", help=f"also the last lines of {RUN_LOGS}/NAME.log"
    )
    stat.set_defaults(func=cmd_status)

    run = sub.add_parser(
        "run",
        help=f"run or resume a session with snakemake, its output in {RUN_LOGS}/NAME.log",
    )
    run.add_argument("name", help="the session's name (its spec: config/sessions/NAME.yaml)")
    run.add_argument("--cores", type=int, default=1, metavar="N", help="passed to snakemake")
    run.add_argument(
        "-n", "--dry-run", action="store_true", help="print what would run; run nothing"
    )
    run.set_defaults(func=cmd_run)

    redo = sub.add_parser(
        "redo",
        help="redo one stage of a session and everything after it",
        description="Move the outputs of the stage and of everything after it into "
        "sessions/NAME/superseded/<UTC time>/ (nothing is deleted), reset the session "
        "branch to the commit the stage started from, then run the session on.",
    )
    redo.add_argument("name", help="the session's name")
    where = redo.add_mutually_exclusive_group(required=True)
    where.add_argument("--cycle", type=int, metavar="N", help="the cycle to redo from")
    where.add_argument(
        "--iteration", type=int, dest="cycle", metavar="N", help="experiment: the iteration"
    )
    redo.add_argument(
        "--stage",
        required=True,
        help="red, sanitize, green, refactor or evaluate (experiment: propose or decide)",
    )
    redo.add_argument("--track", metavar="hN", help="broad: the track (h1, h2, ...)")
    redo.add_argument(
        "--cores", type=int, default=1, metavar="N", help="passed to snakemake (default: 1)"
    )
    once = redo.add_mutually_exclusive_group()
    once.add_argument(
        "--no-run",
        "-n",
        "--dry-run",
        dest="no_run",
        action="store_true",
        help="change nothing: list the files that would move, the results rows set aside, "
        "the branch reset and the snakemake command",
    )
    once.add_argument(
        "--move-only",
        action="store_true",
        help="move and reset, but do not run the session on; print the snakemake command",
    )
    redo.set_defaults(func=cmd_redo)

    show = sub.add_parser(
        "show", help="what one cycle or experiment changed, and how it was judged"
    )
    show.add_argument("name", help="a sweep, narrow, broad or experiment session's name")
    show.add_argument("iteration", type=int, help="the cycle's or iteration's number (1, 2, ...)")
    show.add_argument("--candidate", help="experiment: cK, one candidate of a batch (default: all)")
    show.add_argument("--track", help="broad: the track whose cycle to show (h1, h2, ...)")
    show.set_defaults(func=cmd_show)
    final = sub.add_parser(
        "finalize",
        help="a finished session's kept changes as independent, tested review branches",
        description="Group the session's kept commits into independent change sets, replay "
        "each onto the session's base as autoresearch/NAME/review/<n>-<slug>, run the "
        "target's tests on each, and write sessions/NAME/review/<n>.md. Prints the push and "
        "pull-request commands; runs them only with --push. A rerun replaces the branches "
        "of its previous run, never others.",
    )
    final.add_argument("name", help="a finished session's name")
    final.add_argument("--push", action="store_true", help="run the printed push and gh commands")
    final.add_argument("--remote", default="origin", help="the remote to push to (default origin)")
    sizes = final.add_mutually_exclusive_group()
    sizes.add_argument(
        "--one-set",
        dest="grouping",
        action="store_const",
        const="one",
        default="kind",
        help="one review branch with every kept change (default: mechanical changes grouped "
        "by kind, each behaviour change its own set)",
    )
    sizes.add_argument(
        "--per-commit",
        dest="grouping",
        action="store_const",
        const="commit",
        help="a set per kept commit, joined only where one builds on another",
    )
    final.set_defaults(func=cmd_finalize)
    verify = sub.add_parser(
        "verify", help="check every claim of a session's files against git and its test runs"
    )
    verify.add_argument("name", help="a session's name")
    verify.set_defaults(func=cmd_verify)
    check = sub.add_parser("check", help="a lens session's gate: exit 1 when it FAILED")
    check.add_argument("name", help="a finished lens session's name")
    check.set_defaults(func=cmd_check)

    ver = sub.add_parser("version", help="print the installed version")
    ver.set_defaults(func=lambda _args: print(f"autoresearch {__version__}") or 0)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # argparse cannot take a positional after options (`plan NAME --target T "the goal"`):
    # a subcommand that names a `words` attribute collects the leftover words there.
    args, extra = parser.parse_known_args(argv)
    if extra:
        words = getattr(args, "words", None)
        if words is None or any(e.startswith("-") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        setattr(args, words, " ".join(filter(None, [getattr(args, words), *extra])))
    args.directory = (args.directory or Path.cwd()).absolute()
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe is met here, inside the try, not at exit
        return code
    except UserError as err:
        print(f"autoresearch: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`autoresearch status | head`): what is left unprinted is
        # not wanted. Python's own flush at exit would raise again; send it nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as the shell reports a writer killed by SIGPIPE


if __name__ == "__main__":
    sys.exit(main())

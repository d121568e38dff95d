"""The `autoresearch` command: new, plan, status, show, check, version. Running a
session is Snakemake's job."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__, git, modes, spec, status
from .errors import UserError

SPEC_TEMPLATE = """\
# Session spec for '{name}'. Run it (or resume it) with:
#     snakemake --cores 1 sessions/{name}/done
# Keys you leave out come from config/config.yaml; the target's .autoresearch.yml
# sits between the two. The spec is frozen into sessions/{name}/session.yaml when
# the session starts: edits after that do not change a running session.

mode: {mode}
target: {target}

# test_command: pytest -q      # default: detected from the target's build files
# max_cycles: 5                # default: stop after 10 cycles
# teams: [red, green, refactor]
# scope:
#   include: ["src/**"]
#   exclude: []
# on_dirty: abort              # or stash: record uncommitted changes in a stash entry

agent:
  backend: {backend}           # ruff needs no key; claude needs ANTHROPIC_API_KEY
  # model: claude-sonnet-4-6
  # max_turns: 60

# budget:
#   max_cost_usd: 5.0
{mode_block}"""


def free_name(name: str, root: Path) -> str:
    def taken(candidate: str) -> bool:
        return (root / "config" / "sessions" / f"{candidate}.yaml").exists() or (
            root / "sessions" / candidate
        ).exists()

    if not taken(name):
        return name
    n = 2
    while taken(f"{name}-{n}"):
        n += 1
    return f"{name}-{n}"


def cmd_new(args: argparse.Namespace) -> int:
    root = Path.cwd()
    spec.check_session_name(args.name)
    target = Path(args.target).expanduser().resolve()
    if not target.exists():
        raise spec.SpecError(f"--target: {target} does not exist")
    if not git.is_repo(target):
        raise spec.SpecError(f"--target: {target} is not a git repository")
    name = free_name(args.name, root)
    path = root / "config" / "sessions" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = SPEC_TEMPLATE.format(
        name=name,
        mode=args.mode,
        target=target,
        backend=args.backend,
        mode_block=modes.get(args.mode).spec_example,
    )
    with path.open("x") as handle:  # never overwrite
        handle.write(text)
    print(f"wrote {path.relative_to(root)}")
    print(f"edit it, then run: snakemake --cores 1 sessions/{name}/done")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """From a goal to config/sessions/NAME.yaml; the metric command is dry-run first."""
    from . import plan  # the dry runs' machinery is only needed here

    root = Path.cwd()
    spec.check_session_name(args.name)
    target = Path(args.target).expanduser().resolve()
    if not target.exists():
        raise spec.SpecError(f"--target: {target} does not exist")
    if not git.is_repo(target):
        raise spec.SpecError(f"--target: {target} is not a git repository")
    target = git.toplevel(target)
    name = free_name(args.name, root)
    request = plan.Request(
        name=name,
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
    path = root / "config" / "sessions" / f"{name}.yaml"
    if not outcome.approved:
        print(f"nothing written; pass --yes (or answer y) to write {path.relative_to(root)}")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x") as handle:  # never overwrite
        handle.write(outcome.text)
    print(f"wrote {path.relative_to(root)}")
    print(f"run: snakemake --cores 1 sessions/{name}/done")
    return 0


def add_plan_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="from a goal to config/sessions/NAME.yaml, its metric command dry-run first",
    )
    p.add_argument("name")
    p.add_argument(
        "goal", nargs="?", default="", help='the goal in words: "make the test suite faster"'
    )
    p.add_argument("--target", required=True, help="path of the target git repository")
    p.add_argument("--mode", help="a mode plan can write (experiment, narrow); asked on a terminal")
    p.add_argument("--metric-command", help="the command that prints the number")
    p.add_argument("--format", default="last_line", help="how to read it (default last_line)")
    p.add_argument("--key", help="json_stdout / metric formats: which value")
    p.add_argument("--direction", choices=["minimize", "maximize"])
    p.add_argument("--goal-target", help="the value to reach, e.g. '<= 90'")
    p.add_argument("--guard", help="must pass for a change to be kept; 'none' for no guard")
    p.add_argument("--scope", action="append", default=[], help="files the agent may change")
    p.add_argument("--tolerance", type=float, default=0.05, help="noise accepted between runs")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per dry run")
    p.add_argument("--max-iterations", type=int, default=20, help="the run's bound")
    p.add_argument("--backend", default="claude", choices=["claude", "ruff"])
    p.add_argument("--yes", action="store_true", help="write the spec without asking")
    p.add_argument("--no-input", action="store_true", help="never ask, even on a terminal")
    p.set_defaults(func=cmd_plan, words="goal")


def cmd_status(args: argparse.Namespace) -> int:
    sessions = Path.cwd() / "sessions"
    if args.name:
        root = (sessions / args.name).absolute()
        if not root.is_dir():
            print(f"no session {args.name!r} under {sessions}/", file=sys.stderr)
            return 1
        print(status.render_one(root))
    else:
        print(status.render_table(sessions))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """One experiment's hypothesis, measurements, verdict and diff (experiment sessions)."""
    root = (Path.cwd() / "sessions" / args.name).absolute()
    if not (root / "setup.json").exists():
        print(f"no set-up session {args.name!r} under {root.parent}/", file=sys.stderr)
        return 1
    mode, layout = status.mode_of(root)
    try:
        text = mode.show(layout, spec.load_frozen(layout.spec), args.iteration, args.candidate)
    except UserError as err:
        print(f"autoresearch: {err}", file=sys.stderr)
        return 1
    print(text, end="")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """A CI gate on a finished lens session: 0 PASSED, 1 FAILED, 2 nothing to judge yet."""
    from .modes.lens import gate_of

    done = Path.cwd() / "sessions" / args.name / "done"
    if not done.is_file():
        print(f"session {args.name!r} has not finished (no {done})", file=sys.stderr)
        return 2
    verdict = gate_of(done.read_text())
    if verdict is None:
        print(f"session {args.name!r} is not a lens session: it has no gate", file=sys.stderr)
        return 2
    print(f"{args.name}: {verdict}")
    return 1 if verdict == "FAILED" else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="autoresearch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    new = sub.add_parser("new", help="write config/sessions/NAME.yaml to edit")
    new.add_argument("name")
    new.add_argument("--target", required=True, help="path of the target git repository")
    new.add_argument("--mode", default=modes.DEFAULT, choices=sorted(modes.MODES))
    new.add_argument("--backend", default="claude", choices=["claude", "ruff"])
    new.set_defaults(func=cmd_new)
    add_plan_parser(sub)
    stat = sub.add_parser("status", help="progress of one session, or a table of all")
    stat.add_argument("name", nargs="?")
    stat.set_defaults(func=cmd_status)
    show = sub.add_parser("show", help="what one experiment changed, and how it was judged")
    show.add_argument("name")
    show.add_argument("iteration", type=int)
    show.add_argument("--candidate", help="cK: one candidate of a batch (default: all)")
    show.set_defaults(func=cmd_show)
    check = sub.add_parser("check", help="a lens session's gate: exit 1 when it FAILED")
    check.add_argument("name")
    check.set_defaults(func=cmd_check)
    ver = sub.add_parser("version", help="print the installed version")
    ver.set_defaults(func=lambda _args: print(f"autoresearch {__version__}") or 0)
    # argparse cannot take a positional after options (`plan NAME --target T "the goal"`):
    # a subcommand that names a `words` attribute collects the leftover words there.
    args, extra = parser.parse_known_args(argv)
    if extra:
        words = getattr(args, "words", None)
        if words is None or any(e.startswith("-") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        setattr(args, words, " ".join(filter(None, [getattr(args, words), *extra])))
    try:
        return args.func(args)
    except spec.SpecError as err:
        print(f"autoresearch: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

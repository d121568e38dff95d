"""The `autoresearch` command: new, status, redo, version. Running a session is Snakemake's job.

Every command works on a workflow folder: the checkout holding the Snakefile (where
`snakemake` runs and `sessions/` lives), found from the working directory upwards.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__, git, modes, spec, status
from .errors import UserError

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
# max_cycles: 5                # default: stop after 10 cycles
# teams: [red, green, refactor]
# scope:
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


def find_root(start: Path, marker: str = "Snakefile") -> Path:
    """The nearest folder at or above `start` holding `marker` (the Snakefile, or the
    `sessions/` a run made); refuses rather than quietly using the working directory."""
    for folder in (start, *start.parents):
        if (folder / marker).exists():
            return folder
    raise NoWorkflow(
        f"no {marker} in {start} or above: run autoresearch inside the workflow checkout "
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


def cmd_new(args: argparse.Namespace) -> int:
    root = find_root(args.directory)
    spec.check_session_name(args.name)
    target = Path(args.target).expanduser().resolve()
    if not target.exists():
        raise spec.SpecError(f"--target: {target} does not exist")
    if not git.is_repo(target):
        raise spec.SpecError(f"--target: {target} is not a git repository")
    path = root / "config" / "sessions" / f"{args.name}.yaml"
    rel = path.relative_to(root)
    if path.exists() and not args.force:
        raise spec.SpecError(
            f"{rel} already exists: edit it, pick another name, or pass --force to replace it"
        )
    if (root / "sessions" / args.name).exists():
        raise spec.SpecError(
            f"session {args.name!r} has already started (sessions/{args.name}/ exists): its spec "
            "is frozen there; pick another name"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    text = SPEC_TEMPLATE.format(
        name=args.name,
        mode=args.mode,
        target=target,
        backend=args.backend,
        model=default_model(),
        mode_block=modes.get(args.mode).spec_example,
    )
    path.write_text(text)
    print(f"wrote {rel}")
    print(f"edit it, then run: snakemake --cores 1 sessions/{args.name}/done")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    sessions = sessions_root(args.directory) / "sessions"
    if args.name:
        root = (sessions / args.name).absolute()
        if not root.is_dir():
            raise UserError(f"no session {args.name!r} under {sessions}/")
        print(status.render_one(root))
    else:
        print(status.render_table(sessions))
    return 0


def cmd_redo(args: argparse.Namespace) -> int:
    from . import redo

    root = sessions_root(args.directory)
    plan = redo.plan(
        root / "sessions" / args.name, redo.Step(args.cycle, args.stage, args.track or "")
    )
    moved_to = redo.apply(plan)
    print(f"moved {len(plan.moves)} files of {plan.describe()} and after to {moved_to}")
    print(f"reset {plan.branch} to {plan.start_commit[:12]}")
    command = redo.snakemake_command(root, args.name, args.cores)
    if args.no_run:
        print("run it with: " + " ".join(command))
        return 0
    print("running: " + " ".join(command), flush=True)
    return redo.run_snakemake(root, command)


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
        default="ruff",
        choices=["ruff", "claude", "script"],
        help="who does the work (default: ruff, which needs no key; claude needs "
        "ANTHROPIC_API_KEY)",
    )
    new.add_argument("--force", action="store_true", help="replace an existing spec of NAME")
    new.set_defaults(func=cmd_new)

    stat = sub.add_parser("status", help="progress of one session, or a table of all")
    stat.add_argument("name", nargs="?", help="a session's name (default: every session)")
    stat.set_defaults(func=cmd_status)

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
    redo.add_argument(
        "--no-run", action="store_true", help="move and reset only; print the snakemake command"
    )
    redo.set_defaults(func=cmd_redo)

    ver = sub.add_parser("version", help="print the installed version")
    ver.set_defaults(func=lambda _args: print(f"autoresearch {__version__}") or 0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.directory = (args.directory or Path.cwd()).absolute()
    try:
        return args.func(args)
    except UserError as err:
        print(f"autoresearch: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

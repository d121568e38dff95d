"""Redoing a stage: its outputs and everything after it move to `superseded/`, the branch
goes back to the commit the stage started from, and Snakemake runs the session on.

Nothing is deleted: the moved files keep their paths under
`sessions/<name>/superseded/<UTC time>/`, with `redo.json` saying what was redone and
where the branch was. Forcing one file with `snakemake -f` cannot do this: it rewrites
the branch under later cycles that still claim the old commits.
"""

from __future__ import annotations

import csv
import datetime as dt
import fcntl
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.errors import UserError
from autoresearch.modes.base import Mode
from autoresearch.safety import git
from autoresearch.safety.words import a_or_an
from autoresearch.session import spec
from autoresearch.session.files import locked, write_json, write_text
from autoresearch.session.layout import LOOP_DIR, SessionLayout, rel
from autoresearch.session.record import SetupRecord, load_record
from autoresearch.views import journal


class RedoError(UserError):
    """A redo that cannot be done as asked; nothing was moved."""


@dataclass(frozen=True)
class Step:
    """Where to redo from: a cycle (an experiment's iteration), a stage, a broad track."""

    cycle: int
    stage: str
    track: str = ""


@dataclass
class Plan:
    layout: SessionLayout
    mode: Mode
    step: Step
    record: SetupRecord
    moves: list[Path] = field(default_factory=list)  # in the order they are moved
    worktree: Path = Path()
    branch: str = ""
    start_commit: str = ""

    def describe(self) -> str:
        where = f"track {self.step.track} " if self.step.track else ""
        return f"{where}{self.mode.views.step_word} {self.step.cycle:03d} {self.step.stage}"


def plan(session_dir: Path, step: Step) -> Plan:
    """What a redo of `step` moves and where it resets the branch; raises RedoError
    (nothing touched) when the step does not exist or cannot be redone."""
    session_dir = Path(session_dir).absolute()
    if not (session_dir / "setup.json").exists():
        raise RedoError(f"no session {session_dir.name!r} under {session_dir.parent}/ to redo")
    record = load_record(SessionLayout(session_dir))
    mode = modes.get(record.mode)
    layout = mode.layout(session_dir)
    if not mode.setup.loop_stages:
        raise RedoError(
            f"{a_or_an(mode.name)} session cannot be redone stage by stage; start a new session "
            "with the same spec instead"
        )
    if step.stage not in mode.setup.loop_stages:
        raise RedoError(
            f"--stage {step.stage!r}: {a_or_an(mode.name)} session's stages are "
            + ", ".join(mode.setup.loop_stages)
        )
    tracks = mode.tracks(layout)
    if tracks != [""] and step.track not in tracks:
        raise RedoError(f"--track: session {layout.name!r} has tracks {', '.join(tracks)}")
    if tracks == [""] and step.track:
        raise RedoError(f"--track: {a_or_an(mode.name)} session has no tracks")
    folder = layout.cycle(step.cycle, step.track)
    if step.cycle < 1 or not folder.is_dir():
        raise RedoError(f"{_rel(folder, layout)} does not exist: that step has not run yet")

    result = Plan(layout, mode, step, record)
    result.moves = [p for p in _outputs_from(layout, mode, step) if p.exists()]
    result.start_commit = start_commit(layout, mode, step, record)
    result.worktree = layout.worktree(step.track)
    result.branch = _branch(layout, record, step.track)
    if not git.branch_exists(Path(record.target), result.branch):
        # Renamed or deleted by hand: a reset would move whatever the worktree is on now.
        raise RedoError(
            f"{_rel(layout.setup, layout)}: branch {result.branch} is not in {record.target} "
            "(renamed or deleted?); put it back and redo again"
        )
    if not (result.worktree / ".git").exists():
        raise RedoError(
            f"the worktree {result.worktree} of session {layout.name!r} is missing; recreate "
            f"it with `git -C {record.target} worktree add {result.worktree.resolve()} "
            f"{result.branch}` "
            "and redo again"
        )
    return result


def _rel(path: Path, layout: SessionLayout) -> str:
    return str(path.relative_to(layout.root.parent.parent))


def _branch(layout: SessionLayout, record: SetupRecord, track: str) -> str:
    if track:
        return json.loads(layout.track_meta(track).read_text())["branch"]
    return record.branch


def _stage_logs(
    layout: SessionLayout, mode: Mode, stage: str, track: str, cycle: int
) -> list[Path]:
    rule = mode.setup.stage_rules.get(stage, stage)
    name = Path(track) / f"{cycle:03d}" if track else Path(f"{cycle:03d}")
    return [
        layout.logs / rule / name.with_suffix(".log"),
        layout.root / "benchmarks" / rule / name.with_suffix(".tsv"),
    ]


def _outputs_from(layout: SessionLayout, mode: Mode, step: Step) -> list[Path]:
    """Every file made by `step` and after it, in a safe order to move: the end files
    (`done` first), later cycles from the last, then this cycle's stages from the last
    (its decision before anything else), so a crash midway leaves a session that is
    simply not finished."""
    paths = list(mode.views.end_files(layout, step.track))
    later = sorted(
        (int(p.name) for p in layout.cycles(step.track).iterdir() if LOOP_DIR.match(p.name)),
        reverse=True,
    )
    for number in (n for n in later if n > step.cycle):
        paths.append(layout.cycle(number, step.track))
        for stage in mode.setup.loop_stages:
            paths += _stage_logs(layout, mode, stage, step.track, number)
    index = mode.setup.loop_stages.index(step.stage)
    folder = layout.cycle(step.cycle, step.track)
    for stage in reversed(mode.setup.loop_stages[index:]):
        paths += [folder / name for name in reversed(mode.setup.stage_files[stage])]
        paths += _stage_logs(layout, mode, stage, step.track, step.cycle)
    return paths


def start_commit(layout: SessionLayout, mode: Mode, step: Step, record: SetupRecord) -> str:
    """Where the stage started: the nearest earlier stage's record in the cycle (its end,
    or its start when it makes no commits), else where the cycle started."""
    folder = layout.cycle(step.cycle, step.track)
    index = mode.setup.loop_stages.index(step.stage)
    for stage in reversed(mode.setup.loop_stages[:index]):
        name = next((f for f in mode.setup.stage_files[stage] if f.endswith(".json")), None)
        data = json.loads((folder / name).read_text()) if name and (folder / name).exists() else {}
        commit = data.get("end_commit") or data.get("start_commit")
        if commit:
            return commit
    previous = layout.decision(step.cycle - 1, step.track)
    if step.cycle > 1 and previous.exists():
        return json.loads(previous.read_text())["end_commit"]
    if step.track:
        return json.loads(layout.track_meta(step.track).read_text())["base_commit"]
    return record.base_commit


def superseded_dir(layout: SessionLayout) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    base = layout.root / "superseded" / stamp
    path, n = base, 2
    while path.exists():
        path = base.with_name(f"{stamp}-{n}")
        n += 1
    return path


def apply(p: Plan) -> Path:
    """Move the files, set the results rows aside, reset the branch; returns the folder
    the files went to. Refuses while a run holds the session."""
    layout = p.layout
    with open(layout.run_lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RedoError(
                f"session {layout.name!r} is being run right now; stop that run first"
            ) from None
        dest = superseded_dir(layout)
        dest.mkdir(parents=True)
        head = git.head(p.worktree)
        write_json(
            dest / "redo.json",
            {
                "redone": p.describe(),
                "cycle": p.step.cycle,
                "stage": p.step.stage,
                "track": p.step.track,
                "branch": p.branch,
                "branch_head_before": head,
                "reset_to": p.start_commit,
                "time": journal.now(),
            },
        )
        for path in p.moves:
            moved = dest / path.relative_to(layout.root)
            moved.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, moved)
        _set_results_aside(layout, p.step, dest)
        p.mode.setup.set_aside(layout, p.step.cycle, p.step.track, dest)
        git.reset_to(p.worktree, p.start_commit)
    return dest


def preview(p: Plan, command: list[str]) -> list[str]:
    """What `apply` would do, then `command`, as lines for the console; changes nothing."""
    layout = p.layout
    where = layout.root.parent.parent
    rows = sum(_superseded(row, p.step) for row in journal.read_results(layout))
    head = git.head(p.worktree)
    lines = [f"a redo of {p.describe()} would:"]
    lines.append(
        f"  move {len(p.moves)} files and folders to {_rel(layout.root, layout)}/superseded/:"
    )
    lines += [f"    {path.relative_to(where)}" for path in p.moves]
    lines.append(f"  set aside {rows} results.tsv row(s) of that cycle and later ones")
    lines.append(f"  reset {p.branch} from {head[:12]} to {p.start_commit[:12]}")
    lines.append("  then run: " + " ".join(command))
    lines.append("nothing was changed; run the same command without --no-run to do it")
    return lines


def _superseded(row: dict[str, Any], step: Step) -> bool:
    """A results.tsv row of the redone cycle or a later one (of the redone track)."""
    cycle = row["cycle"]
    return row["track"] == step.track and cycle.isdigit() and int(cycle) >= step.cycle


def _set_results_aside(layout: SessionLayout, step: Step, dest: Path) -> None:
    """results.tsv rows of the redone cycle and later ones (of this track) go with the
    superseded files: they no longer describe the branch."""
    with locked(layout.journal_lock):
        rows = journal.read_results(layout)
        if not any(_superseded(r, step) for r in rows):
            return
        for path, keep in ((dest / "results.tsv", True), (layout.results, False)):
            out = io.StringIO()
            writer = csv.DictWriter(
                out, journal.RESULTS_COLUMNS, delimiter="\t", lineterminator="\n"
            )
            writer.writeheader()
            writer.writerows(r for r in rows if _superseded(r, step) == keep)
            write_text(path, out.getvalue())


# --- running the session on ----------------------------------------------------------


def snakemake_command(root: Path, name: str, cores: int) -> list[str]:
    """The command that runs the session on, as a person would type it in `root`."""
    command = ["snakemake", "--cores", str(cores)]
    if not (root / "Snakefile").exists():
        command += ["--snakefile", str(spec.workflow_root() / "Snakefile")]
    return [*command, f"sessions/{name}/done"]


def run_snakemake(root: Path, command: list[str]) -> int:
    """Run it with this Python's Snakemake (the one installed with autoresearch)."""
    return subprocess.run([sys.executable, "-m", *command], cwd=root).returncode


# --- status: does the branch still match the records? --------------------------------


def branch_drift(layout: SessionLayout, record: SetupRecord, track: str = "") -> str | None:
    """A line saying the session branch no longer matches its recorded cycles, or None.

    The last recorded cycle's end must be in the branch's history (a running cycle adds
    commits after it); a finished session's branch must end exactly there.
    """
    done = layout.completed_cycles(track)
    if not done:
        return None
    path = layout.decision(done[-1], track)
    try:
        end = json.loads(path.read_text())["end_commit"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{rel(path)} cannot be read as a decision (run `autoresearch verify {layout.name}`)"
    # A recorded value reaches git only as a commit id: one like `--output=f` is an option.
    if not isinstance(end, str) or not re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", end):
        return f"{rel(path)}: its end_commit is not a commit id"
    target = Path(record.target)
    try:
        branch = _branch(layout, record, track)
        tip = git.git(target, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except (git.GitError, OSError, KeyError):
        return f"branch of {track or layout.name} cannot be read in {target}"
    if not tip:
        return f"branch {branch} is gone from {target} (last recorded commit {end[:12]})"
    ancestor = git.raw(target, "merge-base", "--is-ancestor", end, tip)
    finished = layout.done.exists()
    if ancestor.returncode != 0 or (finished and tip != end):
        return (
            f"branch {branch} is at {tip[:12]}, but the recorded cycles end at {end[:12]}: "
            f"its history was changed outside autoresearch (redo with `autoresearch redo "
            f"{layout.name} --cycle N --stage S`)"
        )
    return None

"""A run written into `<output>/runs/<run-id>/` (the mission folder's layout) as it goes:
evaluations/iteration-NNNN.json, decision-log.md, summary.md, config.json and run.json
after every decided iteration, report.md at the end, and with preserve_on_fail a
`preserved/iteration-NNNN.patch` of each change that was not kept.

A session is one run: its run id is the session's name and start time, and its folder is
chosen once, at setup (`claim`). A later run never writes into an earlier one's folder.
Every write names its file by iteration and replaces it whole (`sync`), so a job killed
half-way and run again completes the folder and never duplicates an entry.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from autoresearch.safety import git
from autoresearch.session.files import read_json, write_json, write_text
from autoresearch.session.layout import SessionLayout

RUN_RECORD = "run.json"
SUMMARY = "summary.md"
PRESERVED = "preserved"


def unignored_in_checkout(folder: Path, target: Path) -> bool:
    """True when `folder` is inside the target's checkout and git does not ignore its
    runs/: the mirrored runs would then show up there as untracked files."""
    try:
        inside = folder.resolve().relative_to(target.resolve())
    except ValueError:
        return False
    probe = str(inside / "runs" / "run")
    proc = git.raw(target, "check-ignore", "-q", probe)
    return proc.returncode != 0


def claim(runs: Path, run_id: str, session: str) -> Path:
    """The folder of this run: `runs/<run-id>/`, or `<run-id>-2`, ... when another run
    holds that name. Made now, holding only run.json, so the next run sees it taken."""
    runs.mkdir(parents=True, exist_ok=True)
    folder = runs / run_id
    n = 2
    while folder.exists():
        mine = read_json(folder / RUN_RECORD) or {}
        if mine.get("run_id") == run_id and mine.get("session") == session:
            break  # this run's own folder (a rerun of setup)
        folder = runs / f"{run_id}-{n}"
        n += 1
    folder.mkdir(exist_ok=True)
    write_json(
        folder / RUN_RECORD,
        {"run_id": run_id, "session": session, "status": "running", "folder": str(folder)},
    )
    return folder


def sync(
    layout: SessionLayout,
    folder: Path,
    run: dict[str, Any],
    summary: str,
    preserved: dict[str, Path],
) -> None:
    """Bring the run folder up to the session: every decided iteration's evaluation, the
    decision log, the summary, run.json, the `preserved` patches (name -> the session's
    proposal.patch); an iteration the session no longer holds (a redo set it aside) leaves
    the folder too."""
    mine = read_json(folder / RUN_RECORD) or {}
    if mine.get("session") != run["session"]:
        raise RuntimeError(f"{folder} is not the folder of session {run['session']}")
    source = layout.evaluations()
    names = sorted(p.name for p in source.glob("iteration-*.json")) if source.is_dir() else []
    _mirror({name: source / name for name in names}, folder / "evaluations", "iteration-*.json")
    for path in (layout.decision_log, layout.baseline.with_name("config.json"), layout.report):
        if path.exists():
            _copy(path, folder / path.name)
    patches = {f"{name}.patch": patch for name, patch in preserved.items()}
    _mirror(patches, folder / PRESERVED, "*.patch")
    write_text(folder / SUMMARY, summary)
    write_json(folder / RUN_RECORD, mine | run | {"folder": str(folder)})


def _mirror(files: dict[str, Path], dest: Path, pattern: str) -> None:
    """`dest`'s files matching `pattern` made exactly `files` (name -> source; a source
    that does not exist is neither copied nor removed)."""
    for name, source in files.items():
        if source.exists():
            _copy(source, dest / name)
    for stale in dest.glob(pattern) if dest.is_dir() else []:
        if stale.name not in files:
            stale.unlink()


def _copy(source: Path, dest: Path) -> None:
    """Copy whole or not at all: a reader of the folder never sees half a file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.copy2(source, tmp)
    tmp.replace(dest)

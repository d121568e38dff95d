"""A finished run mirrored into `<output>/runs/<run-id>/` (the mission folder's layout):
evaluations/iteration-NNNN.json, decision-log.md, report.md and run.json.

A session is one run: its run id is the session's name and start time. A later run never
overwrites an earlier one; only the same run, mirrored again (a rerun of `done`), replaces
its own folder.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from ... import git
from ...files import read_json, write_json
from ...layout import SessionLayout

RUN_RECORD = "run.json"


def output_dir(output: str, target: Path) -> Path:
    """The spec's output folder: absolute, or relative to the target's checkout."""
    path = Path(output).expanduser()
    return path if path.is_absolute() else target / path


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


def mirror(layout: SessionLayout, runs: Path, run: dict[str, Any]) -> Path:
    """Copy this run's files into `runs/<run-id>/` (or `<run-id>-2`, ... when another run
    holds that name); the folder it went to."""
    runs.mkdir(parents=True, exist_ok=True)
    run_id = run["run_id"]
    folder = runs / run_id
    n = 2
    while folder.exists():
        mine = read_json(folder / RUN_RECORD) or {}
        if mine.get("run_id") == run_id and mine.get("session") == run["session"]:
            break  # this run's own earlier mirror
        folder = runs / f"{run_id}-{n}"
        n += 1
    # Built aside and moved into place, so a reader never sees half a run.
    staging = Path(tempfile.mkdtemp(dir=runs, prefix=f".{folder.name}."))
    try:
        if layout.evaluations().is_dir():
            shutil.copytree(layout.evaluations(), staging / "evaluations")
        for path in (layout.decision_log, layout.report):
            if path.exists():
                shutil.copy2(path, staging / path.name)
        write_json(staging / RUN_RECORD, run | {"mirrored_to": str(folder)})
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder

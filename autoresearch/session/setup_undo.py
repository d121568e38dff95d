"""What a session's setup has created so far, so a failed setup can take it all back.

Setup notes each thing in `sessions/<name>/.setup-created.json` *before* creating it (a
branch, a worktree, a stash entry), so even a `kill -9` in the middle leaves a list to
undo: the next setup of that session undoes it first and starts fresh. The list goes
once the session's spec is frozen (setup succeeded).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch.safety import git
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout

LEDGER = ".setup-created.json"
# Kept when a failed setup is undone: the logs explain the failure; the run lock is held
# by the running Snakemake.
KEPT = {"logs", "benchmarks", ".run.lock", ".journal.lock"}


def ledger_path(layout: SessionLayout) -> Path:
    return layout.root / LEDGER


def _load(layout: SessionLayout) -> dict[str, Any]:
    path = ledger_path(layout)
    return json.loads(path.read_text()) if path.exists() else {}


def note(layout: SessionLayout, **created: Any) -> None:
    """Add to the list before the thing is created (creating it may be interrupted)."""
    data = _load(layout)
    for key, value in created.items():
        if isinstance(data.get(key), list):
            data[key] = [*data[key], value]
        else:
            data[key] = [value]
    write_json(ledger_path(layout), data)


def setup_succeeded(layout: SessionLayout) -> None:
    ledger_path(layout).unlink(missing_ok=True)


def undo(layout: SessionLayout, target: Path | None, log: Callable[[str], None]) -> None:
    """Remove what the list names and every session file setup wrote. Idempotent: each
    step checks first, so an undo interrupted by a kill is simply run again."""
    data = _load(layout)
    repo = Path(data["target"][0]) if data.get("target") else target
    if repo is not None and git.is_repo(repo):
        with git.repo_lock(repo):
            for path in data.get("worktree", []):
                if Path(path).exists():
                    git.git(repo, "worktree", "remove", "--force", path, check=False)
                shutil.rmtree(path, ignore_errors=True)
                git.record_of(Path(path)).unlink(missing_ok=True)
                _remove_if_empty(Path(path).parent)  # the session's folder in the store
            git.git(repo, "worktree", "prune", check=False)
            for branch in data.get("branch", []):
                if git.branch_exists(repo, branch):
                    git.git(repo, "branch", "-D", branch, check=False)
            for commit in data.get("stash", []):
                _drop_stash(repo, commit)
    for child in list(layout.root.iterdir()) if layout.root.is_dir() else []:
        if child.name in KEPT or child.name == LEDGER:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    ledger_path(layout).unlink(missing_ok=True)
    log(f"setup undone: removed what it had created for session {layout.name!r}")


def leave_only(layout: SessionLayout, log_file: Path) -> None:
    """After a failed setup (once undone): the session folder keeps only `log_file`, the
    log the error points to. The run lock goes too: the run is ending, and a rerun makes
    a new one. (Not after a killed setup is undone: the setup that follows holds it.)"""
    keep = Path(log_file).absolute()
    if not layout.root.is_dir():
        return
    # Bottom up, never into a link (os.walk does not follow them).
    for folder, dirs, names in os.walk(layout.root.absolute(), topdown=False):
        for name in names + [d for d in dirs if (Path(folder) / d).is_symlink()]:
            if Path(folder) / name != keep:
                (Path(folder) / name).unlink(missing_ok=True)
        if Path(folder) != layout.root.absolute() and Path(folder) not in keep.parents:
            _remove_if_empty(Path(folder))


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty, or already gone
        pass


def _drop_stash(repo: Path, commit: str) -> None:
    """Drop the stash entry setup stored (the user's files never lost those changes)."""
    entries = git.git(repo, "stash", "list", "--format=%gd %H", check=False).splitlines()
    for entry in entries:
        ref, _, sha = entry.partition(" ")
        if sha == commit:
            git.git(repo, "stash", "drop", ref, check=False)
            return

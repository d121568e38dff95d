"""Where session worktrees live: outside `sessions/`, in a per-user data folder.

Under `sessions/` (inside this workflow's checkout) the target's tools found *our*
pyproject.toml above the worktree: its pytest options, its rootdir, its ruff rules. Out
here nothing of ours lies above it. `sessions/<name>/worktree` stays as a symlink for
people; the stages work on the real path.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path

from autoresearch.session.layout import SessionLayout


def store_root(setting: str | None = None) -> Path:
    """The spec's `worktree_root`, else $XDG_DATA_HOME (~/.local/share)/autoresearch/worktrees."""
    if setting:
        return Path(setting).expanduser().absolute()
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "autoresearch" / "worktrees"


def store_for(layout: SessionLayout, setting: str | None = None) -> Path:
    """The folder of this session's worktrees: unique per session folder, stable on reruns."""
    digest = hashlib.sha256(str(layout.root).encode()).hexdigest()[:10]
    return store_root(setting) / f"{layout.name}-{digest}"


def link(link_path: Path, real: Path) -> None:
    """Make `link_path` (in the session folder) point at the worktree's real place.

    A session made before worktrees moved keeps its real folder there: it is left alone.
    """
    link_path.parent.mkdir(parents=True, exist_ok=True)
    if link_path.is_symlink():
        if link_path.resolve() == real.resolve():
            return
        link_path.unlink()
    elif link_path.exists():
        return
    tmp = link_path.with_name(f".{link_path.name}.link")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(real, target_is_directory=True)
    os.replace(tmp, link_path)


def set_aside(real: Path) -> Path:
    """Move a worktree whose repository is gone (a target deleted and made again at the
    same path) out of the way, never deleting it: `<name>.orphaned-<time>`."""
    aside = real.with_name(f"{real.name}.orphaned-{dt.datetime.now():%Y%m%dT%H%M%S%f}")
    os.replace(real, aside)
    return aside


def real_place(link_path: Path, store: Path, *parts: str) -> Path:
    """Where a worktree is: an older session's folder under sessions/, or the store."""
    if link_path.exists() and not link_path.is_symlink():
        return link_path
    return store.joinpath(*parts)

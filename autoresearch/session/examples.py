"""Bundled example targets, turned into throwaway git repositories for demos and tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from autoresearch.safety import git


def make_example_repo(source: Path, ready: Path) -> Path:
    """Copy `source` next to `ready` and commit it as a fresh repository."""
    repo = ready.with_suffix("")
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    git.git(repo, "init", "-q", "-b", "main")
    git.git(repo, "add", "-A")
    git.git(repo, "commit", "-q", "-m", "Example project as shipped")
    ready.write_text(git.head(repo) + "\n")
    return repo

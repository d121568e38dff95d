"""What `git.clean` costs over `clean -ffdx` alone: the walk that removes every `.git` below
the worktree's own (git.remove_nested_git), on a session worktree of a real repository.

    python bench/bench_nested_git.py [--repo PATH] [--repeats 20]

Prints the median wall time of `clean -ffdx` and of the walk, and how many folders the walk
visits. The repository defaults to this checkout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.safety import git  # noqa: E402


def median_ms(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=ROOT)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # A clone of its own: the bench's worktree and branch never touch the repository.
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", str(args.repo), str(repo)], check=True)
        worktree = Path(tmp) / "store" / "worktree"
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
        git.open_worktree(repo, worktree, "autoresearch/bench-nested-git", head)
        folders = sum(1 for _ in os.walk(worktree))
        files = git.worktree_git(worktree, "ls-files", "-z").count("\0")
        clean = median_ms(lambda: git.worktree_git(worktree, "clean", "-ffdxq"), args.repeats)
        walk = median_ms(lambda: git.remove_nested_git(worktree), args.repeats)
        print(f"repository: {args.repo} ({files} tracked files, {folders} folders)")
        print(f"clean -ffdx: {clean:.1f} ms (median of {args.repeats})")
        print(f"remove_nested_git walk: {walk:.1f} ms (median of {args.repeats})")


if __name__ == "__main__":
    main()

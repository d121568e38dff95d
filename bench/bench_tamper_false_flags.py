"""How many honest changes the tamper screen flags (issue 35, part 4).

Replays the last `--commits` non-merge commits of each git repository given (a real
library's history, or a demo session's kept branch) through `tamper.check_file`, file by
file, old version against new, under each profile, and prints how many commits raise at
least one flag, by check, with up to `--examples` lines per check.

    python bench/bench_tamper_false_flags.py GIT_DIR [GIT_DIR ...] [--commits 300]
        [--range BASE..TIP] [--profile gate measure full]

Where no history is at hand (Go's, Rust's or JavaScript's libraries as installed), `--tree
DIR` screens every code file under DIR as a change that adds it (old: absent), which
counts every line as new: an upper bound of what a change to that code could raise.

    python bench/bench_tamper_false_flags.py --tree /usr/share/go-1.19/src [--tree DIR]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.safety import tamper  # noqa: E402


def _git(repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "--git-dir", repo, *args], capture_output=True, text=True, errors="replace"
    )


def _show(repo: str, spec: str) -> str | None:
    proc = _git(repo, "show", spec)
    return proc.stdout if proc.returncode == 0 else None


def screen(repo: str, revs: list[str], profile: str) -> tuple[int, dict[str, list[str]]]:
    flagged, by_check = 0, collections.defaultdict(list)
    for sha in revs:
        out = _git(repo, "diff-tree", "--no-commit-id", "-r", "--name-only", "--root", sha)
        found: list[tamper.Flag] = []
        for path in filter(None, out.stdout.splitlines()):
            old, new = _show(repo, f"{sha}^:{path}"), _show(repo, f"{sha}:{path}")
            found += tamper.check_file(path, old, new, profile=profile)
        if found:
            flagged += 1
            for check in sorted({f.check for f in found}):
                first = next(f for f in found if f.check == check)
                by_check[check].append(f"{sha[:8]} {first.describe()}")
    return flagged, by_check


TREE_SUFFIXES = (".py", ".go", ".rs", ".js", ".mjs", ".cjs", ".ts")


def screen_tree(top: Path, profile: str) -> tuple[int, int, dict[str, list[str]]]:
    """(files flagged, files read, examples by check) of every code file under `top`
    screened as added whole; data, fixtures and vendored copies are not code of it."""
    flagged, read, by_check = 0, 0, collections.defaultdict(list)
    for path in sorted(top.rglob("*")):
        if not path.is_file() or not path.name.endswith(TREE_SUFFIXES):
            continue
        if {"testdata", "node_modules", "vendor"} & set(path.relative_to(top).parts[:-1]):
            continue
        rel = str(path.relative_to(top))
        text = path.read_text(errors="replace")
        found = tamper.check_file(rel, None, text, profile=profile)
        read += 1
        if found:
            flagged += 1
            for check in sorted({f.check for f in found}):
                first = next(f for f in found if f.check == check)
                by_check[check].append(first.describe())
    return flagged, read, by_check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repos", nargs="*")
    parser.add_argument("--tree", action="append", default=[], type=Path)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--range", default="HEAD")
    parser.add_argument("--profile", nargs="+", default=list(tamper.PROFILES))
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args()
    for top in args.tree:
        for profile in args.profile:
            flagged, read, by_check = screen_tree(top, profile)
            share = 100 * flagged / max(read, 1)
            counts = {c: len(v) for c, v in sorted(by_check.items())}
            print(f"{top} (every file added) [{profile}]: {flagged}/{read} ({share:.1f}%) {counts}")
            for check, lines in sorted(by_check.items()):
                for line in lines[: args.examples]:
                    print(f"    {check}: {line}")
    for repo in args.repos:
        revs = _git(repo, "rev-list", "--no-merges", f"-n{args.commits}", args.range).stdout
        revs_list = revs.split()
        for profile in args.profile:
            flagged, by_check = screen(repo, revs_list, profile)
            share = 100 * flagged / max(len(revs_list), 1)
            counts = {c: len(v) for c, v in sorted(by_check.items())}
            print(f"{repo} [{profile}]: {flagged}/{len(revs_list)} ({share:.1f}%) {counts}")
            for check, lines in sorted(by_check.items()):
                for line in lines[: args.examples]:
                    print(f"    {check}: {line}")


if __name__ == "__main__":
    main()

"""Lines of the package's Python files at two commits, file by file, with the totals.

What issue 36's size target counts: every line of autoresearch/**/*.py, blank and comment
lines included. Read from git (no checkout), so any two commits can be compared:

    python bench/bench_package_lines.py BEFORE [AFTER] [--under autoresearch/modes/experiment]

AFTER defaults to HEAD. Rows are the files under `--under` (repeatable; default the modes
and gate folders) that differ in size, then each folder's total and the package's.
"""

from __future__ import annotations

import argparse
import subprocess
from collections import defaultdict

PACKAGE = "autoresearch/"
DEFAULT_UNDER = ["autoresearch/modes/", "autoresearch/gate/"]


def sizes(rev: str) -> dict[str, int]:
    """Every .py file of the package at `rev` -> its line count."""
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, PACKAGE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    out = {}
    for name in (n for n in names if n.endswith(".py")):
        text = subprocess.run(
            ["git", "show", f"{rev}:{name}"], capture_output=True, text=True, check=True
        ).stdout
        out[name] = len(text.splitlines())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default="HEAD")
    parser.add_argument("--under", action="append")
    args = parser.parse_args()
    under = [u.rstrip("/") + "/" for u in args.under or DEFAULT_UNDER]
    old, new = sizes(args.before), sizes(args.after)
    print(f"{'file':60} {'before':>7} {'after':>7} {'change':>7}")
    folders: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name, 0), new.get(name, 0)
        if not any(name.startswith(u) for u in under):
            continue
        folder = name.rsplit("/", 1)[0]
        folders[folder][0] += a
        folders[folder][1] += b
        if a != b:
            print(f"{name:60} {a:>7} {b:>7} {b - a:>+7}")
    print()
    for folder, (a, b) in sorted(folders.items()):
        if a != b:
            print(f"{folder + '/ (total)':60} {a:>7} {b:>7} {b - a:>+7}")
    a, b = sum(old.values()), sum(new.values())
    print(f"{'package (autoresearch/**/*.py)':60} {a:>7} {b:>7} {b - a:>+7}")


if __name__ == "__main__":
    main()

"""Whether two runs of `make demo` kept the same commits and wrote the same session files.

Run the demo in two checkouts (e.g. `git archive` of the base and of the change, each run
with `PYTHONPATH` at its own tree), then compare: per demo session, the kept commits'
subjects and tree hashes, and every session file outside the worktree after masking what
differs run to run (the checkout's path, times, commit ids, process ids, durations, pytest's
random cache folder names, the fold's file offsets, the digits of the wall and CPU figures
and the order of their rows). Prints the counts and the files that differ; exit 1 when any
does.

    python bench/bench_demo_identical.py BEFORE_ROOT AFTER_ROOT
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SESSIONS = ("demo", "demo-experiment")
# Files of wall and CPU figures (and the page that shows them): only their shape can match.
FIGURES = ("benchmarks", "timings.tsv", "report/results.html")
MASKS = [
    (re.compile(r'"inode":\d+,"length":\d+'), "FILE"),  # the decisions index's fold
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "TIME"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?( UTC)?"), "TIME"),
    (re.compile(r"\d{8}T\d{6}Z"), "TIME"),
    (re.compile(r"\b[0-9a-f]{7,40}\b"), "HASH"),
    (re.compile(r"pid \d+"), "pid N"),
    (re.compile(r"pytest-cache-files-\w+"), "pytest-cache-files-X"),
    (re.compile(r"\d+\.\d+"), "N.N"),
    (re.compile(r"\b\d{5,}\b"), "N"),
]


def masked(text: str, root: Path) -> str:
    text = text.replace(str(root), "ROOT")
    for pattern, stand_in in MASKS:
        text = pattern.sub(stand_in, text)
    return text


def kept(root: Path, name: str) -> list[str]:
    worktree = root / "sessions" / name / "worktree"
    out = subprocess.run(
        ["git", "-C", str(worktree), "log", "--format=%s %T"], capture_output=True, text=True
    )
    return out.stdout.splitlines()


def files(folder: Path) -> set[Path]:
    return {
        p.relative_to(folder)
        for p in folder.rglob("*")
        if p.is_file() and not {"worktree", ".git"} & set(p.relative_to(folder).parts)
    }


def same(a: Path, b: Path, rel: Path, roots: tuple[Path, Path]) -> bool:
    one, two = a.read_bytes(), b.read_bytes()
    if one == two:
        return True
    try:
        one_text, two_text = masked(one.decode(), roots[0]), masked(two.decode(), roots[1])
    except UnicodeDecodeError:
        return False
    if any(str(rel) == f or rel.parts[0] == f for f in FIGURES):
        # Jobs that do not wait for each other (the plot, the report) finish in either order.
        one_text, two_text = (
            sorted(re.sub(r"[\d.:]+", "N", t).splitlines()) for t in (one_text, two_text)
        )
    return one_text == two_text


def main() -> int:
    before, after = (Path(p).resolve() for p in sys.argv[1:3])
    differ_total = 0
    for name in SESSIONS:
        a, b = before / "sessions" / name, after / "sessions" / name
        if not (a / "done").is_file() or not (b / "done").is_file():
            print(f"{name}: not run to its end in both checkouts (no done file)")
            return 2
        commits = kept(before, name), kept(after, name)
        fa, fb = files(a), files(b)
        differ = sorted(str(f) for f in fa & fb if not same(a / f, b / f, f, (before, after)))
        alone = sorted(str(f) for f in fa ^ fb)
        print(
            f"{name}: {len(commits[1])} commits on the branch, subjects and trees "
            f"{'identical' if commits[0] == commits[1] else 'DIFFERENT'}; {len(fa & fb)} files, "
            f"{len(differ)} differ after masking, {len(alone)} in one run only"
        )
        for line in differ + [f"only in one run: {f}" for f in alone]:
            print(f"  {line}")
        differ_total += len(differ) + len(alone) + (commits[0] != commits[1])
    print("identical" if not differ_total else f"{differ_total} differences")
    return 1 if differ_total else 0


if __name__ == "__main__":
    sys.exit(main())

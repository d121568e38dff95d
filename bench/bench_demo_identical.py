"""Whether a change leaves the demos as they were: `make demo`'s two sessions run from a
commit (`--before`, default HEAD) and from another (`--after`, default the working
tree), each in a copy of its own, then compared: the kept commits' subjects and trees,
and every session file after masking what differs run to run (commit ids, times,
durations, the copy's path); the plots byte for byte.

    python bench/bench_demo_identical.py [--before REF] [--after REF] [--keep DIR]
        [--before-python PATH] [--after-python PATH]

Prints one line per session and one per file that differs; exits 1 when any does.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ("demo", "demo-experiment")
# What differs between two honest runs of the same code.
MASKS = (
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"\d+\.\d+"), "<num>"),
    (re.compile(r"\b[0-9a-f]{7,64}\b"), "<hex>"),
    (re.compile(r'"length":\d+'), '"length":<n>'),  # an index's byte count: durations vary
    (re.compile(r"\d{8}T\d{6}Z"), "<time>"),  # a run id's
    (re.compile(r"pid \d+"), "pid <n>"),
)
# Files whose rows follow the order jobs happened to finish in: compared as sets of lines.
ORDERLESS = ("timings.tsv", "report/results.html")
SKIPPED = ("worktree", "benchmarks", "logs", ".snakemake")


def copy_tree(before: str | None, dest: Path) -> None:
    """The package at `before` (a git ref), or the working tree as it is (None)."""
    dest.mkdir(parents=True)
    if before is not None:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", before], check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        return
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def run_demo(tree: Path, python: str) -> None:
    # The copy's package, not the venv's; the sessions' worktrees in the copy, not ~/.local.
    env = dict(os.environ, PYTHONPATH=str(tree), XDG_DATA_HOME=str(tree / ".data"))
    targets = [f"sessions/{s}/done" for s in SESSIONS]
    subprocess.run(
        [python, "-m", "snakemake", "--cores", "1", *targets],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
    )


def masked(text: str, tree: Path) -> list[str]:
    text = text.replace(str(tree), "<root>")
    for pattern, word in MASKS:
        text = pattern.sub(word, text)
    return text.splitlines()


def kept(tree: Path, session: str) -> list[str]:
    """The session branch's commits since its base: subject and tree, oldest first."""
    setup = json.loads((tree / "sessions" / session / "setup.json").read_text())
    log = subprocess.run(
        ["git", "-C", setup["target"], "log", "--reverse", "--format=%T %s"]
        + [f"{setup['base_commit']}..{setup['branch']}"],
        check=True,
        capture_output=True,
        text=True,
    )
    return log.stdout.splitlines()


def files(tree: Path, session: str) -> dict[str, Path]:
    root = tree / "sessions" / session
    return {
        str(p.relative_to(root)): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not set(p.relative_to(root).parts) & set(SKIPPED)
    }


def compare(a: Path, b: Path) -> int:
    differing = 0
    for session in SESSIONS:
        commits_a, commits_b = kept(a, session), kept(b, session)
        same = "same" if commits_a == commits_b else "DIFFERENT"
        counts = f"{len(commits_a)} / {len(commits_b)}"
        print(f"{session}: {counts} kept commits, subjects and trees {same}")
        differing += commits_a != commits_b
        fa, fb = files(a, session), files(b, session)
        for name in sorted(fa.keys() | fb.keys()):
            if name not in fa or name not in fb:
                print(f"  {name}: only {'after' if name in fb else 'before'}")
                differing += 1
                continue
            try:
                la = masked(fa[name].read_text(), a)
                lb = masked(fb[name].read_text(), b)
            except UnicodeDecodeError:
                # A binary file (the plots) byte for byte: matplotlib's PNGs carry no time,
                # so two runs of the same code draw the same bytes.
                la, lb = [fa[name].read_bytes().hex()], [fb[name].read_bytes().hex()]
            if name in ORDERLESS:
                la, lb = sorted(la), sorted(lb)
            if la != lb:
                differing += 1
                diff = [d for d in difflib.unified_diff(la, lb, lineterm="", n=0)][2:6]
                print(f"  {name}: differs: " + " | ".join(diff))
        print(f"  {len(fa)} / {len(fb)} session files compared")
    return differing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD")
    parser.add_argument("--after", help="a git ref (default: the working tree as it is)")
    parser.add_argument("--keep", type=Path, help="run in DIR and leave the copies there")
    # Another virtualenv's interpreter for a side: a "before" whose dependencies differ.
    python = str(ROOT / ".venv" / "bin" / "python")
    parser.add_argument("--before-python", default=python)
    parser.add_argument("--after-python", default=python)
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="demo-identical-"))
    before, after = base / "before", base / "after"
    copy_tree(args.before, before)
    copy_tree(args.after, after)
    run_demo(before, args.before_python)
    run_demo(after, args.after_python)
    differing = compare(before, after)
    print(f"{differing} differences")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())

"""What the tool and git safety checks cost: median milliseconds per call.

A throwaway repository with `--files` Python files (tracked, one linked worktree made by
autoresearch) and the tools bound to the worktree. Prints, per operation, the median of
`--repeats` runs: search (regex package with its time cap) against the same search with
the standard library's `re`, list_files with a glob, read_file, write_file and edit_file
(each now opens without following links, checks the file and writes by rename; writes also
ask git whether the path is ignored), reset_to (which first looks for stale locks) and
clear_stale_lock with a lock present (a scan of /proc).

    python bench/bench_tool_safety.py [--files 2000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.agents.tools import Toolbox  # noqa: E402
from autoresearch.safety import git as ar_git  # noqa: E402

LINE = "def f{n}(x):\n    return x * {n}  # TODO tidy\n\n"


def make_target(base: Path, files: int) -> Path:
    repo = base / "target"
    for i in range(files):
        path = repo / f"pkg{i % 20}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(LINE.format(n=n) for n in range(40)) + f"NAME = 'm{i}'\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )
    return repo


def median_ms(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def stdlib_search(box: Toolbox, pattern: str) -> int:
    """The search loop as it was before, on `re` and without the per-file checks."""
    compiled, hits = re.compile(pattern), 0
    for rel in box.sandbox.files():
        text = (box.sandbox.root / rel).read_bytes().decode("utf-8", "replace")
        hits += sum(1 for line in text.splitlines() if compiled.search(line))
    return hits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_target(Path(tmp), opts.files)
        worktree = Path(tmp) / "wt"
        ar_git.open_worktree(repo, worktree, "autoresearch/bench", "HEAD")
        box = Toolbox("green", worktree)
        lines = opts.files * 40 * 3
        print(f"repository: {opts.files} files, {lines} lines; median of {opts.repeats} runs")
        common, rare = r"return x \* 3\d", r"NAME = 'm1234'"
        rows = [
            ("search, hits in every file", lambda: box.call("search", {"pattern": common})),
            ("  the same with stdlib re, no checks", lambda: stdlib_search(box, common)),
            ("search, a hit in one file", lambda: box.call("search", {"pattern": rare})),
            ("  the same with stdlib re, no checks", lambda: stdlib_search(box, rare)),
            (
                "search, a lookbehind: line by line",
                lambda: box.call("search", {"pattern": "(?<=x) \\*"}),
            ),
            (
                "list_files glob **/mod1*.py",
                lambda: box.call("list_files", {"glob": "**/mod1*.py"}),
            ),
            ("read_file", lambda: box.call("read_file", {"path": "pkg1/mod1.py"})),
            (
                "write_file",
                lambda: box.call("write_file", {"path": "pkg1/new.py", "content": "x = 1\n"}),
            ),
            (
                "edit_file (and back)",
                lambda: (
                    box.call(
                        "edit_file", {"path": "pkg1/mod1.py", "old_str": "f0(", "new_str": "g0("}
                    ),
                    box.call(
                        "edit_file", {"path": "pkg1/mod1.py", "old_str": "g0(", "new_str": "f0("}
                    ),
                ),
            ),
            ("reset_to HEAD", lambda: ar_git.reset_to(worktree, "HEAD")),
        ]
        for label, action in rows:
            print(f"{label:<42} {median_ms(action, opts.repeats):9.1f} ms")
        lock = ar_git.worktree_admin(worktree) / "index.lock"

        def stale_lock() -> None:
            lock.write_text("")
            ar_git.clear_stale_lock(worktree)

        print(
            f"{'clear_stale_lock (lock present)':<42} {median_ms(stale_lock, opts.repeats):9.1f} ms"
        )


if __name__ == "__main__":
    main()

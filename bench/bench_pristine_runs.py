"""What starting every measurement run from a pristine tree costs (issue 35, part 5).

Clones a repository (default: this checkout), opens a session-style linked worktree of it,
and times `metrics.pristine` (restore what the runs changed, `git clean -ffdx`) against
one jailless run of `python -c pass`, the cheapest measurement there is, with and without
a `build/` folder of `--litter` files left behind by the previous run.

    python bench/bench_pristine_runs.py [--repo PATH] [--repeats 20] [--litter 200]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.measure import metrics  # noqa: E402
from autoresearch.safety import commands, git  # noqa: E402


def _median_ms(fn, repeats: int, before=lambda: None) -> float:
    times = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(ROOT))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--litter", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clone, wt = Path(tmp) / "clone", Path(tmp) / "wt"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", args.repo, str(clone)], check=True)
        git.open_worktree(clone, wt, "autoresearch/bench", git.head(clone))
        files = len(git.worktree_git(wt, "ls-files").splitlines())

        def litter() -> None:
            (wt / "build").mkdir(exist_ok=True)
            for i in range(args.litter):
                (wt / "build" / f"cache-{i}.txt").write_text("x" * 100)

        clean = _median_ms(lambda: metrics.pristine(wt), args.repeats)
        dirty = _median_ms(lambda: metrics.pristine(wt), args.repeats, before=litter)
        run = _median_ms(lambda: commands.run("python3 -c pass", wt), args.repeats)
        print(f"{args.repo}: {files} tracked files")
        print(f"  pristine, nothing left behind:        {clean:7.1f} ms")
        print(f"  pristine, {args.litter} files left in build/: {dirty:7.1f} ms")
        print(f"  one run of `python3 -c pass`:          {run:7.1f} ms")


if __name__ == "__main__":
    main()

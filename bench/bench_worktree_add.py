"""CPU of making one session worktree (git.open_worktree, then its removal), paired against
another checkout: the checkout runs in the harness's git box since `worktree add` makes the
worktree without its files (`--no-checkout`) and a boxed reset writes them.

A target of `--files` files; `--adds` worktrees made and removed in a child process per
side, whose CPU (its own and its children's, rusage: the box is a direct child) is read
around the loop. Rounds go A B A B ... (`--rounds`), and each round's ratio A/B is printed.

    python bench/bench_worktree_add.py --vs CHECKOUT [--root CHECKOUT] [--files 200]
        [--adds 10] [--rounds 5]

CHECKOUT: a tree of autoresearch (its package), e.g. an older commit's `git archive`
unpacked in a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_gitbox import make_target

ROOT = Path(__file__).resolve().parents[1]
ADDS = """
import resource, sys
from pathlib import Path
from autoresearch.safety import git as ar_git
target, store, adds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
start = ar_git.head(target)
before = cpu()
for n in range(adds):
    place = store / f"w{n}"
    ar_git.open_worktree(target, place, f"autoresearch/bench-{n}", start)
    ar_git.remove_worktree(target, place)
    ar_git.git(target, "branch", "-D", f"autoresearch/bench-{n}")
print((cpu() - before) / adds)
"""


def one_round(root: Path, target: Path, store: Path, adds: int) -> float:
    """CPU per worktree made and removed with the package of `root`."""
    done = subprocess.run(
        [sys.executable, "-c", ADDS, str(target), str(store), str(adds)],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"the round in {root} failed: {done.stderr.strip()}")
    return float(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout A (default: this one)")
    parser.add_argument("--vs", type=Path, required=True, help="checkout B")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--adds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sides = {"A": args.root.resolve(), "B": args.vs.resolve()}
    print(f"A = {sides['A']}\nB = {sides['B']}")
    print(f"worktrees of {args.files} files, {args.adds} made and removed a round")
    seen: dict[str, list[float]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="autoresearch-bench-") as tmp:
        target = make_target(Path(tmp), args.files)
        for n in range(args.rounds):
            for side, root in sides.items():
                seen[side].append(one_round(root, target, Path(tmp) / f"store-{side}", args.adds))
            a, b = seen["A"][-1], seen["B"][-1]
            print(f"  round {n + 1}: A {a * 1000:.1f} ms, B {b * 1000:.1f} ms, ratio {a / b:.2f}")
    a, b = (statistics.median(seen[side]) * 1000 for side in ("A", "B"))
    print(f"  median CPU a worktree: A {a:.1f} ms, B {b:.1f} ms ({a - b:+.1f} ms)")


if __name__ == "__main__":
    main()

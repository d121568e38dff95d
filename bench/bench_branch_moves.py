"""What a harness git call costs on a session worktree, per call, against another checkout:
`git status` (keeps HEAD), a commit of one changed file (`commit_all`: the box's git on a
detached HEAD, then `update-ref` outside it) and `reset_to` (half of them to another
commit, half where the worktree is already). Each checkout runs in a child process of its
own (its package first on sys.path), rounds alternate A B A B..., and the median per call
of each side is printed: the process's own CPU, its children's (git, the box's launcher)
and the wall time (a rename over HEAD is a millisecond of it on ext4).

    python bench/bench_branch_moves.py --vs CHECKOUT [--root CHECKOUT] [--calls 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, subprocess, sys, tempfile, time
from pathlib import Path
from autoresearch.safety import git as ar_git

calls = int(sys.argv[1])


def git(repo, *args):
    line = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(line, cwd=repo, check=True, capture_output=True, text=True).stdout


def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime, time.perf_counter()


with tempfile.TemporaryDirectory(prefix="bench-branch-moves-") as tmp:
    target = Path(tmp) / "target"
    target.mkdir()
    for n in range(50):
        (target / f"m{n}.py").write_text(f"X = {n}\n")
    git(target, "init", "-q", "-b", "main")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "initial")
    base = ar_git.head(target)
    work = Path(tmp) / "store" / "worktree"
    ar_git.open_worktree(target, work, "autoresearch/s", base)

    def commit(n):
        (work / "m1.py").write_text(f"X = {n}\n")
        ar_git.commit_all(work, f"change {n}")

    kinds = {
        "status": lambda n: ar_git.worktree_git(work, "status", "--porcelain"),
        "commit": commit,
        "reset_to": lambda n: ar_git.reset_to(work, base if n % 2 else ar_git.head(work)),
    }
    out = {}
    for name, call in kinds.items():
        call(0)
        before = cpu()
        for n in range(1, calls + 1):
            call(n)
        after = cpu()
        out[name] = [1000 * (b - a) / calls for a, b in zip(before, after)]
    print(json.dumps(out))
"""


def run(root: Path, calls: int) -> dict[str, list[float]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(calls)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout A (default: this one)")
    parser.add_argument("--vs", type=Path, required=True, help="checkout B")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sides = {"A": args.root.resolve(), "B": args.vs.resolve()}
    runs: dict[str, list[dict[str, list[float]]]] = {"A": [], "B": []}
    for _ in range(args.rounds):
        for side, root in sides.items():
            runs[side].append(run(root, args.calls))
    print(f"A = {sides['A']}\nB = {sides['B']}\nms a call, median of {args.rounds} rounds:")
    for kind in runs["A"][0]:
        for side in ("A", "B"):
            own, kids, wall = (statistics.median(r[kind][i] for r in runs[side]) for i in range(3))
            print(f"  {kind:9} {side}: own {own:.2f}, children {kids:.2f}, wall {wall:.2f}")


if __name__ == "__main__":
    main()

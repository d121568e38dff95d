"""CPU of the checks before every harness git call on a session worktree (`git._bound`:
the worktree's `.git` file, `gitdir`, `commondir`, the record beside it, HEAD, the branch's
ref file, `config.worktree`; then the allowlisted environment), in µs per call, paired
against another checkout.

One worktree made with `open_worktree` (as a session's), then `--calls` calls of `_bound`
in a child process per side, timed by the process's CPU clock; also `worktree_admin` and
`environment` alone. Rounds go A B A B ... (`--rounds`), each round's ratio A/B printed.

    python bench/bench_bound.py --vs CHECKOUT [--root CHECKOUT] [--calls 5000] [--rounds 5]
    python bench/bench_bound.py [--root CHECKOUT] [--calls 5000]

CHECKOUT: a tree of autoresearch (its package), e.g. an older commit's `git archive`
unpacked in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALLS = """
import json, sys, time
from pathlib import Path
from autoresearch.safety import git as ar_git
place, calls = Path(sys.argv[1]), int(sys.argv[2])
admin = ar_git.worktree_admin(place)
def per_call(fn):
    fn()  # warm: imports, the private HOME
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6
print(json.dumps({
    "bound": per_call(lambda: ar_git._bound(place)),
    "worktree_admin": per_call(lambda: ar_git.worktree_admin(place)),
    "environment": per_call(lambda: ar_git.environment(place, git_dir=admin)),
}))
"""


def make_worktree(tmp: Path) -> Path:
    """A target of one commit and a session worktree of it, made with this checkout's
    package (both sides read the same files: the record's format did not change)."""
    target = tmp / "target"
    target.mkdir()
    (target / "m.py").write_text("X = 1\n")
    author = ["-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(target), *author, "commit", "-qm", "x"], check=True)
    place = tmp / "store" / "wt"
    place.parent.mkdir()
    sys.path.insert(0, str(ROOT))
    from autoresearch.safety import git as ar_git

    ar_git.open_worktree(target, place, "autoresearch/bench", ar_git.head(target))
    return place


def one_round(root: Path, place: Path, calls: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CALLS, str(place), str(calls)],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--vs", type=Path, help="another checkout, run paired A B A B")
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        place = make_worktree(Path(tmp))
        sides = {"A": args.root.resolve()}
        if args.vs is not None:
            sides["B"] = args.vs.resolve()
        figures: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for n in range(args.rounds if args.vs is not None else 1):
            for side, root in sides.items():
                figures[side].append(one_round(root, place, args.calls))
            line = "  ".join(f"{side} bound {figures[side][-1]['bound']:.1f} µs" for side in sides)
            if args.vs is not None:
                line += f"  ratio A/B {figures['A'][-1]['bound'] / figures['B'][-1]['bound']:.2f}"
            print(f"round {n + 1}: {line}")
        for side, root in sides.items():
            medians = {
                key: statistics.median(f[key] for f in figures[side]) for key in figures[side][0]
            }
            print(
                f"{side} ({root}): µs per call, median: "
                + ", ".join(f"{key} {value:.1f}" for key, value in medians.items())
            )


if __name__ == "__main__":
    main()

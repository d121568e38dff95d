"""CPU of one confined harness git call: the Landlock box against the bwrap jail.

A target of `--files` files and a session worktree of it; `--calls` calls of
`git status --porcelain` (one jail or box each) through the harness's own helper, in a
child process per confinement, each in a cpuacct cgroup of its own (root, cgroup v1), so
what runs in a jail counts too; without such a cgroup the figure is rusage's, which misses
the jail's processes (the line says so). Rounds go box, jail, none, box, jail, none... and
the median per call of each is printed, with the box's saving against the jail.

    python bench/bench_gitbox.py [--files 200] [--calls 40] [--rounds 5] [--batch]

--batch: each call is instead a batch of two, `reset -q` and `status --porcelain` (the
shape of a stage's start, git.worktree_batch), and a fourth mode, `each`, runs each of its
calls in a box of its own (as before a batch had one box).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_git_cycle import Meter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODES = {
    "box": "ar_git.LANDLOCK = True",
    "jail": "ar_git.LANDLOCK = False",
    "none": "ar_git.CONFINED = False",
}
EACH = "ar_git.LANDLOCK = True; from autoresearch.safety import gitbox; gitbox.MAX_BATCH = 0"
ONE_CALL = 'ar_git.worktree_git(worktree, "status", "--porcelain")'
BATCH = 'ar_git.worktree_batch_git(worktree, ("reset", "-q"), ("status", "--porcelain"))'
CALLS = """
import sys
from pathlib import Path
from autoresearch.safety import git as ar_git
{switch}
worktree = Path(sys.argv[1])
ar_git.worktree_git(worktree, "status", "--porcelain")  # the jail's line, the box's probe
print(ar_git.confinement(), flush=True)
sys.stdin.readline()  # measured from here
for _ in range(int(sys.argv[2])):
    {op}
"""


def make_target(tmp: Path, files: int) -> Path:
    """A repository of `files` small modules in ten packages, committed."""
    target = tmp / "target"
    for n in range(files):
        (target / f"pkg{n % 10}").mkdir(parents=True, exist_ok=True)
        (target / f"pkg{n % 10}" / f"m{n}.py").write_text(f"X = {n}\n")
    author = ["-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(target), *author, "commit", "-qm", "x"], check=True)
    return target


def make_worktree(tmp: Path, files: int) -> Path:
    from autoresearch.safety import git as ar_git

    target = make_target(tmp, files)
    place = tmp / "store" / "worktree"
    ar_git.open_worktree(target, place, "autoresearch/bench", ar_git.head(target))
    return place


def one_round(
    mode: str, worktree: Path, calls: int, name: str, batch: bool = False
) -> tuple[float, str, bool]:
    """CPU per call of `calls` calls in `mode` (the child's start-up left out)."""
    meter = Meter(name)
    code = CALLS.format(
        switch=EACH if mode == "each" else MODES[mode], op=BATCH if batch else ONE_CALL
    )
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(worktree), str(calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            preexec_fn=meter.enter,
        )
        assert child.stdin is not None and child.stdout is not None
        how = child.stdout.readline().strip()
        start = meter.seconds()
        child.stdin.write("\n")
        child.stdin.flush()
        if child.wait():
            sys.exit(f"the {mode} round failed")
        return (meter.seconds() - start) / calls, how, meter.whole_tree
    finally:
        meter.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", action="store_true", help="a batch of two calls each time")
    args = parser.parse_args()
    modes = [*MODES, *(["each"] if args.batch else [])]
    with tempfile.TemporaryDirectory() as scratch:
        worktree = make_worktree(Path(scratch), args.files)
        per: dict[str, list[float]] = {mode: [] for mode in modes}
        said: dict[str, str] = {}
        whole = True
        for r in range(args.rounds):
            for mode in modes:
                name = f"autoresearch-gitbox-{os.getpid()}-{r}{mode}"
                cpu, said[mode], counted = one_round(mode, worktree, args.calls, name, args.batch)
                per[mode].append(cpu)
                whole &= counted
    how = "cpuacct cgroup, jails included" if whole else "rusage: a jail's processes NOT counted"
    what = "reset + status batches" if args.batch else "git status calls"
    print(f"{what} on {args.files} files, {args.calls} x {args.rounds} rounds ({how})")
    med = {mode: statistics.median(v) for mode, v in per.items()}
    for mode in modes:
        spread = ", ".join(f"{v * 1000:.2f}" for v in per[mode])
        print(f"  {mode:4}: {med[mode] * 1000:.2f} ms CPU a call ({spread}); {said[mode]}")
    print(
        f"  the box costs {(med['box'] - med['none']) * 1000:.2f} ms more than no confinement, "
        f"the jail {(med['jail'] - med['none']) * 1000:.2f} ms"
    )
    if args.batch:
        saved = (med["each"] - med["box"]) * 1000
        print(f"  one box for the batch saves {saved:.2f} ms against a box a call")


if __name__ == "__main__":
    main()

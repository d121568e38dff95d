"""What the jail and the bounded output cost (issue 11, parts 1 and 5).

Prints, for `commands.run` without a jail and in the bwrap jail: the median wall time of
`true` (the jail's fixed cost per command) and of a small pytest suite; then, in the jail, what
the worktree's growth bound (growth.py: a walk of the worktree at the start and end of each
run, and every 0.25 s while it runs) and the streamed output (a pipe and a thread) add to
`true` and to a 1 s command, on a worktree of --files files; then how long a
3 s timeout takes when a child left the process group; and the peak memory of our process
while a command prints 1 GB.

    python bench/bench_commands.py [--repeats 20] [--gigabytes 1] [--files 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.safety import commands, jail  # noqa: E402

LINGER = "25.90417"  # the lingering child's argument, to find it afterwards
TESTS = "def test_add():\n    assert 1 + 1 == 2\n\n\ndef test_sub():\n    assert 2 - 1 == 1\n"
PEAK = textwrap.dedent(
    """
    import resource, sys
    from autoresearch.safety import commands
    n = int(float(sys.argv[2]) * 1e9)
    result = commands.run(f"yes 'a line of test output' | head -c {n}", sys.argv[1])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{peak_mb:.0f} {result.output_bytes} {result.duration_s:.1f}")
    """
)


def end_leftovers(marker: str) -> None:
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.name.isdigit() and argv[:2] == [b"sleep", marker.encode()]:
            os.kill(int(entry.name), signal.SIGKILL)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=repo,
                   check=True, capture_output=True)  # fmt: skip


def session_layout(root: Path) -> tuple[Path, Path]:
    target = root / "target"
    (target / "tests").mkdir(parents=True)
    (target / "tests" / "test_x.py").write_text(TESTS)
    git(target, "init", "-q", "-b", "main")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "initial")
    sessions = root / "work" / "sessions"
    worktree = sessions / "b" / "worktree"
    worktree.parent.mkdir(parents=True)
    git(target, "worktree", "add", "-q", "-b", "bench", str(worktree))
    return worktree, sessions


def median_s(command: str, cwd: Path, box: jail.Jail, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        result = commands.run(command, cwd, jail=box)
        assert result.ok, result.output
        times.append(result.duration_s)
    return statistics.median(times)


def own_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000


def bound_cost(command: str, cwd: Path, box: jail.Jail, repeats: int, **run) -> tuple[float, float]:
    """Median (our process's CPU ms, wall ms) of a jailed run."""
    cpu, wall = [], []
    for _ in range(repeats):
        before = own_cpu_ms()
        result = commands.run(command, cwd, jail=box, **run)
        assert result.ok, result.output
        cpu.append(own_cpu_ms() - before)
        wall.append(result.duration_s * 1000)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    probe = jail.probe()
    with tempfile.TemporaryDirectory(prefix="bench-commands-") as tmp:
        worktree, sessions = session_layout(Path(tmp))
        boxes = {"none": jail.build_jail({"sandbox": "none"}, worktree)}
        if probe.works:
            boxes["bwrap"] = jail.build_jail({"sandbox": "bwrap"}, worktree, hide=[sessions])
        else:
            print(f"bwrap: not measured ({probe.reason})")
        pytest = f"{sys.executable} -m pytest -q -p no:cacheprovider"
        for mode, box in boxes.items():
            true_s = median_s("true", worktree, box, args.repeats)
            tests_s = median_s(pytest, worktree, box, max(3, args.repeats // 4))
            print(f"{mode:5}  true: {true_s * 1000:6.1f} ms   2-test pytest: {tests_s:5.2f} s")
        if "bwrap" in boxes:
            for i in range(args.files):
                folder = worktree / "src" / f"p{i % 20}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"m{i}.py").write_text(f"X = {i}\n" * 10)
            box = boxes["bwrap"]
            unbound = dataclasses.replace(box, worktree_growth_mb=0)
            print(f"in the jail, worktree of {args.files} files (our CPU ms, wall ms):")
            for label, cmd in (("true", "true"), ("sleep 1", "sleep 1")):
                n = args.repeats if cmd == "true" else max(3, args.repeats // 4)
                plain = bound_cost(cmd, worktree, unbound, n)
                bounded = bound_cost(cmd, worktree, box, n)
                streamed = bound_cost(cmd, worktree, box, n, stream=True)
                print(
                    f"  {label:8} no bound {plain[0]:5.1f} / {plain[1]:6.1f}   "
                    f"growth bound {bounded[0]:5.1f} / {bounded[1]:6.1f}   "
                    f"+ streamed output {streamed[0]:5.1f} / {streamed[1]:6.1f}"
                )
        for mode, box in boxes.items():
            result = commands.run(f"setsid sleep {LINGER} & sleep {LINGER}", worktree, 3, jail=box)
            print(f"{mode:5}  3 s timeout, child left the group: returned after "
                  f"{result.duration_s:.2f} s")  # fmt: skip
        end_leftovers(LINGER)  # without a jail, the child that left the group lives on
        done = subprocess.run(
            [sys.executable, "-c", PEAK, tmp, str(args.gigabytes)],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )  # fmt: skip
        peak_mb, size, seconds = done.stdout.split()
        print(f"output of {int(size) / 1e9:.2f} GB in {seconds} s: peak memory {peak_mb} MB "
              f"(tail kept: {commands.OUTPUT_TAIL_BYTES / 2**20:.0f} MiB)")  # fmt: skip


if __name__ == "__main__":
    main()

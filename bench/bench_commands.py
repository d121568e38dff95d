"""What the jail and the bounded output cost (issue 11, parts 1 and 5).

Prints, for `commands.run` without a jail and in the bwrap jail: the median wall time of
`true` (the jail's fixed cost per command) and of a small pytest suite; then how long a
3 s timeout takes when a child left the process group; and the peak memory of our process
while a command prints 1 GB.

    python bench/bench_commands.py [--repeats 20] [--gigabytes 1]
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    args = parser.parse_args()
    probe = jail.probe()
    with tempfile.TemporaryDirectory(prefix="bench-commands-") as tmp:
        worktree, sessions = session_layout(Path(tmp))
        boxes = {"none": jail.build({"sandbox": "none"}, worktree)}
        if probe.works:
            boxes["bwrap"] = jail.build({"sandbox": "bwrap"}, worktree, hide=[sessions])
        else:
            print(f"bwrap: not measured ({probe.reason})")
        pytest = f"{sys.executable} -m pytest -q -p no:cacheprovider"
        for mode, box in boxes.items():
            true_s = median_s("true", worktree, box, args.repeats)
            tests_s = median_s(pytest, worktree, box, max(3, args.repeats // 4))
            print(f"{mode:5}  true: {true_s * 1000:6.1f} ms   2-test pytest: {tests_s:5.2f} s")
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

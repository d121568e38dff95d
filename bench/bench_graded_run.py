"""What grading with the start's tests costs: the report stream and canaries on every pytest run,
and, on a change that touches the tests, laying the start's files over it and the second run.

  run       one `run_tests` of a suite of `--tests` tests (a temp project), wall and CPU of the
            child processes, this checkout against `--checkout PATH` (an older one: its
            JUnit report, no canaries; `git archive <commit> | tar -x -C PATH` makes one);
  overlay   `overlay.plan` + `apply` + `take_back` on a real repository (`--repo`, default this
            checkout: its tests named as a start run would name them), one test file edited;
  second    what the second run adds to a gate's cycle: one more suite run, only for a
            change that touched the start's tests or runner files.

    python bench/bench_graded_run.py [--tests 400] [--repeats 5] [--checkout /tmp/before]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_RUN = """
import json, sys, time, resource
from pathlib import Path
from autoresearch.gate import testrun
repo = Path(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.perf_counter()
run = testrun.run_tests(sys.executable + " -m pytest -q", repo, stack="Python", timeout_s=600)
wall = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({"wall": wall, "cpu": cpu, "summary": run.summary, "source": run.source}))
"""


def suite(folder: Path, tests: int) -> Path:
    repo = folder / "suite"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    per_file = 50
    for n in range(0, tests, per_file):
        body = "from calc import add\n\n" + "".join(
            f"def test_{i}():\n    assert add({i}, 1) == {i + 1}\n\n"
            for i in range(n, min(n + per_file, tests))
        )
        (repo / "tests" / f"test_{n // per_file}.py").write_text(body)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "suite"], cwd=repo, check=True)
    return repo


def one_run(checkout: Path, repo: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    out = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(repo)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_run(checkouts: dict[str, Path], repo: Path, repeats: int) -> None:
    for name, checkout in checkouts.items():
        runs = [one_run(checkout, repo) for _ in range(repeats)]
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        print(
            f"run      {name:8} {runs[0]['summary']:>12} via {runs[0]['source']:14} "
            f"wall {wall:.3f} s  cpu {cpu:.3f} s (median of {repeats})"
        )


def bench_overlay(repo: Path, repeats: int) -> None:
    sys.path.insert(0, str(ROOT))
    from autoresearch.gate import overlay
    from autoresearch.gate.testrun import PASSED, TestRun
    from autoresearch.safety import git

    with tempfile.TemporaryDirectory() as tmp:
        # A clone's own worktree, made as the harness makes one: the repository measured
        # is never written.
        clone, work = Path(tmp) / "clone", Path(tmp) / "work"
        subprocess.run(["git", "clone", "-q", "--no-local", str(repo), str(clone)], check=True)
        git.add_detached_worktree(clone, work, "HEAD")
        start = git.head(work)
        files = [p for p in git.git(work, "ls-files", "*test_*.py").splitlines() if "/" in p]
        ids = frozenset(f"{f}::test_x" for f in files)
        reference = TestRun(
            "pytest",
            "pytest",
            PASSED,
            "",
            len(ids),
            0,
            0,
            0,
            frozenset(),
            ids,
            0,
            1.0,
            "",
            "pytest-stream",
        )
        edited = work / files[0]
        edited.write_text(edited.read_text() + "\n# edited\n")
        git.git(work, "add", "-A")
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            laid = overlay.plan(work, start, reference)
            overlay.apply(work, laid)
            overlay.take_back(work, laid)
            times.append(time.perf_counter() - t)
        print(
            f"overlay  {len(files)} test files of {repo.name}, {len(laid.restore)} restored: "
            f"{statistics.median(times) * 1000:.1f} ms (median of {repeats})"
        )
        git.remove_worktree(clone, work)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkout", type=Path, help="an older checkout, for its figures")
    parser.add_argument("--repo", type=Path, default=ROOT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = suite(Path(tmp), args.tests)
        checkouts = {"before": args.checkout} if args.checkout else {}
        bench_run(checkouts | {"after": ROOT}, repo, args.repeats)
    bench_overlay(args.repo, args.repeats)
    print(
        "second   one more suite run (the 'run' line's figures), only on a change that "
        "touched the start's tests or runner files; none otherwise"
    )


if __name__ == "__main__":
    main()

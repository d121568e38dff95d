"""What the commit guard and the pristine measurement tree cost (issue 11, part 3).

Prints median wall times, on a generated target of `--files` Python modules with a
pytest suite, for: preparing a measurement the old way (`reset --hard` + `clean -fd`)
against the pristine way (`clean -ffdx` + the protected-file check); a commit through
`git.commit_all` against one through `Protection.commit`; and a pytest run whose
`__pycache__` folders survived (the old way) against one after `clean -ffdx` removed them.

    python bench/bench_protect.py [--files 300] [--repeats 9]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.safety import git  # noqa: E402
from autoresearch.safety.protect import Protection  # noqa: E402

PROTECTED = ("bench.py", "tests", "program.md")


def make_target(root: Path, files: int) -> Path:
    repo = root / "target"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    for n in range(files):
        (repo / "pkg" / f"m{n}.py").write_text(f"def f{n}(x):\n    return x + {n}\n")
        if n % 10 == 0:
            (repo / "tests" / f"test_m{n}.py").write_text(
                f"from pkg.m{n} import f{n}\n\n\ndef test_f{n}():\n    assert f{n}(0) == {n}\n"
            )
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "bench.py").write_text("print(1)\n")
    (repo / ".gitignore").write_text("build/\n__pycache__/\n")
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "initial")):
        git.git(repo, *args)
    return repo


def median_s(action: Callable[[], None], before: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        before()
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_target(Path(tmp), args.files)
        wt = Path(tmp) / "wt"
        git.open_worktree(repo, wt, "autoresearch/bench", git.head(repo))
        base = git.head(wt)
        protection = Protection(base, PROTECTED)

        def litter() -> None:  # what an agent and a test run leave behind
            (wt / "build").mkdir(exist_ok=True)
            (wt / "build" / "helpers.py").write_text("x = 1\n")
            (wt / "leftover.txt").write_text("x\n")
            (wt / "pkg" / "m1.py").write_text("def f1(x):\n    return x\n")

        old = median_s(lambda: git.reset_to(wt, base), litter, args.repeats)
        new = median_s(lambda: protection.pristine(wt, base), litter, args.repeats)
        print(f"prepare a measurement: old {old * 1000:.0f} ms, pristine {new * 1000:.0f} ms")

        counter = iter(range(10**6))

        def change() -> None:
            (wt / "pkg" / "m2.py").write_text(f"def f2(x):\n    return x + {next(counter)}\n")

        old = median_s(lambda: git.commit_all(wt, "plain"), change, args.repeats)
        new = median_s(lambda: protection.commit(wt, "guarded"), change, args.repeats)
        print(f"commit one change: commit_all {old * 1000:.0f} ms, guarded {new * 1000:.0f} ms")

        head = git.head(wt)
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

        def run_tests() -> None:
            subprocess.run(pytest, cwd=wt, capture_output=True, check=True)

        warm = median_s(run_tests, lambda: git.reset_to(wt, head), args.repeats)
        cold = median_s(run_tests, lambda: protection.pristine(wt, head), args.repeats)
        tests = args.files // 10
        print(
            f"pytest ({tests} tests, {args.files} modules): __pycache__ kept {warm:.2f} s, "
            f"after clean -ffdx {cold:.2f} s"
        )


if __name__ == "__main__":
    main()

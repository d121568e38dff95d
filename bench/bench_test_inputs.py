"""What logging the tests' inputs costs (report_plugin._Inputs: an `open` audit hook and a
finder first on `sys.meta_path` in every pytest run of the harness): one `run_tests` of a suite
whose every test reads a data file outside the test folders and calls a helper module, this
checkout against `--checkout PATH` (an older one, without the log; `git archive <commit> |
tar -x -C PATH` makes one). Prints the wall and CPU of the child processes, median of
`--repeats`, and how many inputs the run logged.

    python bench/bench_test_inputs.py [--tests 400] [--repeats 5] [--checkout /tmp/before]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_graded_run import ROOT, one_run  # noqa: E402


def suite(folder: Path, tests: int) -> Path:
    repo = folder / "suite"
    (repo / "tests").mkdir(parents=True)
    (repo / "fixtures").mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "testing_support.py").write_text("def same(a, b):\n    return a == b\n")
    per_file = 50
    for i in range(tests):
        (repo / "fixtures" / f"case_{i}.json").write_text(f'{{"a": {i}, "sum": {i + 1}}}\n')
    for n in range(0, tests, per_file):
        body = (
            "import json\nfrom pathlib import Path\n\nfrom calc import add\n"
            "from testing_support import same\n\n"
            + "".join(
                f"def test_{i}():\n"
                f"    case = json.loads(Path('fixtures/case_{i}.json').read_text())\n"
                "    assert same(add(case['a'], 1), case['sum'])\n\n"
                for i in range(n, min(n + per_file, tests))
            )
        )
        (repo / "tests" / f"test_{n // per_file}.py").write_text(body)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "suite"],
        cwd=repo,
        check=True,
    )
    return repo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkout", type=Path, help="an older checkout, for its figures")
    args = parser.parse_args()
    checkouts = {"this": ROOT}
    if args.checkout:
        checkouts["before"] = args.checkout
    with tempfile.TemporaryDirectory() as tmp:
        repo = suite(Path(tmp), args.tests)
        for _ in range(args.repeats):  # interleaved: a load change hits both alike
            for name, checkout in checkouts.items():
                checkouts_runs.setdefault(name, []).append(one_run(checkout, repo))
        for name, runs in checkouts_runs.items():
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            print(
                f"run  {name:8} {runs[0]['summary']:>12}  wall {wall:.3f} s  cpu {cpu:.3f} s "
                f"(median of {args.repeats})"
            )


checkouts_runs: dict[str, list[dict]] = {}

if __name__ == "__main__":
    main()

"""How long a jailed test run goes on after the code under test is imported: the margin a
fixed sleep in a forked child had before "the run is over" (the held-out attack
report-from-a-child-after-the-end slept 3 s; where the run outlasted it, the child's report
landed mid-run and the record named another layer).

Each run is the held-out target's shape (a broken `mean`, two tests) in the bwrap jail, as
the gate runs it; calc.py writes the time it was imported into the worktree, and the figure
is from then until `run_tests` returns (pytest's end, the jail torn down, the report read).

    python bench/bench_child_report_margin.py [--runs 8] [--busy N]

`--busy N` keeps N busy loops running alongside (a loaded machine). Prints each run's
figure, the largest, and how many times over the 3 s sleep that largest figure still was.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from conftest import CALC, make_repo  # noqa: E402

from autoresearch.gate import testrun  # noqa: E402
from autoresearch.safety import jail  # noqa: E402

TESTS = "from calc import add, mean\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
TESTS += "def test_mean():\n    assert mean([1, 2, 3]) == 2\n"
STAMP = "\nimport time as _t\n\nopen('imported', 'w').write(repr(_t.time()))\n"
SLEEP_S = 3.0


def _spin() -> None:
    while True:
        pass


def one_run() -> float:
    calc = CALC.replace("/ len", "/ 2 / len") + STAMP
    repo = make_repo(
        Path(tempfile.mkdtemp()) / "target", {"calc.py": calc, "tests/test_calc.py": TESTS}
    )
    box = jail.build_jail({"sandbox": "bwrap"}, repo)
    testrun.run_tests(f"{sys.executable} -m pytest", repo, stack="Python", timeout_s=300, jail=box)
    return time.time() - float((repo / "imported").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    if not jail.probe().works:
        sys.exit(f"no bwrap jail here: {jail.probe().reason}")
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    try:
        figures = [one_run() for _ in range(args.runs)]
    finally:
        for spinner in spinners:
            spinner.kill()
    print(f"import to end of the run, s ({args.busy} busy loops alongside):")
    print("  " + " ".join(f"{f:.2f}" for f in figures))
    top = max(figures)
    print(f"  largest {top:.2f} s: the {SLEEP_S:g} s sleep was {SLEEP_S / top:.1f}x it")


if __name__ == "__main__":
    main()

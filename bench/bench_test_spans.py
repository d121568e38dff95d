"""What naming a change's edited tests costs per test file (runner_overlay.edited, run for each
start test file a Go, Jest or cargo change touched): each test's code read to its own closing
bracket (code_spans.py) against the span to the next test's start before.

For each file given (a real suite's test file: google/uuid's uuid_test.go, vercel/ms's
tests.js, dtolnay/dissimilar's src/tests.rs), the change is one test appended; the call is
timed `--repeats` times in this checkout and in `--checkout PATH` (an older one: `git archive
<commit> | tar -x -C PATH`), alternating; medians in ms, and what each names as edited.

    python bench/bench_test_spans.py FILE... [--checkout /tmp/before] [--repeats 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TIMED = """
import json, re, sys, time
from autoresearch.gate import runner_overlay as ro
path, runner, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = open(path).read()
added = {"go": "\\nfunc TestAddedByBench(t *testing.T) {}\\n",
         "cargo": "\\n#[test]\\nfn added_by_bench() {}\\n",
         "jest": "\\ndescribe('b', () => {\\n  it('added', () => {});\\n});\\n"}[runner]
pattern = ro._TEST_START[runner]
names = {m.group("name") for m in pattern.finditer(start)}
sep = " > " if runner == "jest" else "::"
ids = {f"{path}{sep}{name}" if runner == "jest" else f"p{sep}{name}" for name in names}
times = []
for _ in range(repeats):
    t = time.perf_counter()
    found = ro.edited(runner, ids, path, start, start + added)
    times.append(time.perf_counter() - t)
print(json.dumps({"times": times, "tests": len(names), "edited": sorted(found)}))
"""

RUNNERS = {".go": "go", ".rs": "cargo", ".js": "jest", ".ts": "jest"}


def timed(checkout: Path, path: Path, repeats: int) -> dict:
    runner = RUNNERS[path.suffix]
    out = subprocess.run(
        [sys.executable, "-c", TIMED, str(path), runner, str(repeats)],
        cwd=checkout, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--checkout", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    checkouts = {"this": ROOT, **({"before": args.checkout} if args.checkout else {})}
    for path in args.files:
        path = path.resolve()
        times: dict[str, list[float]] = {name: [] for name in checkouts}
        seen: dict[str, dict] = {}
        for _ in range(2):  # A B A B
            for name, checkout in checkouts.items():
                seen[name] = timed(checkout, path, args.repeats)
                times[name] += seen[name]["times"]
        lines = len(path.read_text().splitlines())
        print(f"{path.name} ({lines} lines, {seen['this']['tests']} tests), one test appended:")
        for name in checkouts:
            median = statistics.median(times[name]) * 1000
            print(f"  {name:7} {median:7.2f} ms a call; named as edited: {seen[name]['edited']}")


if __name__ == "__main__":
    main()

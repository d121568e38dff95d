"""What Go's and Jest's canary (autoresearch/gate/runner_canary.py) costs a test run: go
compiles one more file into each tested package's test binary and runs two more tests, Jest
loads one more test file. (A command's HOME is a fresh scratch folder, so go's build and test
caches start empty every run with or without the canary: its new name each run loses no cache
hit here.) A small Go module (two tested packages) is tested with `run_tests("go test
./...")` and a small Jest project with `run_tests("<jest>")` and with `run_tests("npm test")`
(its test script: Jest), each with and without the canary; wall and the children's CPU,
median of `--rounds`; and what laying and taking back the canary costs the harness's own
process. `--only jest|npm|harness` runs those figures alone.

    python bench/bench_runner_canary.py [--rounds 5] [--jest .jest/node_modules/.bin/jest]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from autoresearch.gate import runner_canary, testrun

ROOT = Path(__file__).resolve().parent.parent
GO = {
    "go.mod": "module example.com/calc\n\ngo 1.19\n",
    "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    "calc_test.go": 'package calc\n\nimport "testing"\n\n'
    "func TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(1)\n\t}\n}\n",
    "sub/sub.go": "package sub\n\nfunc Sub(a, b int) int { return a - b }\n",
    "sub/sub_test.go": 'package sub\n\nimport "testing"\n\n'
    "func TestSub(t *testing.T) {\n\tif Sub(3, 2) != 1 {\n\t\tt.Fatal(1)\n\t}\n}\n",
}
JEST = {
    "package.json": '{"name": "calc", "version": "1.0.0"}\n',
    "add.test.js": 'test("adds", () => { expect(1 + 2).toBe(3); });\n',
    "sub.test.js": 'test("subtracts", () => { expect(3 - 2).toBe(1); });\n',
}


def one(command: str, repo: Path, stack: str) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = testrun.run_tests(command, repo, stack=stack, timeout_s=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, run.summary


def bench(
    label: str, files: dict[str, str], command: str, stack: str, name: str, rounds: int
) -> None:
    real: Callable = getattr(runner_canary, name)
    with tempfile.TemporaryDirectory(prefix="bench-runner-canary-") as tmp:
        repo = Path(tmp) / "project"
        for path, text in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        for how, lay in (("without canary", lambda cwd, command: None), ("with canary", real)):
            setattr(runner_canary, name, lay)
            one(command, repo, stack)  # warm: the toolchain's caches
            runs = [one(command, repo, stack) for _ in range(rounds)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"{label:5} {how:15} wall {wall:5.2f} s, CPU {cpu:5.2f} s ({runs[0][2]})")
    setattr(runner_canary, name, real)


def harness(label: str, files: dict[str, str], lay: Callable, command: str, n: int = 200) -> None:
    """What laying the canary and taking it back costs the harness's own process (choosing
    its names, reading the project's test names, writing, giving times back), median of `n`."""
    with tempfile.TemporaryDirectory(prefix="bench-runner-canary-") as tmp:
        repo = Path(tmp) / "project"
        for path, text in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        times = []
        for _ in range(n):
            start = time.perf_counter()
            runner_canary.take_back(lay(repo, command))
            times.append(time.perf_counter() - start)
    print(f"{label:5} lay + take_back in the harness: {statistics.median(times) * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jest", default=str(ROOT / ".jest" / "node_modules" / ".bin" / "jest"))
    parser.add_argument("--only", choices=("jest", "npm", "harness"))
    args = parser.parse_args()
    harness("go", GO, runner_canary.lay_go, "go test ./...")
    harness("jest", JEST, runner_canary.lay_jest, "jest")
    if args.only == "harness":
        return
    if args.only == "npm":
        npm_bench(args.jest, args.rounds)
        return
    if args.only == "jest":
        bench("jest", JEST, args.jest, "Node/TS", "lay_jest", args.rounds)
        return
    if shutil.which("go"):
        bench("go", GO, "go test ./...", "Go", "lay_go", args.rounds)
    else:
        print("go: not installed")
    if Path(args.jest).exists():
        bench("jest", JEST, args.jest, "Node/TS", "lay_jest", args.rounds)
    else:
        print(f"jest: not at {args.jest}")
    npm_bench(args.jest, args.rounds)


def npm_bench(jest: str, rounds: int) -> None:
    if not (Path(jest).exists() and shutil.which("npm")):
        print("npm test: no npm or no Jest")
        return
    package = json.dumps({"name": "calc", "version": "1.0.0", "scripts": {"test": jest}})
    bench("npm", {**JEST, "package.json": package}, "npm test", "Node/TS", "lay_jest", rounds)


if __name__ == "__main__":
    main()

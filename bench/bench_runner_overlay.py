"""What grading a Go or Jest run with the start's tests costs a gate (overlay.py,
runner_overlay.py): on a change that touched the start's test files, the decisive run with the
start's files laid over it is one more run of the suite; on a change to source only, the plan
that finds nothing to lay.

For each runner, a temp project (`--files` test files of `--tests` tests each) and two changes
to it (one editing a test file, one editing source only); the gate's runs of each as finalize
runs them (the change as it left its files, then, where the plan lays anything, the graded
run), wall and CPU (the process and its children), for this checkout against `--checkout PATH`
(an older one: `git archive <commit> | tar -x -C PATH` makes one). Runs alternate between the
checkouts (A B A B) on the shared machine; the figures are medians.

    python bench/bench_runner_overlay.py [--files 20] [--tests 20] [--repeats 5]
        [--checkout /tmp/before] [--runner go|jest]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autoresearch.gate import testrun  # noqa: E402
from autoresearch.safety import git as harness_git  # noqa: E402

JEST = Path(os.environ.get("JEST") or ROOT / ".jest" / "node_modules" / ".bin" / "jest")

# The gate's runs on the worktree, as finalize.graded_test makes them.
GATE = """
import json, resource, sys, time
from pathlib import Path
from autoresearch.gate import overlay, testrun
place, start, command, stack = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
record = json.loads(sys.argv[5])
for key in ("failing_ids", "passing_ids", "skipped_ids"):
    record[key] = frozenset(record[key]) if record[key] is not None else None
reference = testrun.TestRun(**record)
def run():
    return testrun.run_tests(command, place, stack=stack, timeout_s=600, uncached=True)
def cpu():
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
c, t = cpu(), time.perf_counter()
as_left = run()
laid = overlay.plan(place, start, reference)
graded = None
if laid is not None and not laid.empty:
    graded = overlay.run_laid(place, laid, run, command)
wall, used = time.perf_counter() - t, cpu() - c
print(json.dumps({"wall": wall, "cpu": used, "as_left": as_left.summary,
                  "graded": graded.summary if graded else None}))
"""


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def go_project(repo: Path, files: int, tests: int) -> dict[str, str]:
    (repo / "go.mod").write_text("module example.com/calc\n\ngo 1.19\n")
    (repo / "calc.go").write_text("package calc\n\nfunc Add(a, b int) int { return a + b }\n")
    for f in range(files):
        body = "".join(
            f"func TestAdd{f}_{i}(t *testing.T) {{\n\tif Add({i}, 1) != {i + 1} {{\n"
            f'\t\tt.Fatal("no")\n\t}}\n}}\n\n'
            for i in range(tests)
        )
        (repo / f"add{f}_test.go").write_text(f'package calc\n\nimport "testing"\n\n{body}')
    extra = 'func TestMore(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal("no")\n\t}\n}\n'
    return {
        "test": "add0_test.go",
        "test_text": (repo / "add0_test.go").read_text() + extra,
        "source": "calc.go",
        "source_text": "package calc\n\nfunc Add(a, b int) int { return b + a }\n",
    }


def jest_project(repo: Path, files: int, tests: int) -> dict[str, str]:
    (repo / "package.json").write_text(json.dumps({"name": "calc", "version": "1.0.0"}))
    (repo / "calc.js").write_text("exports.add = (a, b) => a + b;\n")
    for f in range(files):
        body = "".join(
            f'test("adds {i}", () => {{ expect(add({i}, 1)).toBe({i + 1}); }});\n'
            for i in range(tests)
        )
        (repo / f"add{f}.test.js").write_text(f'const {{ add }} = require("./calc");\n{body}')
    return {
        "test": "add0.test.js",
        "test_text": (repo / "add0.test.js").read_text()
        + 'test("more", () => { expect(add(2, 2)).toBe(4); });\n',
        "source": "calc.js",
        "source_text": "exports.add = (a, b) => b + a;\n",
    }


RUNNERS = {
    "go": ("go test ./...", "Go", go_project),
    "jest": (f"{JEST} --ci", "Node/TS", jest_project),
}


def gate(checkout: Path, place: Path, start: str, command: str, stack: str, ref: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = subprocess.run(
        [sys.executable, "-c", GATE, str(place), start, command, stack, json.dumps(ref)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the gate's run failed under {checkout}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def reference_of(place: Path, command: str, stack: str) -> dict:
    run = testrun.run_tests(command, place, stack=stack, timeout_s=600, uncached=True)
    record = {k: getattr(run, k) for k in run.__dataclass_fields__}
    for key in ("failing_ids", "passing_ids", "skipped_ids", "test_inputs"):
        record[key] = sorted(record[key]) if record[key] is not None else None
    return record


def bench(runner: str, checkouts: dict[str, Path], files: int, tests: int, repeats: int) -> None:
    command, stack, make = RUNNERS[runner]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        change = make(repo, files, tests)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "start")
        start = git(repo, "rev-parse", "HEAD")
        ref = reference_of(repo, command, stack)
        for kind in ("test", "source"):
            place = Path(tmp) / kind
            harness_git.add_detached_worktree(repo, place, start)  # as the harness makes one
            (place / change[kind]).write_text(change[f"{kind}_text"])
            git(place, "commit", "-qam", kind)
            runs: dict[str, list[dict]] = {name: [] for name in checkouts}
            for _ in range(repeats):
                for name, checkout in checkouts.items():
                    runs[name].append(gate(checkout, place, start, command, stack, ref))
            for name, got in runs.items():
                wall = statistics.median(r["wall"] for r in got)
                cpu = statistics.median(r["cpu"] for r in got)
                graded = got[0]["graded"] or "none"
                print(
                    f"{runner:4} {files * tests} tests, change to {kind:6} {name:6}: "
                    f"wall {wall:.2f} s  cpu {cpu:.2f} s  (as left: {got[0]['as_left']}; "
                    f"graded: {graded}; median of {repeats})"
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkout", type=Path, help="an older checkout, for its figures")
    parser.add_argument("--runner", choices=sorted(RUNNERS), action="append")
    args = parser.parse_args()
    checkouts = ({"before": args.checkout} if args.checkout else {}) | {"after": ROOT}
    for runner in args.runner or sorted(RUNNERS):
        if runner == "go" and shutil.which("go") is None:
            print("go: not installed, skipped")
            continue
        if runner == "jest" and not JEST.exists():
            print(f"jest: no {JEST} (make it, or set JEST), skipped")
            continue
        bench(runner, checkouts, args.files, args.tests, args.repeats)


if __name__ == "__main__":
    main()

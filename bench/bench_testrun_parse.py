"""How long reading a test run's results takes: pytest JUnit XML, `go test -json`, cargo's text.

The outputs are generated in the shape each tool writes (pytest 9 xunit1, go 1.19 -json, cargo
1.95), one test in a hundred failing, so only the reading is timed, not the run. Prints the
median milliseconds per read for each size.

    python bench/bench_testrun_parse.py [--sizes 1000 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from autoresearch.gate import runner_reports
from autoresearch.session.stack import parse_test_output


def junit_xml(n: int) -> str:
    cases = []
    for i in range(n):
        head = (
            f'<testcase classname="tests.test_many.TestMany" name="test_many[{i}]" '
            f'file="tests/test_many.py" line="3" time="0.001"'
        )
        if i % 100 == 0:
            cases.append(
                f'{head}><failure message="assert 0">def test_many(i):\nE assert 0'
                "</failure></testcase>"
            )
        else:
            cases.append(f"{head} />")
    failed = len(range(0, n, 100))
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
        f'<testsuite name="pytest" errors="0" failures="{failed}" skipped="0" tests="{n}">'
        + "".join(cases)
        + "</testsuite></testsuites>"
    )


def go_json(n: int) -> str:
    lines = []
    for i in range(n):
        base = {"Package": "example.com/m/a", "Test": f"Test{i}"}
        verdict = "fail" if i % 100 == 0 else "pass"
        lines.append(json.dumps({"Action": "run", **base}))
        lines.append(json.dumps({"Action": "output", **base, "Output": f"=== RUN   Test{i}\n"}))
        word = verdict.upper()
        lines.append(json.dumps({"Action": "output", **base, "Output": f"--- {word}: Test{i}\n"}))
        lines.append(json.dumps({"Action": verdict, **base, "Elapsed": 0}))
    lines.append(json.dumps({"Action": "fail", "Package": "example.com/m/a", "Elapsed": 1.0}))
    return "\n".join(lines) + "\n"


def cargo_text(n: int) -> str:
    failing = [f"tests::t{i}" for i in range(0, n, 100)]
    lines = ["     Running unittests src/lib.rs (target/debug/deps/calc-c6626fb655a8d231)", ""]
    lines.append(f"running {n} tests")
    for i in range(n):
        lines.append(f"test tests::t{i} ... {'FAILED' if i % 100 == 0 else 'ok'}")
    lines += ["", "failures:", "", "failures:", *(f"    {name}" for name in failing), ""]
    lines.append(
        f"test result: FAILED. {n - len(failing)} passed; {len(failing)} failed; 0 ignored; "
        "0 measured; 0 filtered out; finished in 1.00s"
    )
    return "\n".join(lines) + "\n"


def pytest_text(n: int) -> str:
    failed = len(range(0, n, 100))
    lines = [f"FAILED tests/test_many.py::test_many[{i}] - assert 0" for i in range(0, n, 100)]
    return "\n".join(lines) + f"\n{failed} failed, {n - failed} passed in 9.00s\n"


def median_ms(read, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'tests':>7}  {'junit ms':>9}  {'go-json ms':>10}  {'cargo ms':>9}  {'regex ms':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for n in args.sizes:
            xml = Path(folder) / f"junit-{n}.xml"
            xml.write_text(junit_xml(n))
            go, cargo, text = go_json(n), cargo_text(n), pytest_text(n)
            # Check the reads are right before timing them.
            assert len(runner_reports.read_junit([xml]).failed) == len(range(0, n, 100))
            assert len(runner_reports.read_go_json(go).passed) == n - len(range(0, n, 100))
            assert len(runner_reports.read_cargo(cargo).failed) == len(range(0, n, 100))
            junit = median_ms(lambda xml=xml: runner_reports.read_junit([xml]), args.repeats)
            gojs = median_ms(lambda go=go: runner_reports.read_go_json(go), args.repeats)
            crg = median_ms(lambda cargo=cargo: runner_reports.read_cargo(cargo), args.repeats)
            rgx = median_ms(lambda text=text: parse_test_output(text, 1), args.repeats)
            print(f"{n:>7}  {junit:>9.1f}  {gojs:>10.1f}  {crg:>9.1f}  {rgx:>9.1f}")


if __name__ == "__main__":
    main()

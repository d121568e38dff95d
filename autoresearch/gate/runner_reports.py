"""The test runners' own reports read into test ids by fate (`Tally`): pytest's JUnit XML,
`go test -json`, cargo's text, Jest's `--json`."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from junitparser import Attr, Error, Failure, JUnitXml, JUnitXmlError, TestCase, TestSuite

# A terminal's colour codes in a runner's text output.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Tally:
    """Test ids by what happened to them in one run."""

    source: str
    passed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    errored: set[str] = field(default_factory=set)  # errors in setup or teardown
    skipped: set[str] = field(default_factory=set)
    # What failed without being a test: a Go package that did not build, a cargo test binary that
    # crashed, a Jest suite that did not load. Counted and compared as errored tests.
    broken: set[str] = field(default_factory=set)
    collection_errors: int = 0
    ids_complete: bool = True  # False when a failure was counted but not named
    text: str | None = None  # readable output when the raw output is machine-readable
    # (passed, failed, skipped) as pytest's summary line counts them (errors with failed)
    stream_counts: tuple[int, int, int] | None = None
    # Why the report cannot be trusted (a second report after the runner's, one cut short):
    # the run is then no pass, whatever its exit code.
    problem: str | None = None
    # Files of the root the tests read or imported, as (how, path): pytest's stream only
    # (report_plugin._Inputs); the overlay lays the start's over a change.
    inputs: set[tuple[str, str]] = field(default_factory=set)

    def settle(self) -> None:
        # One id, one fate: a test that passed its call and then errored in teardown failed.
        self.errored -= self.failed
        self.errored |= self.broken
        bad = self.failed | self.errored
        self.skipped -= bad
        self.passed -= bad | self.skipped

    @property
    def tests_seen(self) -> bool:
        return bool(self.passed or self.failed or self.skipped or (self.errored - self.broken))


class _PytestCase(TestCase):
    """pytest's xunit1 test case also names the file the test is in."""

    file = Attr()


def read_junit(reports: list[bytes]) -> Tally | None:
    """pytest's JUnit XML reports; ids as pytest's node ids
    (`tests/test_x.py::TestK::test_y[1]`)."""
    tally = Tally("junit")
    read_any = False
    for report in reports:
        try:
            xml = JUnitXml.fromstring(report)
        except (JUnitXmlError, SyntaxError, ValueError):
            continue  # killed mid-write, or not ours: the text fallback still has the summary
        read_any = True
        suites = [xml] if isinstance(xml, TestSuite) else list(xml)
        for suite in suites:
            for case in suite.iterchildren(_PytestCase):
                _tally_case(tally, case)
    if not read_any:
        return None
    tally.settle()
    return tally


def _tally_case(tally: Tally, case: _PytestCase) -> None:
    results = case.result  # each property of TestCase walks the children again: read them once
    if any(isinstance(r, Error) and r.message == "collection failure" for r in results):
        tally.collection_errors += 1
        tally.errored.add(f"{case.file or case.name} [collection error]")
        return
    test_id = _pytest_id(case)
    if any(isinstance(r, Failure) for r in results):
        tally.failed.add(test_id)
    elif any(isinstance(r, Error) for r in results):
        tally.errored.add(test_id)
    elif results:  # only Skipped is left
        tally.skipped.add(test_id)
    else:
        tally.passed.add(test_id)


def _pytest_id(case: _PytestCase) -> str:
    classname, name, file = case.classname or "", case.name or "", case.file
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else None
    if module and classname.startswith(module + "."):
        return "::".join([file, *classname[len(module) + 1 :].split("."), name])
    return f"{file}::{name}"


def read_go_json(output: str) -> Tally | None:
    """`go test -json` events; ids are `package::Test/subtest`, a package that failed without a
    failing test (build failure, panic in TestMain) is `package [build failed]` or
    `package [package failed]`."""
    tally = Tally("go-json")
    text: list[str] = []
    failed_packages: dict[str, str] = {}
    failing_packages: set[str] = set()
    events = 0
    # A package's events end with its own pass, fail or skip: anything of it after that was
    # written by something else (a second report), and a package without it was cut short.
    opened: set[str] = set()
    ended: set[str] = set()
    for line in output.splitlines():
        event = _json_object(line) if line.startswith("{") else None
        if event is None or "Action" not in event:
            text.append(line)
            build = _GO_BUILD_FAILED.match(line)
            if build:
                failed_packages[build.group(1)] = f"[{build.group(2)} failed]"
            continue
        events += 1
        action, package, test = event["Action"], event.get("Package", ""), event.get("Test")
        if package and package in ended and tally.problem is None:
            tally.problem = (
                f"the test report goes on after package {package} ended (a second report)"
            )
        if package and not test and action in ("pass", "fail", "skip"):
            ended.add(package)
        elif package:
            opened.add(package)
        if action in ("output", "build-output"):  # go 1.24+ reports compile errors as events
            text.append(str(event.get("Output", "")).rstrip("\n"))
        elif test and action in ("pass", "fail", "skip"):
            test_id = f"{package}::{test}"
            {"pass": tally.passed, "fail": tally.failed, "skip": tally.skipped}[action].add(test_id)
            if action == "fail":
                failing_packages.add(package)
        elif action == "fail" and package:
            failed_packages.setdefault(
                package, "[build failed]" if event.get("FailedBuild") else "[package failed]"
            )
    if not events and not failed_packages:
        return None
    cut = sorted(opened - ended)
    if cut and tally.problem is None:
        tally.problem = f"the test report stops before package {cut[0]} ended (cut short)"
    for package, how in failed_packages.items():
        if package not in failing_packages:
            tally.broken.add(f"{package} {how}")
    tally.text = "\n".join(text)
    tally.settle()
    return tally


_GO_BUILD_FAILED = re.compile(r"^FAIL\s+(\S+)\s+\[(build|setup) failed\]")


def _json_object(text: str | bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_CARGO_RUNNING = re.compile(r"^\s*Running (?:unittests )?(\S+)(?: \((.+)\))?\s*$")
_CARGO_DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)\s*$")
_CARGO_LINE = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)\b")
_CARGO_RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
_CARGO_LISTED = re.compile(r"^    (\S.*?)\s*$")
_CARGO_COUNT = re.compile(r"^running (\d+) tests?$")
_CARGO_CAPTURED = re.compile(r"^---- .+ std(?:out|err) ----$")
_DOCTEST_LINE = re.compile(r" \(line \d+\)$")


def read_cargo(output: str) -> Tally | None:
    """`cargo test`'s `test name ... ok|FAILED|ignored` lines, one section per test binary; ids are
    `<binary> <source>::<test>`. A binary that stops without its result line (a crash) fails as
    `<binary> <source> [crashed]`. A section's lines must agree with its own `running N tests`,
    name each test once and end in one result line: else a second report was written into
    the output (`Tally.problem`)."""
    tally = Tally("cargo")
    label: str | None = None
    has_result = True
    named_failures = 0
    listing = captured = False
    sections = 0
    expected: int | None = None
    lines_seen = 0
    named: set[str] = set()
    binaries: dict[str, str] = {}  # label -> the build hash of the binary it first named

    def close() -> None:
        if label is not None and not has_result:
            tally.broken.add(f"{label} [crashed]")

    def problem(why: str) -> None:
        tally.problem = tally.problem or why

    for line in ANSI.sub("", output).splitlines():
        running, doc = _CARGO_RUNNING.match(line), _CARGO_DOCTESTS.match(line)
        if running or doc:
            close()
            sections += 1
            label = f"doc-tests {doc.group(1)}" if doc else _cargo_binary(*running.groups())
            if running:
                label = _cargo_distinct(label, running.group(2), binaries)
            has_result, named_failures, listing, captured = False, 0, False, False
            expected, lines_seen = None, 0
            continue
        if label is None:
            continue
        if line == "failures:":
            listing, captured = True, False
            continue
        if line == "successes:":  # `--show-output`: the passing tests' output comes first
            listing = captured = False
            continue
        if _CARGO_CAPTURED.match(line):
            captured = True  # a test's own output, shown until the list of failures
            continue
        if captured and not _CARGO_RESULT.match(line):
            continue
        captured = False
        listed = _CARGO_LISTED.match(line) if listing else None
        if listed and not listed.group(1).startswith("----"):
            test_id = _cargo_id(label, listed.group(1))
            if test_id not in tally.failed:
                tally.failed.add(test_id)
                named_failures += 1
            continue
        listing = False
        count = _CARGO_COUNT.match(line)
        if count:
            if expected is not None or has_result:
                problem(f"a second test report was written into {label}'s (a second report)")
            expected = int(count.group(1))
            continue
        result = _CARGO_RESULT.match(line)
        if result:
            if has_result:
                problem(f"a second test result was written for {label} (a second report)")
            has_result = True
            if int(result.group(2)) > named_failures:
                tally.ids_complete = False  # failures the output did not name
            if expected is not None and lines_seen != expected:
                problem(f"{label} said it runs {expected} tests and reported {lines_seen}")
            continue
        test = _CARGO_LINE.match(line)
        if test:
            test_id = _cargo_id(label, test.group(1))
            if test_id in named or has_result:
                problem(f"{test_id} was reported twice (a second report)")
            named.add(test_id)
            lines_seen += 1
            if test.group(2) == "FAILED":
                if test_id not in tally.failed:
                    tally.failed.add(test_id)
                    named_failures += 1
            else:
                (tally.passed if test.group(2) == "ok" else tally.skipped).add(test_id)
    close()
    if not sections:
        return None
    tally.settle()
    return tally


def _cargo_binary(source: str, executable: str | None) -> str:
    if executable is None:  # older cargo names only the executable
        return re.sub(r"-[0-9a-f]{16}$", "", Path(source).name)
    return f"{re.sub(r'-[0-9a-f]{16}$', '', Path(executable).name)} {source}"


def _cargo_distinct(label: str, executable: str | None, binaries: dict[str, str]) -> str:
    """`label`, or where another binary of this run had it (two members of a workspace with
    `tests/it.rs` each: cargo names the source from the member's root), `label` and the
    binary's build hash, which stays the same from one run to the next of the member."""
    found = re.search(r"-([0-9a-f]{16})$", Path(executable).name) if executable else None
    build = found.group(1) if found else ""
    first = binaries.setdefault(label, build)
    return label if first == build else f"{label} [{build[:8]}]"


def _cargo_id(label: str, test: str) -> str:
    # A doc-test's name carries its line number, which moves whenever code above it does.
    return f"{label}::{_DOCTEST_LINE.sub('', test)}"


def read_jest_reports(data: bytes, cwd: Path, sessions: int = 1) -> Tally | None:
    """Jest's `--json` reports as they came through the report pipe: one JSON document per
    jest the command runs (`sessions`), each whole. A cut document or one too many (something
    wrote after Jest) is a report that cannot be trusted (`Tally.problem`)."""
    text = data.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    documents: list[bytes] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            tally = Tally("jest-json", problem="the Jest report stops before its end (cut short)")
            return tally
        documents.append(json.dumps(value).encode())
    if not documents:
        return None
    if len(documents) > sessions:
        return Tally(
            "jest-json", problem="a Jest report was written after Jest's own (a second report)"
        )
    return read_jest_json(documents, cwd)


def read_jest_json(reports: list[bytes], cwd: Path) -> Tally | None:
    """Jest's `--json` reports; ids are `file > describe > test`, a suite that failed to load
    is `file [suite failed to run]`."""
    tally = Tally("jest-json")
    read_any = False
    for data in reports:
        report = _json_object(data)
        if report is None:
            continue
        read_any = True
        for suite in report.get("testResults") or []:
            name = str(suite.get("name", ""))
            file = os.path.relpath(name, cwd) if os.path.isabs(name) else name
            assertions = suite.get("assertionResults") or []
            if suite.get("status") == "failed" and not assertions:
                tally.broken.add(f"{file} [suite failed to run]")
            for test in assertions:
                test_id = " > ".join([file, *test.get("ancestorTitles", []), test.get("title", "")])
                status = test.get("status")
                if status == "passed":
                    tally.passed.add(test_id)
                elif status == "failed":
                    tally.failed.add(test_id)
                else:  # pending, skipped, todo, disabled
                    tally.skipped.add(test_id)
    if not read_any:
        return None
    tally.settle()
    return tally


@dataclass
class Streamed:
    """What the harness's pytest plugin streamed (report_plugin.py): the tally, and why the
    stream cannot be trusted when it cannot (`problem`: the run is then no pass)."""

    tally: Tally | None
    problem: str | None = None  # a second or cut report, a line not the plugin's
    tampered: str | None = None  # the canaries did not come out as they must
    unchecked: str | None = None  # ids and the runner's count of outcomes disagree
    exitstatus: int | None = None


def read_stream(data: bytes, must_pass: str, must_fail: str, sessions: int = 1) -> Streamed:
    """The plugin's stream; ids are pytest's node ids exactly (an inherited test keeps the
    class it ran in, a parametrized one its parameters). None for the tally when the plugin
    never started (pytest did not load it). `sessions`: how many pytest runs the command holds
    (each streams start to end); more is a second report."""
    lines = data.decode("utf-8", errors="replace").splitlines()
    records: list[dict[str, Any]] = []
    for line in lines:
        record = _json_object(line)
        if record is None or not isinstance(record.get("t"), str):
            return Streamed(None, problem="the test report holds a line that is not a report")
        records.append(record)
    if not records:
        return Streamed(None)
    kinds = [r["t"] for r in records]
    starts = [i for i, kind in enumerate(kinds) if kind == "start"]
    if not starts or starts[0] != 0 or len(starts) > sessions:
        return Streamed(None, problem="a second test report was written into the run's report")
    for begin, stop in zip(starts, [*starts[1:], len(kinds)], strict=True):
        ends = [i for i in range(begin, stop) if kinds[i] == "end"]
        if not ends:
            return Streamed(None, problem="the test report stops before its end (cut short)")
        if ends != [stop - 1]:
            return Streamed(None, problem="the test report goes on after its end (a second report)")
    tally = Tally("pytest-stream")
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    outcomes = 0  # one per test the runner ran: its call, or a setup that did not pass
    canaries: list[dict[str, str]] = []
    failed_subtests: set[str] = set()
    changed: str | None = None
    for record in records:
        kind, test_id = record["t"], str(record.get("id", ""))
        outcome, when = record.get("outcome"), record.get("when")
        if kind == "start":
            canaries.append({})
        elif kind == "collect_error":
            tally.collection_errors += 1
            tally.errored.add(f"{test_id} [collection error]")
            counts["failed"] += 1
        elif kind == "collect_skip":
            counts["skipped"] += 1  # counted by pytest's summary, no test id of its own
        elif kind == "canary":
            canaries[-1][test_id] = str(outcome)
        elif kind == "changed":
            changed = str(record.get("what", ""))[:200]
        elif kind == "input":
            tally.inputs.add((str(record.get("how", "")), str(record.get("path", ""))))
        elif kind == "report" and record.get("sub") and outcome in ("failed", "skipped"):
            # A subtest: not a test of its own. pytest's summary counts a failed one, and a
            # skipped one where it prints subtests; a failed one fails its test, whatever
            # that test's own call says.
            if outcome == "failed" or record.get("counted", True):
                counts[outcome] += 1
            if outcome == "failed":
                failed_subtests.add(test_id)
        elif kind == "report" and record.get("sub"):
            continue  # a subtest that passed: pytest's summary does not count it
        elif kind == "report" and outcome in ("passed", "failed", "skipped"):
            if when == "call" and outcome == "passed" and test_id in failed_subtests:
                outcome = "failed"
            if when == "call" or (when == "setup" and outcome != "passed"):
                outcomes += 1
            if when != "call" and outcome == "failed":
                tally.errored.add(test_id)
                counts["failed"] += 1
            elif when == "call" or outcome == "skipped":
                {"passed": tally.passed, "failed": tally.failed, "skipped": tally.skipped}[
                    outcome
                ].add(test_id)
                counts[outcome] += 1
    streamed = Streamed(tally, exitstatus=records[-1].get("exitstatus"))
    wrong = [c for c in canaries if c.get(must_pass) != "passed" or c.get(must_fail) != "failed"]
    if wrong:
        seen = ", ".join(f"{k}: {v}" for k, v in sorted(wrong[0].items())) or "none reported"
        streamed.tampered = (
            "the harness's canary tests did not come out as they must (one must fail, one "
            f"must pass; {seen}): something in the run rewrites test outcomes"
        )
    if changed is not None and not streamed.tampered:
        streamed.tampered = (
            f"the test runner's own code was changed during the run ({changed}): something "
            "in the run rewrites test outcomes"
        )
    ran = tally.passed | tally.failed | tally.skipped | tally.errored
    named = len(ran - tally.broken) - tally.collection_errors
    if outcomes != named:
        streamed.unchecked = (
            f"the runner reported {outcomes} test outcomes for {named} test ids, so which "
            "tests ran cannot be told by id"
        )
    tally.stream_counts = (counts["passed"], counts["failed"], counts["skipped"])
    tally.settle()
    return streamed

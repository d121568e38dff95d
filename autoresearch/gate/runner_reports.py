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
_DOCTEST_LINE = re.compile(r" \(line \d+\)$")


def read_cargo(output: str) -> Tally | None:
    """`cargo test`'s `test name ... ok|FAILED|ignored` lines, one section per test binary; ids are
    `<binary> <source>::<test>`. A binary that stops without its result line (a crash) fails as
    `<binary> <source> [crashed]`."""
    tally = Tally("cargo")
    label: str | None = None
    has_result = True
    named_failures = 0
    listing = False
    sections = 0

    def close() -> None:
        if label is not None and not has_result:
            tally.broken.add(f"{label} [crashed]")

    for line in ANSI.sub("", output).splitlines():
        running, doc = _CARGO_RUNNING.match(line), _CARGO_DOCTESTS.match(line)
        if running or doc:
            close()
            sections += 1
            label = f"doc-tests {doc.group(1)}" if doc else _cargo_binary(*running.groups())
            has_result, named_failures, listing = False, 0, False
            continue
        if label is None:
            continue
        if line == "failures:":
            listing = True
            continue
        listed = _CARGO_LISTED.match(line) if listing else None
        if listed and not listed.group(1).startswith("----"):
            test_id = _cargo_id(label, listed.group(1))
            if test_id not in tally.failed:
                tally.failed.add(test_id)
                named_failures += 1
            continue
        listing = False
        result = _CARGO_RESULT.match(line)
        if result:
            has_result = True
            if int(result.group(2)) > named_failures:
                tally.ids_complete = False  # failures the output did not name
            continue
        test = _CARGO_LINE.match(line)
        if test:
            test_id = _cargo_id(label, test.group(1))
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


def _cargo_id(label: str, test: str) -> str:
    # A doc-test's name carries its line number, which moves whenever code above it does.
    return f"{label}::{_DOCTEST_LINE.sub('', test)}"


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

"""Go's, cargo's and Jest's reports come through a channel the tested process cannot rewrite.

The attacks: a process of the test run that, at its exit, rewrites the report the runner wrote
before (truncating the output file it shares, or the Jest output file), and one that writes a
second report after the runner's. cargo runs for real where installed; `go` and `jest` are not
installed here, so a stand-in script plays the runner and its tested process at once (its
output has the runner's shape; what it does at exit is what a test can do through
/proc/<runner>/fd/1 or its own inherited descriptor). The real-runner tests of test_testrun.py
skip where the tool is missing.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import make_repo

from autoresearch.gate import testrun
from autoresearch.gate.runner_reports import read_cargo, read_go_json, read_jest_reports
from autoresearch.gate.testrun import FAILED, PASSED
from autoresearch.safety import jail

needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def run(command: str, repo: Path, stack: str) -> testrun.TestRun:
    return testrun.run_tests(command, repo, stack=stack, timeout_s=300)


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """A folder first on PATH, for a stand-in runner."""
    folder = tmp_path / "fakebin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:{Path(sys.executable).parent}:/usr/bin:/bin")
    return folder


def script(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text)
    (folder / name).chmod(0o755)


# --- go ---

GO_EVENTS = [
    {"Action": "start", "Package": "m/a"},
    {"Action": "run", "Package": "m/a", "Test": "TestOk"},
    {"Action": "pass", "Package": "m/a", "Test": "TestOk", "Elapsed": 0},
    {"Action": "run", "Package": "m/a", "Test": "TestBroken"},
    {"Action": "output", "Package": "m/a", "Test": "TestBroken", "Output": "--- FAIL\n"},
    {"Action": "fail", "Package": "m/a", "Test": "TestBroken", "Elapsed": 0},
    {"Action": "fail", "Package": "m/a", "Elapsed": 0},
]
HONEST = [
    e if e.get("Test") != "TestBroken" or e["Action"] != "fail" else e | {"Action": "pass"}
    for e in GO_EVENTS[:-1]
] + [{"Action": "pass", "Package": "m/a", "Elapsed": 0}]

# The system's python where there is one: the jail shows /usr, not every interpreter's home.
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
GO_REWRITES = f"""#!{PYTHON}
import json, os, sys
events = {GO_EVENTS!r}
for e in events:
    print(json.dumps(e), flush=True)
# A test of the run, at its exit, rewrites what the runner wrote before: through its own
# descriptor when it is a file, else it can only add.
fake = "".join(json.dumps(e) + "\\n" for e in {HONEST!r}).encode()
try:
    os.ftruncate(1, 0)
    os.lseek(1, 0, os.SEEK_SET)
except OSError:
    pass
os.write(1, fake)
sys.exit(1)
"""


def test_a_go_report_rewritten_at_exit_does_not_hide_a_failing_test(tmp_path, fake_bin):
    script(fake_bin, "go", GO_REWRITES)
    repo = make_repo(tmp_path / "g", {"go.mod": "module m\n"})
    result = run("go test ./...", repo, "Go")
    assert result.outcome == FAILED
    assert "m/a::TestBroken" not in (result.passing_ids or set())
    assert "second report" in result.cause


def test_go_events_after_a_package_ended_are_a_second_report():
    lines = [json.dumps(e) for e in GO_EVENTS]
    lines.append(json.dumps({"Action": "pass", "Package": "m/a", "Test": "TestBroken"}))
    tally = read_go_json("\n".join(lines))
    assert tally.problem and "second report" in tally.problem


def test_a_go_package_without_its_end_is_a_cut_report():
    tally = read_go_json("\n".join(json.dumps(e) for e in GO_EVENTS[:-1]))
    assert tally.problem and "cut short" in tally.problem


def test_a_whole_go_report_has_no_problem():
    tally = read_go_json("\n".join(json.dumps(e) for e in GO_EVENTS))
    assert tally.problem is None
    assert tally.failed == {"m/a::TestBroken"}


# --- cargo ---

CARGO_TOML = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
LIB_RS = """\
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    #[test]
    fn adds() { assert_eq!(super::add(1, 2), 3); }
    #[test]
    fn broken() { assert_eq!(super::add(1, 2), 4); }
}
"""
# A test in the last test binary: it shares cargo's stdout, and rewrites what came before.
REWRITER_RS = r"""
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::io::FromRawFd;

#[test]
fn rewrites_the_report() {
    let mut out = unsafe { std::fs::File::from_raw_fd(1) };
    let _ = out.set_len(0);
    let _ = out.seek(SeekFrom::Start(0));
    let _ = out.write_all(concat!(
        "     Running unittests src/lib.rs (target/debug/deps/calc-0123456789abcdef)\n\n",
        "running 2 tests\ntest tests::adds ... ok\ntest tests::broken ... ok\n\n",
        "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\n",
    ).as_bytes());
    std::mem::forget(out);
}
"""


@pytest.mark.e2e
@needs_cargo
def test_a_cargo_report_rewritten_by_a_test_does_not_hide_a_failing_test(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {"Cargo.toml": CARGO_TOML, "src/lib.rs": LIB_RS, "tests/zz.rs": REWRITER_RS},
    )
    result = run("cargo test", repo, "Rust")
    assert result.outcome == FAILED
    assert "calc src/lib.rs::tests::broken" not in (result.passing_ids or set())


CARGO_SECTION = """\
     Running unittests src/lib.rs (target/debug/deps/calc-0123456789abcdef)

running 2 tests
test tests::adds ... ok
test tests::broken ... FAILED

failures:

---- tests::broken stdout ----
test tests::broken ... ok
thread 'tests::broken' panicked at src/lib.rs:8:17

failures:
    tests::broken

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
"""


def test_a_cargo_section_as_cargo_prints_it_has_no_problem():
    # A failing test's captured output may say anything; it is no report line.
    tally = read_cargo(CARGO_SECTION)
    assert tally.problem is None
    assert tally.failed == {"calc src/lib.rs::tests::broken"}


def test_a_second_cargo_result_for_a_binary_is_a_second_report():
    tally = read_cargo(CARGO_SECTION + "test tests::broken ... ok\ntest result: ok. 1 passed\n")
    assert tally.problem and "second report" in tally.problem


def test_a_cargo_test_named_twice_is_a_second_report():
    doubled = CARGO_SECTION.replace(
        "test tests::adds ... ok\n", "test tests::adds ... ok\ntest tests::adds ... ok\n"
    )
    tally = read_cargo(doubled)
    assert tally.problem and "second report" in tally.problem


def test_two_workspace_members_with_the_same_test_file_are_two_binaries():
    # cargo names an integration test's source from its member's root: two members with
    # tests/it.rs each print the same source, and only the binaries' build hashes differ.
    member = (
        "     Running tests/it.rs (target/debug/deps/it-{hash})\n\nrunning 1 test\n"
        "test adds ... {outcome}\n\ntest result: ok. 1 passed; 0 failed; 0 ignored\n"
    )
    first = member.format(hash="0123456789abcdef", outcome="ok")
    second = member.format(hash="fedcba9876543210", outcome="ok")
    tally = read_cargo(first + second)
    assert tally.problem is None
    assert tally.passed == {"it tests/it.rs::adds", "it tests/it.rs [fedcba98]::adds"}
    # The same binary's section twice is still a second report.
    assert "second report" in (read_cargo(first + first).problem or "")


def test_cargo_lines_that_disagree_with_the_binarys_count_are_a_problem():
    tally = read_cargo(CARGO_SECTION.replace("running 2 tests", "running 3 tests"))
    assert tally.problem and "3 tests" in tally.problem


# --- jest ---

JEST_REPORT = {
    "testResults": [
        {
            "name": "add.test.js",
            "status": "failed",
            "assertionResults": [
                {"title": "works", "status": "passed", "ancestorTitles": []},
                {"title": "breaks", "status": "failed", "ancestorTitles": []},
            ],
        }
    ]
}
ALL_PASS = json.loads(json.dumps(JEST_REPORT).replace('"failed"', '"passed"'))

# What a real Jest adds to its report: the harness's canary file, beside the project's test
# file (its test that must pass passes, the one that must fail fails; runner_canary.py). Its
# names are nobody's to guess: the stand-in runs every other test file there, as Jest would.
WITH_CANARY = """const withCanary = (report) => {
  const own = report.testResults.map(s => s.name);
  for (const file of fs.readdirSync('.').filter(n => /[.]test[.]js$/.test(n) && !own.includes(n))) {
    const results = [], titles = [];
    global.describe = (title, body) => { titles.push(title); body(); titles.pop(); };
    global.test = global.it = (title, body) => {
      let status = 'passed';
      try { body(); } catch (e) { status = 'failed'; }
      results.push({title, status, ancestorTitles: [...titles]});
    };
    global.expect = (got) => ({toBe: (want) => { if (got !== want) throw new Error('no'); }});
    require(require('path').resolve(file));
    report.testResults.push({name: file, status: 'failed', assertionResults: results});
  }
  return report;
};
"""

# A stand-in for jest: writes its --json report to --outputFile as jest does, then a test's
# `process.on('exit')` handler writes the file again with every test passing.
JEST_REWRITES = f"""#!/usr/bin/env node
const fs = require('fs');
{WITH_CANARY}const arg = process.argv.find(a => a.startsWith('--outputFile='));
const out = arg.slice('--outputFile='.length);
process.on('exit', () => {{ fs.writeFileSync(out, JSON.stringify({json.dumps(ALL_PASS)})); }});
fs.writeFileSync(out, JSON.stringify(withCanary({json.dumps(JEST_REPORT)})) + '\\n');
process.exitCode = 1;
"""


@needs_node
def test_a_jest_report_rewritten_at_exit_does_not_hide_a_failing_test(tmp_path, fake_bin):
    script(fake_bin, "jest", JEST_REWRITES)
    repo = make_repo(tmp_path / "j", {"package.json": "{}\n", "add.test.js": "\n"})
    result = run("jest", repo, "Node/TS")
    assert result.outcome == FAILED
    assert "add.test.js > breaks" not in (result.passing_ids or set())
    assert "second report" in result.cause


@needs_node
def test_a_jest_report_written_once_is_read(tmp_path, fake_bin):
    honest = "\n".join(line for line in JEST_REWRITES.splitlines() if "process.on(" not in line)
    script(fake_bin, "jest", honest)
    repo = make_repo(tmp_path / "j", {"package.json": "{}\n", "add.test.js": "\n"})
    result = run("jest", repo, "Node/TS")
    assert (result.outcome, result.source) == (FAILED, "jest-json")
    assert result.failing_ids == {"add.test.js > breaks"}
    assert result.passing_ids == {"add.test.js > works"}


def test_a_cut_jest_report_is_no_report():
    text = json.dumps(JEST_REPORT)
    tally = read_jest_reports(text[: len(text) // 2].encode(), Path("/r"), sessions=1)
    assert tally.problem and "cut short" in tally.problem


def test_two_jest_reports_from_one_jest_are_a_second_report():
    text = (json.dumps(JEST_REPORT) + "\n" + json.dumps(ALL_PASS)).encode()
    tally = read_jest_reports(text, Path("/r"), sessions=1)
    assert tally.problem and "second report" in tally.problem
    assert read_jest_reports(text, Path("/r"), sessions=2).problem is None


@needs_node
def test_a_passing_run_stays_a_pass(tmp_path, fake_bin):
    report = json.dumps(ALL_PASS)
    script(
        fake_bin,
        "jest",
        f"#!/usr/bin/env node\nconst fs = require('fs');\n{WITH_CANARY}"
        "const out = process.argv.find(a => a.startsWith('--outputFile=')).slice(13);\n"
        f"fs.writeFileSync(out, JSON.stringify(withCanary({report})));\n",
    )
    repo = make_repo(tmp_path / "j", {"package.json": "{}\n", "add.test.js": "\n"})
    assert run("jest", repo, "Node/TS").outcome == PASSED


needs_bwrap = pytest.mark.skipif(not jail.probe().works, reason="bubblewrap cannot run here")


@needs_bwrap
@needs_node
def test_in_the_jail_jest_writes_its_report_into_the_pipe_and_cannot_rewrite_it(tmp_path, fake_bin):
    # As root, the jail runs the command as nobody: it must still open the pipe's /dev/fd
    # path to write, and its second write still shows.
    script(fake_bin, "jest", JEST_REWRITES)
    repo = make_repo(tmp_path / "j", {"package.json": "{}\n", "add.test.js": "\n"})
    box = jail.build_jail({"sandbox": "bwrap"}, repo)
    result = testrun.run_tests("jest", repo, stack="Node/TS", timeout_s=120, jail=box)
    assert (result.outcome, result.source) == (FAILED, "jest-json")
    assert "second report" in result.cause
    honest = "\n".join(line for line in JEST_REWRITES.splitlines() if "process.on(" not in line)
    script(fake_bin, "jest", honest)
    result = testrun.run_tests("jest", repo, stack="Node/TS", timeout_s=120, jail=box)
    assert result.failing_ids == {"add.test.js > breaks"}


NPM_JEST = {"package.json": json.dumps({"scripts": {"test": "jest"}}), "add.test.js": "\n"}


@needs_node
@pytest.mark.parametrize("boxed", [False, True], ids=["no jail", "jail"])
def test_under_npm_test_jest_writes_into_a_named_pipe_and_cannot_rewrite_it(
    tmp_path, fake_bin, boxed
):
    # npm hands its script no descriptor beyond 0-2: Jest opens the harness's named pipe by
    # its path (as nobody, in the jail under a root harness), and its second write still shows.
    if boxed and not jail.probe().works:
        pytest.skip("bubblewrap cannot run here")
    script(fake_bin, "jest", JEST_REWRITES)
    repo = make_repo(tmp_path / "j", NPM_JEST)
    box = jail.build_jail({"sandbox": "bwrap"}, repo) if boxed else None
    result = testrun.run_tests("npm test", repo, stack="Node/TS", timeout_s=120, jail=box)
    assert (result.outcome, result.source) == (FAILED, "jest-json"), result.summary
    assert "second report" in result.cause
    honest = "\n".join(line for line in JEST_REWRITES.splitlines() if "process.on(" not in line)
    script(fake_bin, "jest", honest)
    result = testrun.run_tests("npm test", repo, stack="Node/TS", timeout_s=120, jail=box)
    assert (result.outcome, result.source) == (FAILED, "jest-json"), result.summary
    assert result.failing_ids == {"add.test.js > breaks"}
    assert sorted(p.name for p in repo.iterdir()) == sorted([".git", *NPM_JEST])


# A stand-in for jest whose tested code forges a passing report into the named pipe, then
# swaps the pipe for a file of its own (or reads the pipe) so Jest's real report goes astray.
JEST_SWAPS_THE_PIPE = f"""#!/usr/bin/env node
const fs = require('fs');
{WITH_CANARY}const out = process.argv.find(a => a.startsWith('--outputFile=')).slice(13);
fs.writeFileSync(out, JSON.stringify(withCanary({json.dumps(ALL_PASS)})));
try {{ fs.readFileSync(out); }} catch (e) {{ console.log('read refused: ' + e.code); }}
try {{ fs.unlinkSync(out); fs.writeFileSync(out, ''); }} catch (e) {{
  console.log('swap refused: ' + e.code);
}}
fs.writeFileSync(out, JSON.stringify(withCanary({json.dumps(JEST_REPORT)})));
process.exitCode = 1;
"""


@needs_bwrap
@needs_node
def test_in_the_jail_the_named_pipe_can_be_neither_read_nor_swapped(tmp_path, fake_bin):
    script(fake_bin, "jest", JEST_SWAPS_THE_PIPE)
    repo = make_repo(tmp_path / "j", NPM_JEST)
    box = jail.build_jail({"sandbox": "bwrap"}, repo)
    result = testrun.run_tests("npm test", repo, stack="Node/TS", timeout_s=120, jail=box)
    assert result.outcome == FAILED and "second report" in result.cause, result.summary
    assert "swap refused" in result.tail and "read refused" in result.tail


@needs_bwrap
def test_in_the_jail_a_go_report_rewritten_at_exit_does_not_hide_a_failing_test(tmp_path, fake_bin):
    script(fake_bin, "go", GO_REWRITES)
    repo = make_repo(tmp_path / "g", {"go.mod": "module m\n"})
    box = jail.build_jail({"sandbox": "bwrap"}, repo)
    result = testrun.run_tests("go test ./...", repo, stack="Go", timeout_s=120, jail=box)
    assert result.outcome == FAILED and "second report" in result.cause


def test_cargo_output_shown_for_passing_tests_is_no_report_line():
    shown = """\
     Running unittests src/lib.rs (target/debug/deps/calc-0123456789abcdef)

running 1 test
test tests::adds ... ok

successes:

---- tests::adds stdout ----
test tests::other ... FAILED

successes:
    tests::adds

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out
"""
    tally = read_cargo(shown)
    assert tally.problem is None
    assert (tally.passed, tally.failed, tally.broken) == (
        {"calc src/lib.rs::tests::adds"},
        set(),
        set(),
    )

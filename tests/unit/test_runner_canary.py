"""Go's and Jest's canary (gate/runner_canary.py): every `go test` and Jest run holds a test of
the harness's that must fail and one that must pass, under fresh names, in a file laid where the
runner finds it for the run. Real go and real Jest on temp projects: skipped where they are not
installed, failed where AUTORESEARCH_GO_REQUIRED / AUTORESEARCH_JEST_REQUIRED is set (.ci/run
installs them: golang-go from apt, Jest from npm into .jest/, a target of the Makefile)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, make_repo, missing

from autoresearch.gate import canary_names, runner_canary, testrun
from autoresearch.gate.testrun import FAILED, PASSED, TAMPERED

GO_REQUIRED = "AUTORESEARCH_GO_REQUIRED"
JEST_REQUIRED = "AUTORESEARCH_JEST_REQUIRED"

GO_MOD = "module example.com/calc\n\ngo 1.19\n"
CALC_GO = "package calc\n\nfunc Add(a, b int) int { return a + b }\n"
CALC_TEST_GO = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("1 + 2 is not 3")
	}
}
"""
# A TestMain that runs the tests with their output piped through it, turns every failure into a
# pass and exits 0: what a change that wants its broken tests to pass could add.
FORGING_MAIN_GO = """\
package calc

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	r, w, _ := os.Pipe()
	real := os.Stdout
	os.Stdout = w
	done := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(r)
		for lines.Scan() {
			line := strings.Replace(lines.Text(), "--- FAIL", "--- PASS", 1)
			if line == "FAIL" {
				line = "PASS"
			}
			fmt.Fprintln(real, line)
		}
		close(done)
	}()
	m.Run()
	w.Close()
	<-done
	os.Exit(0)
}
"""

JEST_TEST = 'test("adds", () => { expect(1 + 2).toBe(3); });\n'
JEST_BROKEN = 'test("adds", () => { expect(1 + 2).toBe(4); });\n'
# Every failure of Jest's aggregated results turned into a pass.
FLIP_RESULTS = """\
  for (const suite of results.testResults) {
    suite.numFailingTests = 0;
    suite.failureMessage = null;
    for (const t of suite.testResults) t.status = "passed";
  }
  results.numFailedTests = 0;
  results.numFailedTestSuites = 0;
  results.success = true;
"""
# A results processor that flips before Jest writes its report.
FLIP_JS = f"module.exports = (results) => {{\n{FLIP_RESULTS}  return results;\n}};\n"
# A reporter that flips the same way when the run completes, before Jest writes its report.
FLIPPER_JS = (
    f"class Flipper {{\n  onRunComplete(contexts, results) {{\n{FLIP_RESULTS}  }}\n}}\n"
    "module.exports = Flipper;\n"
)
# A reporter like FLIPPER_JS that spares the tests it takes for the harness's canary (`SPARE`:
# by the test's title, its file's name, a marker in the file, the newest file).
SPARER_JS = """\
const fs = require("fs");
const path = require("path");
class Sparer {
  onRunComplete(contexts, results) {
    const mtimes = results.testResults.map((s) => fs.statSync(s.testFilePath).mtimeMs);
    const folder = path.dirname(results.testResults[0].testFilePath);
    const all = fs.readdirSync(folder).map((n) => fs.statSync(path.join(folder, n)).mtimeMs);
    const newest = Math.max(...all);
    let failing = 0;
    results.testResults.forEach((suite, i) => {
      const file = path.basename(suite.testFilePath);
      const text = fs.readFileSync(suite.testFilePath, "utf8");
      const mtime = mtimes[i];
      let kept = 0;
      for (const t of suite.testResults) {
        const test = t.title;
        if (SPARE) {
          if (t.status === "failed") kept++;
          continue;
        }
        t.status = "passed";
        t.failureMessages = [];
      }
      suite.numFailingTests = kept;
      if (!kept) suite.failureMessage = null;
      failing += kept;
    });
    results.numFailedTests = failing;
    results.numFailedTestSuites = results.testResults.filter((s) => s.numFailingTests).length;
    results.success = failing === 0;
  }
}
module.exports = Sparer;
"""
JEST_SPARES = {
    "by-test-name": 'test.startsWith("canary_")',
    "by-file-name": 'file.startsWith("canary_")',
    "by-marker": 'text.includes("harness canary")',
    "newest-file": "mtime === newest",
}
FLIPS = {
    "results processor": {"testResultsProcessor": "./flip.js"},
    "reporter": {"reporters": ["default", "./flipper.js"]},
}


@pytest.fixture
def go() -> str:
    found = shutil.which("go")
    if found is None:
        missing("go is not installed (Debian: apt-get install golang-go)", GO_REQUIRED)
    return found


@pytest.fixture
def jest() -> str:
    found = Path(os.environ.get("JEST") or ROOT / ".jest" / "node_modules" / ".bin" / "jest")
    if shutil.which("node") is None or not found.exists():
        missing('no Jest (make "$PWD/.jest/node_modules/.bin/jest", with npm)', JEST_REQUIRED)
    return str(found)


def run_go(repo: Path, command: str = "go test ./...") -> testrun.TestRun:
    return testrun.run_tests(command, repo, stack="Go", timeout_s=600)


JEST_ARGS = {"stack": "Node/TS", "timeout_s": 600}


def run_jest(repo: Path, jest: str) -> testrun.TestRun:
    return testrun.run_tests(jest, repo, **JEST_ARGS)


def package_json(**jest_config: object) -> str:
    return json.dumps({"name": "calc", "version": "1.0.0", "jest": jest_config})


def left(repo: Path) -> list[str]:
    """Files git does not know: a canary's, its names being nobody's to guess."""
    if not (repo / ".git").exists():
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)  # what is there now
    out = subprocess.run(
        ["git", "ls-files", "--others"], cwd=repo, capture_output=True, text=True, check=True
    )
    return sorted(out.stdout.split())


def no_canary(monkeypatch) -> None:
    monkeypatch.setattr(runner_canary, "lay_go", lambda cwd, command: None)
    monkeypatch.setattr(runner_canary, "lay_jest", lambda cwd, command: None)


# A TestMain like FORGING_MAIN_GO that spares the tests it takes for the harness's canary
# (`spare`: by the test's name, its file's name, a marker in the file, the newest file): their
# failures come out as failures, every other one as a pass, so only the canary tells.
SPARING_MAIN_GO = """\
package calc

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

func spare(file, text string, mtime, newest int64, test string) bool {
	return SPARE
}

func spared() map[string]bool {
	files := map[string]int64{}
	var newest int64
	entries, _ := os.ReadDir(".")
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			if info.ModTime().UnixNano() > newest {
				newest = info.ModTime().UnixNano()
			}
			if strings.HasSuffix(e.Name(), "_test.go") {
				files[e.Name()] = info.ModTime().UnixNano()
			}
		}
	}
	tests := regexp.MustCompile(`func (Test\\w+)\\(`)
	names := map[string]bool{}
	for file, mtime := range files {
		text, _ := os.ReadFile(file)
		for _, found := range tests.FindAllStringSubmatch(string(text), -1) {
			if spare(file, string(text), mtime, newest, found[1]) {
				names[found[1]] = true
			}
		}
	}
	return names
}

func TestMain(m *testing.M) {
	keep := spared()
	r, w, _ := os.Pipe()
	real := os.Stdout
	os.Stdout = w
	done := make(chan struct{})
	kept := false
	failure := regexp.MustCompile(`--- FAIL: (\\w+)`)
	go func() {
		lines := bufio.NewScanner(r)
		for lines.Scan() {
			line := lines.Text()
			if found := failure.FindStringSubmatch(line); found != nil {
				if keep[found[1]] {
					kept = true
				} else {
					line = strings.Replace(line, "--- FAIL", "--- PASS", 1)
				}
			}
			if strings.Trim(line, "\\x16") == "FAIL" && !kept {
				line = strings.Replace(line, "FAIL", "PASS", 1)
			}
			fmt.Fprintln(real, line)
		}
		close(done)
	}()
	code := m.Run()
	w.Close()
	<-done
	if !kept {
		code = 0
	}
	os.Exit(code)
}
"""
GO_SPARES = {
    "by-test-name": 'strings.HasPrefix(test, "TestCanary")',
    "by-file-name": 'strings.HasPrefix(file, "canary_")',
    "by-marker": 'strings.Contains(text, "harness canary")',
    "newest-file": "mtime == newest",
}


def older(repo: Path, name: str) -> None:
    """The file as a checkout an hour old has it: the newest file of its folder is another."""
    times = os.stat(repo / name)
    os.utime(repo / name, ns=(times.st_atime_ns - 3600 * 10**9, times.st_mtime_ns - 3600 * 10**9))


# --- Go ---


@pytest.mark.e2e
def test_an_honest_go_module_passes_and_the_canary_is_neither_counted_nor_left(tmp_path, go):
    repo = make_repo(
        tmp_path / "r",
        {
            "go.mod": GO_MOD,
            "calc.go": CALC_GO,
            "calc_test.go": CALC_TEST_GO,
            "sub/sub.go": "package sub\n",
            "sub/sub_test.go": 'package sub\n\nimport "testing"\n\nfunc TestSub(t *testing.T) {}\n',
        },
    )
    result = run_go(repo)
    assert (result.outcome, result.exit_code) == (PASSED, 0), result.tail
    assert result.passing_ids == {"example.com/calc::TestAdd", "example.com/calc/sub::TestSub"}
    assert result.failing_ids == set()
    assert left(repo) == []


@pytest.mark.e2e
def test_a_go_testmain_that_turns_failures_into_passes_makes_the_run_tampered(
    tmp_path, go, monkeypatch
):
    files = {
        "go.mod": GO_MOD,
        "calc.go": CALC_GO.replace("a + b", "a - b"),
        "calc_test.go": CALC_TEST_GO,
        "main_test.go": FORGING_MAIN_GO,
    }
    repo = make_repo(tmp_path / "r", files)
    result = run_go(repo)
    assert result.outcome == TAMPERED, result.summary
    assert "canary" in result.cause
    assert left(repo) == []
    # Without the canary the forgery passes: the canary is what catches it.
    no_canary(monkeypatch)
    assert run_go(repo).outcome == PASSED


@pytest.mark.e2e
def test_a_real_go_failure_beside_the_canary_still_fails_the_run(tmp_path, go):
    files = {"go.mod": GO_MOD, "calc.go": CALC_GO.replace("a + b", "a - b")}
    repo = make_repo(tmp_path / "r", {**files, "calc_test.go": CALC_TEST_GO})
    result = run_go(repo)
    assert (result.outcome, result.exit_code) == (FAILED, 1), result.summary
    assert result.failing_ids == {"example.com/calc::TestAdd"}
    assert left(repo) == []


@pytest.mark.e2e
@pytest.mark.parametrize("how", sorted(GO_SPARES))
def test_a_go_testmain_that_spares_what_it_takes_for_the_canary_is_still_tampered(
    tmp_path, go, monkeypatch, how
):
    files = {
        "go.mod": GO_MOD,
        "calc.go": CALC_GO.replace("a + b", "a - b"),
        "main_test.go": SPARING_MAIN_GO.replace("SPARE", GO_SPARES[how]),
        "calc_test.go": CALC_TEST_GO,
    }
    repo = make_repo(tmp_path / "r", files)
    older(repo, "calc_test.go")
    result = run_go(repo)
    assert result.outcome == TAMPERED, result.summary
    assert left(repo) == []
    # Without the canary the forgery passes the broken change.
    no_canary(monkeypatch)
    assert run_go(repo).outcome == PASSED


def test_go_canary_is_laid_in_each_tested_package_in_its_package(tmp_path):
    (tmp_path / "go.mod").write_text(GO_MOD)
    (tmp_path / "a_test.go").write_text("package calc_test\n")
    (tmp_path / "untested").mkdir()
    (tmp_path / "untested" / "u.go").write_text("package untested\n")
    (tmp_path / "vendor" / "x").mkdir(parents=True)
    (tmp_path / "vendor" / "x" / "x_test.go").write_text("package x\n")
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "go.mod").write_text("module other\n")
    (tmp_path / "inner" / "i_test.go").write_text("package inner\n")
    assert left(tmp_path) == []
    canary = runner_canary.lay_go(tmp_path, "go test -json ./...")
    # a nested module's package too (a command may cd into it), never vendor's
    assert sorted(p.parent for p in canary.paths) == [tmp_path, tmp_path / "inner"]
    assert canary.paths[0].read_text().startswith("package calc_test\n")
    # each package's under names of its own
    assert len({*canary.must_pass, *canary.must_fail, *(p.name for p in canary.paths)}) == 6
    runner_canary.take_back(canary)
    assert left(tmp_path) == []


def test_no_go_canary_where_the_command_picks_tests_or_stops_at_a_failure(tmp_path):
    (tmp_path / "a_test.go").write_text("package calc\n")
    assert left(tmp_path) == []
    picks = ("go test -run TestAdd ./...", "go test -failfast ./...", "go test -list .")
    for command in (*picks, "GOFLAGS=-run=TestAdd go test ./..."):
        assert runner_canary.lay_go(tmp_path, command) is None, command
    assert left(tmp_path) == []


# --- Jest ---


@pytest.mark.e2e
def test_an_honest_jest_project_passes_and_the_canary_is_neither_counted_nor_left(tmp_path, jest):
    repo = make_repo(tmp_path / "r", {"package.json": package_json(), "calc.test.js": JEST_TEST})
    result = run_jest(repo, jest)
    assert (result.outcome, result.exit_code) == (PASSED, 0), result.tail
    assert result.passing_ids == {"calc.test.js > adds"}
    assert left(repo) == []


@pytest.mark.e2e
@pytest.mark.parametrize("how", sorted(FLIPS))
def test_a_jest_config_that_flips_failures_makes_the_run_tampered(tmp_path, jest, monkeypatch, how):
    files = {
        "package.json": package_json(**FLIPS[how]),
        "flip.js": FLIP_JS,
        "flipper.js": FLIPPER_JS,
        "calc.test.js": JEST_BROKEN,
    }
    repo = make_repo(tmp_path / "r", files)
    result = run_jest(repo, jest)
    assert result.outcome == TAMPERED, result.summary
    assert left(repo) == []
    no_canary(monkeypatch)
    assert run_jest(repo, jest).outcome == PASSED


@pytest.mark.e2e
@pytest.mark.parametrize("how", sorted(JEST_SPARES))
def test_a_jest_reporter_that_spares_what_it_takes_for_the_canary_is_still_tampered(
    tmp_path, jest, monkeypatch, how
):
    files = {
        "package.json": package_json(reporters=["default", "./sparer.js"]),
        "sparer.js": SPARER_JS.replace("SPARE", JEST_SPARES[how]),
        "calc.test.js": JEST_BROKEN,
    }
    repo = make_repo(tmp_path / "r", files)
    older(repo, "calc.test.js")
    result = run_jest(repo, jest)
    assert result.outcome == TAMPERED, result.summary
    assert left(repo) == []
    no_canary(monkeypatch)
    assert run_jest(repo, jest).outcome == PASSED


@pytest.mark.e2e
def test_a_flipping_jest_processor_is_caught_where_the_config_is_a_js_file(tmp_path, jest):
    # jest.config.js cannot be read, so a missing canary proves nothing; a flipped one does.
    files = {
        "package.json": json.dumps({"name": "calc"}),
        "jest.config.js": 'module.exports = { testResultsProcessor: "./flip.js" };\n',
        "flip.js": FLIP_JS,
        "calc.test.js": JEST_BROKEN,
    }
    result = run_jest(make_repo(tmp_path / "r", files), jest)
    assert result.outcome == TAMPERED, result.summary


@pytest.mark.e2e
def test_a_real_jest_failure_beside_the_canary_still_fails_the_run(tmp_path, jest):
    files = {"package.json": package_json(), "calc.test.js": JEST_BROKEN}
    repo = make_repo(tmp_path / "r", files)
    result = run_jest(repo, jest)
    assert (result.outcome, result.exit_code) == (FAILED, 1), result.summary
    assert result.failing_ids == {"calc.test.js > adds"}
    assert left(repo) == []


@pytest.mark.e2e
def test_a_jest_config_that_does_not_find_the_canary_is_not_called_tampered(tmp_path, jest):
    files = {
        "package.json": package_json(roots=["<rootDir>/src"]),
        "src/calc.test.js": JEST_TEST,
    }
    result = run_jest(make_repo(tmp_path / "r", files), jest)
    assert result.outcome == PASSED, result.summary


def test_no_jest_canary_where_the_command_picks_tests_or_globals_are_off(tmp_path):
    (tmp_path / "package.json").write_text(package_json())
    assert left(tmp_path) == []
    for command in ("jest -t adds", "jest --bail", "jest --onlyChanged"):
        assert runner_canary.lay_jest(tmp_path, command) is None, command
    (tmp_path / "package.json").write_text(package_json(injectGlobals=False))
    assert runner_canary.lay_jest(tmp_path, "jest") is None
    assert left(tmp_path) == []


def test_the_canarys_names_are_new_for_every_run(tmp_path):
    (tmp_path / "package.json").write_text(package_json())
    assert left(tmp_path) == []
    first = runner_canary.lay_jest(tmp_path, "jest")
    runner_canary.take_back(first)
    second = runner_canary.lay_jest(tmp_path, "jest")
    runner_canary.take_back(second)
    # Drawn afresh (not disjoint: two runs may draw one name alike now and then).
    assert (first.stem, first.must_pass, first.must_fail) != (
        second.stem,
        second.must_pass,
        second.must_fail,
    )
    assert left(tmp_path) == []


@pytest.mark.e2e
def test_go_tests_of_a_nested_module_run_from_its_folder_are_not_called_tampered(tmp_path, go):
    files = {
        "go.mod": GO_MOD,
        "calc.go": CALC_GO,
        "calc_test.go": CALC_TEST_GO,
        "tools/go.mod": "module example.com/tools\n\ngo 1.19\n",
        "tools/t_test.go": 'package tools\n\nimport "testing"\n\nfunc TestT(t *testing.T) {}\n',
    }
    result = run_go(make_repo(tmp_path / "r", files), "cd tools && go test ./...")
    assert (result.outcome, result.passing_ids) == (PASSED, {"example.com/tools::TestT"})


@pytest.mark.e2e
def test_a_go_run_of_a_package_without_tests_is_no_tests_not_tampered(tmp_path, go):
    files = {"go.mod": GO_MOD, "calc.go": CALC_GO, "sub/sub.go": "package sub\n"}
    files["sub/sub_test.go"] = 'package sub\n\nimport "testing"\n\nfunc TestSub(t *testing.T) {}\n'
    result = run_go(make_repo(tmp_path / "r", files), "go test")
    assert result.outcome == testrun.NOT_RUN, result.summary


@pytest.mark.e2e
def test_a_jest_path_pattern_that_leaves_the_canary_out_is_not_called_tampered(tmp_path, jest):
    files = {"package.json": package_json(), "src/calc.test.js": JEST_TEST}
    result = testrun.run_tests(f"{jest} src", make_repo(tmp_path / "r", files), **JEST_ARGS)
    assert (result.outcome, result.passing_ids) == (PASSED, {"src/calc.test.js > adds"})


# --- Jest through `npm test` (npm hands its script no descriptor: the report is a named pipe) ---


def npm_package(jest: str, script: str = "{jest}", **jest_config: object) -> str:
    scripts = {"test": script.format(jest=jest)}
    return json.dumps({"name": "calc", "version": "1.0.0", "scripts": scripts, "jest": jest_config})


def run_npm(repo: Path, command: str = "npm test") -> testrun.TestRun:
    return testrun.run_tests(command, repo, **JEST_ARGS)


@pytest.mark.e2e
@pytest.mark.parametrize("how", sorted(FLIPS))
def test_a_jest_config_that_flips_failures_under_npm_test_makes_the_run_tampered(
    tmp_path, jest, how
):
    files = {
        "package.json": npm_package(jest, **FLIPS[how]),
        "flip.js": FLIP_JS,
        "flipper.js": FLIPPER_JS,
        "calc.test.js": JEST_BROKEN,
    }
    repo = make_repo(tmp_path / "r", files)
    result = run_npm(repo)
    assert result.outcome == TAMPERED, result.summary
    assert left(repo) == []


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["npm test", "npm run test", "npm test -- --no-cache"])
def test_an_honest_npm_test_of_jest_is_read_from_jests_report(tmp_path, jest, command):
    repo = make_repo(tmp_path / "r", {"package.json": npm_package(jest), "calc.test.js": JEST_TEST})
    result = run_npm(repo, command)
    assert (result.outcome, result.source, result.exit_code) == (PASSED, "jest-json", 0)
    assert result.passing_ids == {"calc.test.js > adds"}
    assert left(repo) == []


@pytest.mark.e2e
def test_a_failing_test_under_npm_test_fails_the_run(tmp_path, jest):
    files = {"package.json": npm_package(jest), "calc.test.js": JEST_BROKEN}
    result = run_npm(make_repo(tmp_path / "r", files))
    assert (result.outcome, result.source) == (FAILED, "jest-json"), result.summary
    assert result.failing_ids == {"calc.test.js > adds"}


@pytest.mark.e2e
def test_npx_jest_is_read_from_jests_report_and_a_flip_under_it_is_tampered(tmp_path, jest):
    # npx too starts Jest with descriptors 0-2 only: a /dev/fd path would be one of Jest's own.
    files = {"package.json": package_json(), "calc.test.js": JEST_BROKEN, "flip.js": FLIP_JS}
    repo = make_repo(tmp_path / "r", files)
    (repo / "node_modules").symlink_to(Path(jest).parent.parent)  # where npx finds jest
    result = run_npm(repo, "npx --offline jest")
    assert (result.outcome, result.source) == (FAILED, "jest-json"), result.summary
    assert result.failing_ids == {"calc.test.js > adds"}
    (repo / "package.json").write_text(package_json(testResultsProcessor="./flip.js"))
    assert run_npm(repo, "npx --offline jest").outcome == TAMPERED


def test_the_npm_test_canary_follows_the_package_test_script(tmp_path):
    command = "npm test -- --json --outputFile=/tmp/r/jest-report"
    (tmp_path / "package.json").write_text("{}")
    assert left(tmp_path) == []
    for script, lays in (
        ("jest", True),
        ("jest --bail", False),  # the script's own flags count as the command's
        ("jest -t adds", False),
        ("eslint . && jest", False),  # the flags after `--` reach eslint's neighbour, not Jest
        ("mocha", False),
    ):
        package = {"name": "calc", "scripts": {"test": script}}
        (tmp_path / "package.json").write_text(json.dumps(package))
        canary = runner_canary.lay_jest(tmp_path, command)
        assert (canary is not None) == lays, script
        if canary is not None:
            assert canary.surely_run
            runner_canary.take_back(canary)
    package = {"name": "calc", "scripts": {"test": "jest"}}
    (tmp_path / "package.json").write_text(json.dumps(package))
    assert runner_canary.lay_jest(tmp_path, "npm test -- -t adds") is None
    assert left(tmp_path) == []


# --- what could tell the canary from the project's own tests ---

GO_NAMED = """\
package calc

import "testing"

func TestParseConfigFile(t *testing.T) {}
func TestLoadEmptyInput(t *testing.T)  {}
func TestMergeNestedValues(t *testing.T) {}
func TestRejectUnknownKeys(t *testing.T) {}
"""


def words_of(name: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Z][a-z]+|[a-z]+", name)} - {"test", "go"}


def test_the_go_canary_is_named_from_the_projects_test_names_and_carries_no_mark(tmp_path):
    (tmp_path / "calc_test.go").write_text(GO_NAMED)
    project = words_of(GO_NAMED.replace("func", "").replace("package calc", ""))
    project -= {"import", "testing", "t", "calc"}
    first = runner_canary.lay_go(tmp_path, "go test ./...")
    text = first.paths[0].read_text()
    runner_canary.take_back(first)
    second = runner_canary.lay_go(tmp_path, "go test ./...")
    runner_canary.take_back(second)
    for name in (*first.must_pass, *first.must_fail, first.paths[0].name.removesuffix(".go")):
        assert words_of(name) <= project, name
    assert not re.search(r"canary|harness", text, re.IGNORECASE)
    # Drawn afresh for each run. (Not disjoint: two runs may draw one name alike, about one
    # in 400 with this project's 12 words; both names alike is about one in two million.)
    assert (first.must_pass, first.must_fail) != (second.must_pass, second.must_fail)


def test_the_canary_has_the_times_of_a_test_beside_it_and_its_folder_keeps_its_own(tmp_path):
    (tmp_path / "calc_test.go").write_text(GO_NAMED)
    os.utime(tmp_path / "calc_test.go", ns=(10**18, 10**18))
    os.utime(tmp_path, ns=(2 * 10**18, 2 * 10**18))
    canary = runner_canary.lay_go(tmp_path, "go test ./...")
    assert os.stat(canary.paths[0]).st_mtime_ns == 10**18
    assert os.stat(tmp_path).st_mtime_ns == 2 * 10**18
    runner_canary.take_back(canary)
    assert os.stat(tmp_path).st_mtime_ns == 2 * 10**18


def test_the_jest_canary_lies_beside_a_test_of_the_project_named_in_its_fashion(tmp_path):
    (tmp_path / "package.json").write_text(package_json())
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "parse-config.spec.js").write_text(
        "describe('config', () => {\n  it('reads a nested file', () => {});\n"
        "  it('merges default values', () => {});\n});\n"
    )
    canary = runner_canary.lay_jest(tmp_path, "jest")
    path = canary.paths[0]
    text = path.read_text()
    runner_canary.take_back(canary)
    assert path.parent == tmp_path / "src"
    assert path.name.endswith(".spec.js") and "-" in path.name
    assert "it('" in text and "test(" not in text and '"' not in text
    assert not re.search(r"canary|harness", text, re.IGNORECASE)
    # the ids it is matched by: `file > describe > title`
    describe, title = canary.must_fail[0].split(" > ")
    assert f"describe('{describe}'" in text and f"it('{title}'" in text


def test_the_names_are_drawn_from_the_harness_token_alone(tmp_path):
    texts = [GO_NAMED]
    same = [canary_names.Namer(texts, canary_names.GO_TESTS, token=b"k" * 32) for _ in range(2)]
    other = canary_names.Namer(texts, canary_names.GO_TESTS, token=b"j" * 32)
    drawn = [[n.words_for() for _ in range(4)] for n in (*same, other)]
    assert drawn[0] == drawn[1] != drawn[2]

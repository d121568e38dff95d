"""Go, Jest and cargo runs graded with the start's tests (overlay.py, runner_overlay.py): the
start's test files and runner configuration laid over the change for the gate's decisive run,
what the change added that would run by itself taken away, the runner keys of package.json and
Cargo.toml set back to the start's (the rest of those files the change's).

The attacks drive the real runners through a gate's real verdict (finalize.graded_test, the
grading every gate shares): a broken change with a forger that rewrites only the outcome it
broke leaves the canary as it must be, so the run of the change as it left its files passes;
each test shows that, then that the graded verdict refuses the change."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import SCREEN_OFF, git, make_repo, script_spec
from test_cargo_canary import CARGO_TOML, LIB_RS, needs_cargo
from test_runner_canary import (
    CALC_GO,
    CALC_TEST_GO,
    GO_MOD,
    JEST_TEST,
    SPARER_JS,
    SPARING_MAIN_GO,
    go,  # noqa: F401 - the fixture: skipped without go
    jest,  # noqa: F401 - the fixture: skipped without Jest
    npm_package,
    package_json,
)

from autoresearch.gate import overlay, runner_overlay, testrun
from autoresearch.gate.testrun import PASSED, TestRun
from autoresearch.gate.verdict import acceptable
from autoresearch.safety import git as harness_git
from autoresearch.session import finalize

# --- the gate, as finalize and broad's merged branches run it ---


def place_at_start(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    repo = make_repo(tmp_path / "repo", files)
    place = tmp_path / "wt"
    harness_git.add_detached_worktree(repo, place, "HEAD")
    return place, git(place, "rev-parse", "HEAD")


def change(place: Path, files: dict[str, str | None]) -> None:
    """Commit a change on the worktree (the candidate the gate tests)."""
    for path, text in files.items():
        if text is None:
            (place / path).unlink()
        else:
            (place / path).parent.mkdir(parents=True, exist_ok=True)
            (place / path).write_text(text)
    git(place, "add", "-A")
    git(place, "commit", "-q", "-m", "change")


def session(command: str, stack: str, edits: bool) -> SimpleNamespace:
    spec = SimpleNamespace(allow_failing_baseline=False, allow_test_edits=edits, test_support=())
    return SimpleNamespace(spec=spec, record=SimpleNamespace(test_command=command, stack=stack))


def gate_case(tmp_path, monkeypatch, start_files, changed, command, stack, edits=False):
    """The run of the change as it left its files, and the gate's verdict on it."""
    place, start = place_at_start(tmp_path, start_files)
    reference = testrun.run_tests(command, place, stack=stack, timeout_s=600, uncached=True)
    assert reference.outcome == PASSED, reference.tail
    change(place, changed)
    monkeypatch.setattr(
        finalize,
        "run_suite",
        lambda s, p: testrun.run_tests(command, p, stack=stack, timeout_s=600, uncached=True),
    )
    run, verdict = finalize.graded_test(session(command, stack, edits), place, start, reference)
    return place, reference, run, verdict


def forged(run: TestRun, reference: TestRun) -> None:
    """The forgery works on the run as the change left its files: only the graded run can
    tell (so the test below it can fail)."""
    assert run.outcome == PASSED, run.summary
    assert acceptable(run, reference).ok


# --- Go ---

GO_START = {"go.mod": GO_MOD, "calc.go": CALC_GO, "calc_test.go": CALC_TEST_GO}
GO_BROKEN = CALC_GO.replace("a + b", "a - b")
# A TestMain that turns the failure of TestAdd alone into a pass (every other test's outcome,
# the canary's too, goes through as it is).
ONLY_ADD_MAIN = SPARING_MAIN_GO.replace("SPARE", 'test != "TestAdd"')
GO_TEST_BODY = CALC_TEST_GO.split('import "testing"\n', 1)[1]


@pytest.mark.e2e
@pytest.mark.usefixtures("go")
@pytest.mark.parametrize("where", ["in-the-test-file-it-broke", "in-a-new-test-file"])
def test_a_go_testmain_that_passes_only_what_the_change_broke_is_refused(
    tmp_path, monkeypatch, where
):
    if where == "in-a-new-test-file":
        forging = {"calc.go": GO_BROKEN, "main_test.go": ONLY_ADD_MAIN}
    else:
        forging = {"calc.go": GO_BROKEN, "calc_test.go": ONLY_ADD_MAIN + GO_TEST_BODY}
    place, reference, run, verdict = gate_case(
        tmp_path, monkeypatch, GO_START, forging, "go test ./...", "Go"
    )
    forged(run, reference)
    assert not verdict.ok
    assert "example.com/calc::TestAdd" in verdict.reason
    assert git(place, "status", "--porcelain") == ""  # the start's files taken back


@pytest.mark.e2e
@pytest.mark.usefixtures("go")
def test_an_honest_go_change_with_new_and_extended_tests_is_kept(tmp_path, monkeypatch):
    more = '\nfunc TestAddZero(t *testing.T) {\n\tif Add(2, 0) != 2 {\n\t\tt.Fatal("x")\n\t}\n}\n'
    honest = {
        "calc.go": CALC_GO + "\nfunc Twice(a int) int { return Add(a, a) }\n",
        "calc_test.go": CALC_TEST_GO + more,
        "twice_test.go": 'package calc\n\nimport "testing"\n\n'
        'func TestTwice(t *testing.T) {\n\tif Twice(2) != 4 {\n\t\tt.Fatal("x")\n\t}\n}\n',
        "testdata/new.txt": "4\n",
    }
    _, _, run, verdict = gate_case(tmp_path, monkeypatch, GO_START, honest, "go test ./...", "Go")
    assert verdict.ok, verdict.reason
    assert "the tests of the change's start, laid over it" in verdict.reason
    assert {"example.com/calc::TestTwice", "example.com/calc::TestAddZero"} <= run.passing_ids


@pytest.mark.e2e
@pytest.mark.usefixtures("go")
@pytest.mark.parametrize("gate", ["batch", "per_fix"])
def test_a_go_sessions_gate_grades_with_the_start_test_files(workflow, tmp_path, gate):
    # The wiring, through Snakemake: the stage's decisive run of Green's change.
    target = make_repo(
        tmp_path / "target", {"go.mod": GO_MOD, "calc.go": CALC_GO, "calc_test.go": CALC_TEST_GO}
    )
    finding = {
        "severity": "high",
        "title": "Add is slow",
        "location": "calc.go:3",
        "issue": "problem",
        "impact": "slow",
    }
    green = [
        {"tool": "write_file", "args": {"path": "calc.go", "content": GO_BROKEN}},
        {
            "tool": "write_file",
            "args": {"path": "calc_test.go", "content": ONLY_ADD_MAIN + GO_TEST_BODY},
        },
        {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "faster"}},
    ]
    script = {"red": {1: [{"tool": "report_finding", "args": finding}]}, "green": {1: green}}
    spec = script_spec(
        target, workflow.script(script), workflow.workdir / "t.jsonl", teams=["red", "green"]
    )
    spec |= {"test_command": "go test ./...", "max_cycles": 1, "test_gate": gate} | SCREEN_OFF
    workflow.run("s", spec)
    decision = workflow.decision("s", 1)
    assert decision["fixed"] == []
    (skip,) = decision["skipped"]
    assert "the tests of the change's start, laid over it" in skip["reason"]
    assert "example.com/calc::TestAdd" in skip["reason"]
    worktree = workflow.session("s") / "worktree"
    assert git(worktree, "rev-list", "--count", "main..HEAD") == "0"
    assert (worktree / "calc.go").read_text() == CALC_GO


@pytest.mark.e2e
@pytest.mark.usefixtures("go")
@pytest.mark.parametrize("allowed", [False, True])
def test_a_go_test_weakened_under_its_name_is_kept_only_with_allow_test_edits(
    tmp_path, monkeypatch, allowed
):
    # Kept silently, the weakened test would be the next change's start: a later change
    # that breaks Add would be graded with it.
    weakened = {"calc_test.go": CALC_TEST_GO.replace("Add(1, 2) != 3", "Add(1, 2) == 99")}
    _, _, run, verdict = gate_case(
        tmp_path, monkeypatch, GO_START, weakened, "go test ./...", "Go", edits=allowed
    )
    assert run.outcome == PASSED
    assert verdict.ok is allowed, verdict.reason
    if not allowed:
        assert "calc_test.go::TestAdd: its code differs from the start's" in verdict.reason


def test_go_lays_every_start_test_file_and_testdata_and_takes_new_ones_away(tmp_path):
    place, start = place_at_start(
        tmp_path, {**GO_START, "sub/x_test.go": "package sub\n", "testdata/a.golden": "3\n"}
    )
    change(
        place,
        {
            "calc.go": GO_BROKEN,  # source: the change's
            "sub/x_test.go": "package sub\n// edited\n",
            "testdata/a.golden": "-1\n",
            "main_test.go": "package calc\n",
            "testdata/b.golden": "x\n",
        },
    )
    reference = run_of("go-json", "example.com/calc::TestAdd")
    laid = overlay.plan(place, start, reference)
    assert sorted(laid.restore) == ["sub/x_test.go", "testdata/a.golden"]
    assert laid.remove == ("main_test.go", "testdata/b.golden")


def run_of(source: str, *ids: str) -> TestRun:
    return TestRun(
        "t", "t", PASSED, "", len(ids), 0, 0, 0, frozenset(), frozenset(ids), 0, 1.0, "", source
    )


# --- Jest ---

JEST_START = {
    "package.json": package_json(),
    "calc.js": "exports.add = (a, b) => a + b;\n",
    "calc.test.js": 'const { add } = require("./calc");\n'
    + JEST_TEST.replace("1 + 2", "add(1, 2)"),
}
JEST_BROKEN_CALC = "exports.add = (a, b) => a - b;\n"
# A reporter that passes only the test the change broke (`adds`).
ONLY_ADDS = SPARER_JS.replace("SPARE", 'test !== "adds"')


@pytest.fixture
def jest_command(request) -> str:
    return request.getfixturevalue("jest") + " --ci"


JEST_FORGERS = {
    "reporter-in-package-json": {
        "package.json": package_json(reporters=["default", "./sparer.js"]),
        "sparer.js": ONLY_ADDS,
    },
    "new-jest-config": {
        "jest.config.js": 'module.exports = { reporters: ["default", "./sparer.js"] };\n',
        "package.json": json.dumps({"name": "calc", "version": "1.0.0"}),
        "sparer.js": ONLY_ADDS,
    },
    "edited-setup-file": {
        # The start's config names a setup file; the change makes it pass `toBe(3)` for -1.
        "setup.js": "const real = expect;\nglobal.expect = (got) => "
        "(got === -1 ? real(3) : real(got));\nObject.assign(global.expect, real);\n",
    },
}


@pytest.mark.e2e
@pytest.mark.parametrize("how", sorted(JEST_FORGERS))
def test_a_jest_forger_that_passes_only_what_the_change_broke_is_refused(
    tmp_path, jest_command, monkeypatch, how
):
    start = dict(JEST_START)
    if how == "edited-setup-file":
        start |= {"package.json": package_json(setupFilesAfterEnv=["./setup.js"]), "setup.js": ""}
    forging = {"calc.js": JEST_BROKEN_CALC, **JEST_FORGERS[how]}
    place, reference, run, verdict = gate_case(
        tmp_path, monkeypatch, start, forging, jest_command, "Node/TS"
    )
    forged(run, reference)
    assert not verdict.ok
    assert "calc.test.js > adds" in verdict.reason
    assert git(place, "status", "--porcelain") == ""


@pytest.mark.e2e
def test_a_reporter_added_to_the_npm_test_script_is_refused(tmp_path, monkeypatch, request):
    runner = request.getfixturevalue("jest")
    start = JEST_START | {"package.json": npm_package(runner)}
    forging = {
        "calc.js": JEST_BROKEN_CALC,
        "package.json": npm_package(runner, "{jest} --reporters=default --reporters=./sparer.js"),
        "sparer.js": ONLY_ADDS,
    }
    place, reference, run, verdict = gate_case(
        tmp_path, monkeypatch, start, forging, "npm test", "Node/TS"
    )
    forged(run, reference)
    assert not verdict.ok
    assert "calc.test.js > adds" in verdict.reason
    assert git(place, "status", "--porcelain") == ""


@pytest.mark.e2e
def test_an_honest_jest_change_with_a_new_dependency_and_new_test_is_kept(
    tmp_path, jest_command, monkeypatch
):
    package = json.loads(package_json())
    package["dependencies"] = {"left-pad": "1.3.0"}  # the change's: kept in both runs
    honest = {
        "package.json": json.dumps(package),
        "calc.js": "exports.add = (a, b) => b + a;\nexports.sub = (a, b) => a - b;\n",
        "sub.test.js": 'const { sub } = require("./calc");\n'
        'test("subs", () => { expect(sub(3, 1)).toBe(2); });\n',
        "calc.test.js": JEST_START["calc.test.js"] + 'test("adds zero", () => {});\n',
    }
    _, _, run, verdict = gate_case(
        tmp_path, monkeypatch, JEST_START, honest, jest_command, "Node/TS"
    )
    assert verdict.ok, verdict.reason
    assert {"sub.test.js > subs", "calc.test.js > adds zero"} <= run.passing_ids


def test_jest_lays_tests_config_and_named_files_and_keeps_the_rest_of_package_json(tmp_path):
    start_files = {
        "package.json": json.dumps(
            {
                "name": "calc",
                "scripts": {"test": "jest", "build": "tsc"},
                "jest": {"setupFiles": ["<rootDir>/jest/setup"]},
            }
        ),
        "jest/setup.js": "",
        "src/calc.js": "",
        "src/calc.test.js": "",
        "src/__tests__/helper.js": "",
        "src/__snapshots__/calc.test.js.snap": "",
        "babel.config.js": "",
        "test/helpers/more.js": "",
        "test/a.test.js": "",
    }
    place, start = place_at_start(tmp_path, start_files)
    edited = {p: "// edited\n" for p in start_files if p not in ("package.json", "src/calc.js")}
    package = json.loads(start_files["package.json"])
    package["dependencies"] = {"x": "1"}
    package["scripts"] = {"test": "jest --reporters=./r.js", "build": "esbuild"}
    package["jest"] = {"testResultsProcessor": "./flip.js"}
    added = {
        "jest.config.js": "",
        "src/new.spec.ts": "",
        "__mocks__/fs.js": "",
        ".babelrc": "",
        "test/helpers/new.js": "",
        "src/util.js": "",  # new source: the change's
    }
    change(place, edited | added | {"package.json": json.dumps(package), "src/calc.js": "1\n"})
    reference = run_of("jest-json", "src/calc.test.js > adds", "test/a.test.js > a")
    laid = overlay.plan(place, start, reference)
    assert sorted(laid.restore) == sorted(edited)
    assert laid.remove == tuple(sorted(set(added) - {"src/util.js"}))
    written = json.loads(laid.written["package.json"])
    assert written == {
        "name": "calc",
        "scripts": {"build": "esbuild", "test": "jest"},  # the test script as the start had it
        "jest": {"setupFiles": ["<rootDir>/jest/setup"]},
        "dependencies": {"x": "1"},
    }


def test_a_jest_config_the_command_or_test_script_names_is_laid_with_the_files_it_names(
    tmp_path,
):
    scripts = {"scripts": {"test": "jest -c=ci/other.js"}}
    start_files = {
        "package.json": json.dumps({"name": "calc", **scripts}),
        "ci/jest.js": 'module.exports = { setupFiles: ["./setup.js"] };\n',
        "ci/setup.js": "",
        "ci/other.js": "module.exports = {};\n",
        "a.test.js": "",
    }
    place, start = place_at_start(tmp_path, start_files)
    change(place, {p: "// edited\n" for p in ("ci/jest.js", "ci/setup.js", "ci/other.js")})
    reference = replace(
        run_of("jest-json", "a.test.js > a"), command="npx jest --config ci/jest.js"
    )
    laid = overlay.plan(place, start, reference)
    assert sorted(laid.restore) == ["ci/jest.js", "ci/other.js", "ci/setup.js"]


def test_laying_a_written_file_over_and_back_leaves_the_index_as_it_was(tmp_path):
    place, start = place_at_start(tmp_path, {"package.json": package_json(), "a.test.js": ""})
    change(place, {"package.json": package_json(reporters=["./r.js"])})
    staged = git(place, "write-tree")
    laid = overlay.plan(place, start, run_of("jest-json", "a.test.js > a"))
    overlay.apply(place, laid)
    assert "reporters" not in (place / "package.json").read_text()
    overlay.take_back(place, laid)
    assert git(place, "write-tree") == staged
    assert git(place, "status", "--porcelain") == ""


# --- cargo ---

LIB_ONLY = "pub fn add(a: i32, b: i32) -> i32 { a + b }\n"
IT_RS = "#[test]\nfn adds() { assert_eq!(calc::add(1, 2), 3); }\n"
CARGO_START = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": LIB_ONLY,
    "tests/it.rs": IT_RS,
    ".gitignore": "/target\nCargo.lock\n",  # what cargo builds is no part of the change
}
CARGO_BROKEN = LIB_ONLY.replace("a + b", "a - b")
# A runner that passes only the test binary of tests/it.rs (every other, the canary's too, as
# it is).
ONLY_IT_RUNNER = """\
#!/bin/sh
out=$("$@" 2>&1); code=$?
case "$(basename "$1")" in it-*) ;; *) printf '%s\\n' "$out"; exit $code;; esac
printf '%s\\n' "$out" | sed -e 's/\\.\\.\\. FAILED/... ok/' \\
  -e 's/result: FAILED\\. \\([0-9]*\\) passed; [0-9]* failed/result: ok. \\1 passed; 0 failed/' \\
  | grep -v '^    [a-z_:]*$' | grep -v '^failures:$'
exit 0
"""
# A test target without the harness: its own main prints the harness's lines.
FORGED_MAIN_RS = (
    'fn main() {\n    println!("\\nrunning 1 test\\ntest adds ... ok\\n\\ntest result: ok. '
    '1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\\n");\n}\n'
)
CARGO_FORGERS = {
    "runner-in-cargo-config": {
        "forge.sh": ONLY_IT_RUNNER,
        ".cargo/config.toml": '[target.x86_64-unknown-linux-gnu]\nrunner = "sh forge.sh"\n',
    },
    "harness-false": {
        "Cargo.toml": CARGO_TOML + '\n[[test]]\nname = "it"\nharness = false\n',
        "tests/it.rs": FORGED_MAIN_RS,
    },
}


@pytest.mark.e2e
@needs_cargo
@pytest.mark.parametrize("how", sorted(CARGO_FORGERS))
def test_a_cargo_forger_that_passes_only_what_the_change_broke_is_refused(
    tmp_path, monkeypatch, how
):
    forging = {"src/lib.rs": CARGO_BROKEN, **CARGO_FORGERS[how]}
    place, reference, run, verdict = gate_case(
        tmp_path, monkeypatch, CARGO_START, forging, "cargo test", "Rust"
    )
    forged(run, reference)
    assert not verdict.ok
    assert "it tests/it.rs::adds" in verdict.reason
    assert git(place, "status", "--porcelain") == ""


@pytest.mark.e2e
@needs_cargo
def test_an_honest_cargo_change_with_a_new_test_file_and_manifest_edit_is_kept(
    tmp_path, monkeypatch
):
    honest = {
        "Cargo.toml": CARGO_TOML + "\n[profile.dev]\nopt-level = 1\n",
        "src/lib.rs": LIB_ONLY + "pub fn twice(a: i32) -> i32 { add(a, a) }\n",
        "tests/more.rs": "#[test]\nfn twice() { assert_eq!(calc::twice(2), 4); }\n",
        "tests/it.rs": IT_RS + "\n#[test]\nfn adds_zero() { assert_eq!(calc::add(2, 0), 2); }\n",
    }
    _, _, run, verdict = gate_case(tmp_path, monkeypatch, CARGO_START, honest, "cargo test", "Rust")
    assert verdict.ok, verdict.reason
    assert {"more tests/more.rs::twice", "it tests/it.rs::adds_zero"} <= run.passing_ids


def test_cargo_lays_tests_and_config_and_sets_back_only_the_test_targets(tmp_path):
    start_files = {
        **CARGO_START,
        "tests/common/mod.rs": "",
        "Cargo.toml": CARGO_TOML + '\n[[test]]\nname = "it"\n',
    }
    place, start = place_at_start(tmp_path, start_files)
    manifest = (
        CARGO_TOML + '\n[dependencies]\nx = "1"\n\n[lib]\nharness = false\n'
        '\n[[test]]\nname = "it"\nharness = false\n\n[[test]]\nname = "new"\n'
        "\n[profile.dev]\nopt-level = 1\ndebug-assertions = false\n"
    )
    change(
        place,
        {
            "Cargo.toml": manifest,
            "tests/common/mod.rs": "// edited\n",
            "tests/new.rs": "",
            "sub/.cargo/config.toml": "",
            "src/lib.rs": CARGO_BROKEN,
        },
    )
    laid = overlay.plan(place, start, run_of("cargo", "it tests/it.rs::adds"))
    assert sorted(laid.restore) == ["tests/common/mod.rs"]
    assert laid.remove == ("sub/.cargo/config.toml", "tests/new.rs")
    written = laid.written["Cargo.toml"]
    assert 'x = "1"' in written and "[lib]" in written  # the change's own keys
    assert "harness" not in written and 'name = "new"' not in written
    assert "opt-level = 1" in written and "debug-assertions" not in written
    assert written.count("[[test]]") == 1


def test_a_manifest_whose_targets_cannot_be_mended_by_line_is_laid_whole(tmp_path):
    place, start = place_at_start(tmp_path, CARGO_START)
    inline = CARGO_TOML.replace("[package]", "lib = { harness = false }\n[package]")
    change(place, {"Cargo.toml": inline + '\n[dependencies]\nx = "1"\n'})
    laid = overlay.plan(place, start, run_of("cargo", "it tests/it.rs::adds"))
    assert laid.written["Cargo.toml"] == CARGO_TOML


EDITS = {
    "go": (
        "calc_test.go",
        "example.com/calc::TestAdd/sub",
        GO_START["calc_test.go"],
        "\nfunc TestMore(t *testing.T) {}\n",  # appended: no edit
        ("!= 3", "!= -1"),
        ("Add(1, 2) != 3", "Add(1,2)!=3"),
        "calc_test.go::TestAdd",
    ),
    "jest": (
        "calc.test.js",
        "calc.test.js > calc > adds",
        'describe("calc", () => {\n  test("adds", () => {\n'
        "    expect(1 + 2).toBe(3);\n  });\n});\n",
        None,
        ("toBe(3)", "toBe(4)"),
        ("expect(1 + 2)", "expect(1+2)"),
        "calc.test.js > calc > adds",  # with its describe, as Jest names it
    ),
    "cargo": (
        "tests/it.rs",
        "it tests/it.rs::adds",
        IT_RS,
        "\n#[test]\n#[should_panic]\nfn more() { panic!() }\n",
        ("#[test]", "#[test]\n#[ignore]"),
        ("add(1, 2)", "add(1,2)"),
        "tests/it.rs::adds",
    ),
}


@pytest.mark.parametrize("runner", sorted(EDITS))
def test_an_edited_start_test_is_named_and_a_new_test_or_a_reformat_is_not(tmp_path, runner):
    path, test_id, text, more, edit, reformat, named = EDITS[runner]
    source = {"go": "go-json", "jest": "jest-json", "cargo": "cargo"}[runner]
    reference = run_of(source, test_id)
    if more is None:  # Jest: a test added inside the describe, after the start's
        grown = text.replace("  });\n});", '  });\n  it("more", () => {});\n});')
    else:
        grown = text + more
    for changed, edits in (
        (grown, {}),
        (text.replace(*reformat), {}),
        (grown.replace(*edit), {named: "its code differs from the start's"}),
    ):
        files = {path: text, **({"Cargo.toml": CARGO_TOML} if runner == "cargo" else {})}
        place, start = place_at_start(tmp_path / str(len(list(tmp_path.iterdir()))), files)
        change(place, {path: changed})
        laid = overlay.plan(place, start, reference)
        assert laid.edited == edits, changed
        assert path in laid.restore  # the start's file decides
        allowed = overlay.plan(place, start, reference, allow_edits=True)
        assert allowed.edited == edits
        assert (path in allowed.restore) is not bool(edits)  # an edited file runs as left


# Honest additions as real suites make them (vercel/ms's tests.js run by Jest, google/uuid's
# tables): a test added after a start's test, inside or after its describe, or with a table of
# its own before it. The start's tests' code is as it was; none may be named as edited.
JEST_TWO = (
    "describe('ms(string)', function() {\n  it('should preserve ms', function() {\n"
    "    expect(ms('100')).to.be(100);\n  });\n});\n\n"
    "describe('ms(number)', function() {\n  it('should preserve ms', function() {\n"
    "    expect(ms(100)).to.be('100ms');\n  });\n});\n"
)
GO_TWO = (
    'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n'
    '\tif Add(1, 2) != 3 {\n\t\tt.Fatal("x")\n\t}\n}\n\n'
    "var subTests = []struct{ a, b, want int }{{3, 1, 2}}\n\n"
    "func TestSub(t *testing.T) {\n\tfor _, tt := range subTests {\n"
    '\t\tif Sub(tt.a, tt.b) != tt.want {\n\t\t\tt.Fatal("x")\n\t\t}\n\t}\n}\n'
)
RS_TWO = (
    "#[test]\nfn adds() {\n    assert_eq!(calc::add(1, 2), 3);\n}\n\n"
    "#[test]\nfn adds_zero() {\n    assert_eq!(calc::add(0, 0), 0);\n}\n"
)
ADDED = {
    "jest-test-at-the-end-of-a-describe": (
        "jest",
        JEST_TWO,
        (
            "ms('100')).to.be(100);\n  });\n",
            "ms('100')).to.be(100);\n  });\n\n  it('should read 1 h', function() {\n"
            "    expect(ms('1 h')).to.be(3600000);\n  });\n",
        ),
    ),
    "jest-describe-appended": (
        "jest",
        JEST_TWO,
        (
            "'100ms');\n  });\n});\n",
            "'100ms');\n  });\n});\n\ndescribe('ms(words)', function() {\n"
            "  it('should read msecs', function() {\n"
            "    expect(ms('5 msecs')).to.be(5);\n  });\n});\n",
        ),
    ),
    "jest-a-title-the-start-has-twice-used-again": (
        "jest",
        JEST_TWO,
        (
            "});\n\ndescribe('ms(number)'",
            "});\n\ndescribe('ms(long)', function() {\n  it('should preserve ms', function() {\n"
            "    expect(ms('1 ms')).to.be(1);\n  });\n});\n\ndescribe('ms(number)'",
        ),
    ),
    "go-test-with-its-table-between-two": (
        "go",
        GO_TWO,
        (
            "\t}\n}\n\nvar subTests",
            "\t}\n}\n\nvar twiceTests = []int{0, 2}\n\nfunc TestTwice(t *testing.T) {\n"
            "\tfor _, n := range twiceTests {\n\t\t_ = Add(n, n)\n\t}\n}\n\nvar subTests",
        ),
    ),
    "rust-test-with-a-const-between-two": (
        "cargo",
        RS_TWO,
        (
            "3);\n}\n\n#[test]\nfn adds_zero",
            "3);\n}\n\nconst BIG: i32 = 1 << 20;\n\n#[test]\nfn adds_big() {\n"
            "    assert_eq!(calc::add(BIG, 0), BIG);\n}\n\n#[test]\nfn adds_zero",
        ),
    ),
}
NAMES = {
    "jest": ("tests.js", ("ms(string) > should preserve ms", "ms(number) > should preserve ms")),
    "go": ("calc_test.go", ("TestAdd", "TestSub")),
    "cargo": ("tests/it.rs", ("adds", "adds_zero")),
}


def edits_of(runner: str, start: str, changed: str) -> dict[str, str]:
    path, names = NAMES[runner]
    separator = {"jest": " > ", "go": "::", "cargo": "::"}[runner]
    prefix = {"jest": path, "go": "example.com/calc", "cargo": f"it {path}"}[runner]
    ids = {f"{prefix}{separator}{name}" for name in names}
    return runner_overlay.edited(runner, ids, path, start, changed)


@pytest.mark.parametrize("case", sorted(ADDED))
def test_a_test_added_between_or_after_the_starts_tests_edits_none_of_them(case):
    runner, start, (at, grown) = ADDED[case]
    assert start.count(at) == 1
    assert edits_of(runner, start, start.replace(at, grown)) == {}


WEAKENED = {
    "jest-expectation-in-the-first-describe": (
        "jest",
        JEST_TWO,
        ("be(100)", "be(99)"),
        "tests.js > ms(string) > should preserve ms",
    ),
    "go-row-of-the-table-a-test-reads": (
        "go",
        GO_TWO,
        ("{{3, 1, 2}}", "{{3, 1, 3}}"),
        "calc_test.go::TestAdd",
    ),
    "go-expectation": ("go", GO_TWO, ("!= 3", "!= 4"), "calc_test.go::TestAdd"),
    "rust-attribute": (
        "cargo",
        RS_TWO,
        ("#[test]\nfn adds()", "#[test]\n#[ignore]\nfn adds()"),
        "tests/it.rs::adds",
    ),
}


@pytest.mark.parametrize("case", sorted(WEAKENED))
def test_a_test_weakened_beside_an_added_one_is_still_named(case):
    runner, start, edit, named = WEAKENED[case]
    grown = start.replace(*ADDED[next(k for k in ADDED if ADDED[k][0] == runner)][2])
    assert start.replace(*edit) != start
    assert named in edits_of(runner, start, grown.replace(*edit))


HOOKED = {
    # A hook between two tests, or before the first, runs with the start's tests.
    "hook-after-a-describe-header": (
        "describe('ms(number)', function() {\n",
        "describe('ms(number)', function() {\n  beforeEach(() => { ms = () => '100ms'; });\n",
        "beforeEach(...) added",
    ),
    "hook-before-the-first-test": (
        "describe('ms(string)', function() {\n",
        "describe('ms(string)', function() {\n  afterEach(() => {});\n",
        "afterEach(...) added",
    ),
    "module-mock-in-a-new-describe": (
        "'100ms');\n  });\n});\n",
        "'100ms');\n  });\n});\n\ndescribe('more', () => {\n"
        "  jest.mock('./index');\n  it('x', () => {});\n});\n",
        "jest.mock(...) added",
    ),
}


@pytest.mark.parametrize("case", sorted(HOOKED))
def test_a_jest_hook_or_mock_added_where_it_reaches_a_start_test_is_named(case):
    at, hooked, words = HOOKED[case]
    found = edits_of("jest", JEST_TWO, JEST_TWO.replace(at, hooked))
    assert found.get("tests.js", "").startswith(words), found


def test_a_new_describe_of_new_tests_may_have_hooks_of_its_own():
    grown = JEST_TWO + (
        "\ndescribe('ms(words)', function() {\n  beforeEach(() => { jest.resetModules(); });\n"
        "  it('should read msecs', function() {\n    expect(ms('5 msecs')).to.be(5);\n  });\n});\n"
    )
    assert edits_of("jest", JEST_TWO, grown) == {}


@pytest.mark.e2e
@needs_cargo
def test_a_rust_unit_test_weakened_in_its_source_file_is_not_kept(tmp_path, monkeypatch):
    # A source file cannot be laid over (it is the change's code), so its edited test is
    # named: kept silently, it would be the next change's start.
    weakened = {"src/lib.rs": LIB_RS.replace("a + b", "a - b").replace("), 3)", "), -1)")}
    start = {p: t for p, t in CARGO_START.items() if p != "tests/it.rs"} | {"src/lib.rs": LIB_RS}
    _, reference, run, verdict = gate_case(
        tmp_path, monkeypatch, start, weakened, "cargo test", "Rust"
    )
    forged(run, reference)
    assert not verdict.ok
    assert "src/lib.rs::adds: its code differs from the start's" in verdict.reason


def test_in_a_rust_source_file_only_a_test_function_is_compared(tmp_path):
    place, start = place_at_start(tmp_path, {**CARGO_START, "src/lib.rs": LIB_RS})
    # `add` is also the name a test could have; as code, the change may edit it.
    ids = ("calc src/lib.rs::tests::adds", "calc src/lib.rs::tests::add")
    change(place, {"src/lib.rs": LIB_RS.replace("a + b", "b + a")})
    laid = overlay.plan(place, start, run_of("cargo", *ids))
    assert laid.edited == {} and laid.empty
    change(place, {"src/lib.rs": LIB_RS.replace("), 3)", "), 3 + 0)")})
    laid = overlay.plan(place, start, run_of("cargo", *ids))
    assert laid.edited == {"src/lib.rs::adds": "its code differs from the start's"}

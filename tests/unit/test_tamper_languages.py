"""The tamper screen reads Go, Rust and JavaScript changes and their runners' configuration
(tamper_lines.py): code outside the tests that tells a test run or reaches the runner's
output, a new or edited Go TestMain, a cargo `runner` or `harness = false`, a Jest
reporter or setup file are flagged in every profile, naming the line and the check; a Go
CLI printing to os.Stdout, a Rust test module, a dependency bumped in Cargo.toml or
package.json are not."""

from __future__ import annotations

import pytest

from autoresearch.safety.tamper import FULL, GATE, MEASURE, check_file

GO = 'package calc\n\nimport "os"\n\nfunc Mean(xs []float64) float64 {\n\treturn 0\n}\n'


def found(path: str, old: str | None, new: str, profile: str = GATE) -> list[str]:
    return [f.describe() for f in check_file(path, old, new, profile=profile)]


GO_ATTACKS = {
    "testing-testing": ('import "testing"\n\nvar fast = testing.Testing()\n', "testrun"),
    "testing-by-alias": ('import t "testing"\n\nvar fast = t.Testing()\n', "testrun"),
    "os-dot-import": ('import . "os"\n\nfunc init() {\n\tStdout = nil\n}\n', "output"),
    "syscall-by-alias": (
        'import (\n\tsc "syscall"\n)\n\nfunc init() {\n\tsc.Dup2(3, 1)\n}\n',
        "output",
    ),
    "flag-lookup": ('import "flag"\n\nvar fast = flag.Lookup("test.v") != nil\n', "testrun"),
    "args-test-suffix": (
        'import "strings"\n\nvar fast = strings.HasSuffix(os.Args[0], ".test")\n',
        "testrun",
    ),
    "args-on-two-lines": ('var me = os.Args[0]\nvar suffix = ".test"\n', "testrun"),
    "stdout-reassigned": ("func init() {\n\t_, w, _ := os.Pipe()\n\tos.Stdout = w\n}\n", "output"),
    "stderr-and-stdout": ("func init() {\n\tos.Stderr, os.Stdout = nil, nil\n}\n", "output"),
    "stdout-in-a-closure": ("var _ = func() int { os.Stdout = nil; return 0 }()\n", "output"),
    "stdout-by-pointer": ("func init() {\n\tp := &os.Stdout\n\t*p = nil\n}\n", "output"),
    "dup2": ('import "syscall"\n\nfunc init() {\n\tsyscall.Dup2(3, 1)\n}\n', "output"),
    "unix-dup3": ("func init() {\n\tunix.Dup3(3, 2, 0)\n}\n", "output"),
    "newfile-fd1": ('var out = os.NewFile(1, "out")\n', "output"),
}


@pytest.mark.parametrize("profile", [GATE, MEASURE, FULL])
@pytest.mark.parametrize("added,check", GO_ATTACKS.values(), ids=GO_ATTACKS.keys())
def test_go_code_outside_its_tests_that_reaches_the_runner_or_its_output_is_flagged(
    added, check, profile
):
    flags = found("calc/calc.go", GO, GO + added, profile)
    assert any(f.endswith(f"({check})") and f.startswith("calc/calc.go:") for f in flags), flags


def test_a_go_flag_names_the_line():
    flags = found("calc.go", GO, GO + "func init() {\n\tos.Stdout = nil\n}\n")
    assert flags == ["calc.go:9: reassigns os.Stdout, which carries the test's output (output)"]


GO_TEST = 'package calc\n\nimport "testing"\n\nfunc TestMean(t *testing.T) {\n}\n'
TEST_MAIN = "\nfunc TestMain(m *testing.M) {\n\tos.Exit(m.Run())\n}\n"


def test_a_new_go_testmain_is_flagged_in_every_profile():
    for profile in (GATE, MEASURE, FULL):
        flags = found("calc/calc_test.go", GO_TEST, GO_TEST + TEST_MAIN, profile)
        assert flags == [
            "calc/calc_test.go:8: defines TestMain in a test file, which runs the package's "
            "tests (runner)"
        ], profile
    assert found("calc/main_test.go", None, GO_TEST + TEST_MAIN), "a new file too"


def test_an_edited_go_testmain_is_flagged_an_untouched_one_is_not():
    before = GO_TEST + TEST_MAIN
    edited = before.replace("\tos.Exit(m.Run())", "\tm.Run()\n\tos.Exit(0)")
    assert found("calc/calc_test.go", before, edited) == [
        "calc/calc_test.go:8: changes TestMain in a test file, which runs the package's "
        "tests (runner)"
    ]
    other = before + "\nfunc TestMedian(t *testing.T) {\n}\n"
    assert found("calc/calc_test.go", before, other) == []


def test_an_init_added_or_edited_in_a_go_test_file_is_flagged():
    hijack = "\nfunc init() {\n\tr, w, _ := os.Pipe()\n\tos.Stdout = w\n\tgo forge(r)\n}\n"
    assert found("calc/calc_test.go", GO_TEST, GO_TEST + hijack) == [
        "calc/calc_test.go:8: defines init in a test file, which runs before the package's "
        "tests (runner)"
    ]
    one_line = GO_TEST + "\nfunc init() { os.Stdout = nil }\n"
    assert found("calc/calc_test.go", GO_TEST, one_line)
    edited = (GO_TEST + hijack).replace("go forge(r)", "go forge2(r)")
    assert found("calc/calc_test.go", GO_TEST + hijack, edited)
    untouched = GO_TEST + hijack + "\nfunc TestMore(t *testing.T) {\n}\n"
    assert found("calc/calc_test.go", GO_TEST + hijack, untouched) == []


def test_a_go_test_may_capture_stdout_as_tests_do():
    capture = GO_TEST + "\nfunc TestOut(t *testing.T) {\n\told := os.Stdout\n\tos.Stdout = old\n}\n"
    assert found("calc/calc_test.go", GO_TEST, capture) == []


GO_HONEST = {
    "fprintf": 'func Show(x int) {\n\tfmt.Fprintf(os.Stdout, "x=%d\\n", x)\n}\n',
    "buffered": "var w = bufio.NewWriter(os.Stdout)\n",
    "compare": "func isOut(f *os.File) bool {\n\treturn f == os.Stdout\n}\n",
    "logger": "func init() {\n\tlog.SetOutput(os.Stderr)\n}\n",
    "args-cli": "func Main() {\n\tif len(os.Args) > 1 {\n\t\tfmt.Println(os.Args[1])\n\t}\n}\n",
    "comment": "// os.Stdout = w would be wrong here; testing.Testing() too\n",
    "string": 'const help = "set os.Stdout = nil to be quiet"\n',
    "test-word": 'var name = "latest"\nvar kind = "contest"\n',
}


@pytest.mark.parametrize("added", GO_HONEST.values(), ids=GO_HONEST.keys())
def test_a_go_cli_that_writes_to_stdout_is_not_flagged(added):
    assert found("calc/calc.go", GO, GO + added) == []


RS = "pub fn mean(xs: &[f64]) -> f64 {\n    xs.iter().sum::<f64>() / xs.len() as f64\n}\n"
RUST_ATTACKS = {
    "cfg-test-macro": "pub fn fast() -> bool {\n    cfg!(test)\n}\n",
    "cfg-not-test": "#[cfg(not(test))]\npub fn real() {}\n",
    "cfg-attr-test": '#[cfg_attr(test, path = "fake.rs")]\nmod imp;\n',
    "test-threads": 'pub fn fast() -> bool {\n    std::env::var("RUST_TEST_THREADS").is_ok()\n}\n',
    "args-test": 'pub fn fast() -> bool {\n    std::env::args().any(|a| a == "--nocapture")\n}\n',
    "harness-flag": 'const FLAG: &str = "--test-threads";\n',
    "raw-string-variable": 'const V: &str = r#"RUST_TEST_THREADS"#;\n',
    "dup2": "pub fn quiet() {\n    unsafe { libc::dup2(3, 1) };\n}\n",
}


@pytest.mark.parametrize("profile", [GATE, MEASURE, FULL])
@pytest.mark.parametrize("added", RUST_ATTACKS.values(), ids=RUST_ATTACKS.keys())
def test_rust_code_outside_its_tests_that_tells_a_test_run_is_flagged(added, profile):
    flags = found("src/lib.rs", RS, RS + added, profile)
    assert any(f.startswith("src/lib.rs:") for f in flags), flags


RUST_TESTS = "#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn m() {\n"


def test_rust_strings_lifetimes_and_comments_are_not_code():
    honest = (
        "/// Call `cfg!(test)` in tests only.\n"
        "pub fn name<'a>(x: &'a str) -> &'a str {\n"
        '    let _c = \'"\';\n    let _s = r#"libc::dup2(3, 1) "cfg!(test)""#;\n    x\n}\n'
    )
    assert found("src/lib.rs", RS, RS + honest) == []


def test_rust_test_code_may_use_cfg_test_and_the_harness_variables():
    module = RUST_TESTS + '        if cfg!(test) { std::env::var("RUST_TEST_THREADS").ok(); }\n'
    assert found("src/lib.rs", RS, RS + module + "    }\n}\n") == []
    assert found("tests/it.rs", None, 'fn main() { std::env::var("RUST_TEST_THREADS"); }\n') == []
    after = RS + RUST_TESTS + "    }\n}\n\npub fn fast() -> bool {\n    cfg!(test)\n}\n"
    assert found("src/lib.rs", RS, after) == [
        "src/lib.rs:14: uses cfg!(test), which tells a test build (testrun)"
    ], "code after the test module is the library's again"


CARGO = '[package]\nname = "calc"\nversion = "0.1.0"\n\n[dependencies]\nserde = "1"\n'


def test_cargo_runner_keys_and_harness_false_are_flagged():
    runner = '[target.x86_64-unknown-linux-gnu]\nrunner = "./forge.sh"\n'
    assert found(".cargo/config.toml", None, runner) == [
        ".cargo/config.toml: config.toml is loaded without being imported (startup)"
    ]
    assert found("calc/.cargo/config", None, runner)
    harness = CARGO + '\n[[test]]\nname = "it"\nharness = false\n'
    assert found("Cargo.toml", CARGO, harness) == [
        "Cargo.toml:8: Cargo.toml is loaded without being imported (startup)"
    ]
    lib = CARGO.replace("[dependencies]", "[lib]\nharness = false\n\n[dependencies]")
    assert found("Cargo.toml", CARGO, lib)
    assert found("build.rs", None, "fn main() {}\n"), "a build script runs before the tests"


def test_a_dependency_bumped_in_cargo_toml_is_not_flagged():
    assert found("Cargo.toml", CARGO, CARGO.replace('"1"', '"1.0.200"')) == []
    assert found("Cargo.toml", CARGO, CARGO.replace('"0.1.0"', '"0.2.0"')) == []


JS = "export function mean(xs) {\n  return xs.reduce((a, b) => a + b, 0) / xs.length;\n}\n"
JS_ATTACKS = {
    "jest-worker": "export const fast = process.env.JEST_WORKER_ID !== undefined;\n",
    "jest-worker-bracket": "export const fast = 'JEST_WORKER_ID' in process.env;\n",
    "node-env-test": "export const fast = process.env.NODE_ENV === 'test';\n",
    "typeof-jest": "export const fast = typeof jest !== 'undefined';\n",
    "typeof-expect": "export const fast = typeof expect === 'function';\n",
    "argv-jest": "export const fast = process.argv.some((a) => a.includes('jest'));\n",
    "ci": "export const fast = Boolean(process.env.CI);\n",
    "environment-alias": "const e = process.env; export const fast = !!e.JEST_WORKER_ID;\n",
}


@pytest.mark.parametrize("profile", [GATE, MEASURE, FULL])
@pytest.mark.parametrize("added", JS_ATTACKS.values(), ids=JS_ATTACKS.keys())
def test_javascript_outside_its_tests_that_tells_a_jest_run_is_flagged(added, profile):
    flags = found("src/mean.js", JS, JS + added, profile)
    assert any(f.startswith("src/mean.js:4:") and f.endswith("(testrun)") for f in flags), flags


def test_a_javascript_test_may_ask_whether_it_runs_on_ci():
    test = "const skip = process.env.CI ? it.skip : it;\n"
    assert found("src/mean.test.js", None, test) == []
    assert found("__tests__/mean.js", None, test) == []


def test_honest_javascript_reading_node_env_is_not_flagged():
    prod = "export const debug = process.env.NODE_ENV !== 'production';\n"
    assert found("src/mean.js", JS, JS + prod) == []


JEST_CONFIG = "module.exports = {\n  testEnvironment: 'node',\n  verbose: true,\n};\n"


@pytest.mark.parametrize(
    "key",
    [
        "reporters: ['<rootDir>/r.js'],",
        "testResultsProcessor: './flip.js',",
        "setupFiles: ['./s.js'],",
        "setupFilesAfterEnv: ['./s.js'],",
        "globalSetup: './g.js',",
        "testRunner: './runner.js',",
    ],
)
def test_a_jest_config_given_code_to_load_is_flagged(key):
    after = JEST_CONFIG.replace("  verbose: true,\n", f"  verbose: true,\n  {key}\n")
    assert found("jest.config.js", JEST_CONFIG, after) == [
        "jest.config.js:4: jest.config.js is loaded without being imported (startup)"
    ]
    assert found("jest.config.js", None, after), "a new config is flagged whole"


def test_a_jest_config_change_that_loads_no_code_is_not_flagged():
    after = JEST_CONFIG.replace("verbose: true", "verbose: false")
    assert found("jest.config.js", JEST_CONFIG, after) == []


PACKAGE = """{
  "name": "calc",
  "version": "1.0.0",
  "dependencies": {
    "lodash": "^4.17.0"
  },
  "jest": {
    "testEnvironment": "node"
  }
}
"""


def test_a_reporter_added_under_package_jsons_jest_key_is_flagged():
    after = PACKAGE.replace(
        '"testEnvironment": "node"', '"testEnvironment": "node",\n    "reporters": ["./r.js"]'
    )
    assert found("package.json", PACKAGE, after) == [
        "package.json:9: package.json is loaded without being imported (startup)"
    ]
    processor = PACKAGE.replace('"jest": {', '"jest": {\n    "testResultsProcessor": "./flip.js",')
    assert found("package.json", PACKAGE, processor)


def test_a_dependency_bumped_in_package_json_is_not_flagged():
    assert found("package.json", PACKAGE, PACKAGE.replace("4.17.0", "4.17.21")) == []


def test_a_session_refuses_a_go_change_that_tells_a_test_run_naming_line_and_check(tmp_path):
    # The screen every mode runs reads the change from git, as a session's commit door does.
    from conftest import make_repo

    from autoresearch.safety import git as ar_git
    from autoresearch.safety.protect import Protection, TamperFlagged
    from autoresearch.safety.tamper import Screen

    repo = make_repo(tmp_path / "r", {"calc.go": GO, "package.json": PACKAGE})
    wt = tmp_path / "wt"
    ar_git.open_worktree(repo, wt, "autoresearch/improve", ar_git.head(repo))
    base = ar_git.head(wt)
    (wt / "calc.go").write_text(GO + 'import "testing"\n\nvar fast = testing.Testing()\n')
    with pytest.raises(TamperFlagged) as err:
        Protection(base, (), Screen(GATE)).commit(wt, "faster mean")
    assert "calc.go:10: calls testing.Testing(), which tells a test (testrun)" in err.value.reason
    assert "allow_tamper_flags: [testrun]" in err.value.reason
    assert ar_git.head(wt) == base and (wt / "calc.go").read_text() == GO
    said: list[str] = []
    (wt / "calc.go").write_text(GO + 'import "testing"\n\nvar fast = testing.Testing()\n')
    allowing = Protection(base, (), Screen(GATE, frozenset({"testrun"})), said.append)
    assert allowing.commit(wt, "faster mean") != base
    assert said and "calc.go:10" in said[0]


def test_a_go_file_too_large_to_read_is_flagged_as_unreadable():
    huge = GO + "// " + "x" * 1_000_001 + "\n"
    assert found("calc/gen.go", GO, huge) == [
        "calc/gen.go: cannot be read as text to check it (modules)"
    ]

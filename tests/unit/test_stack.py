import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from autoresearch.session.stack import (
    STACKS,
    command_exists,
    detect,
    parse_test_output,
    resolve_commands,
    uncached_test_command,
)

# --- detection ---

STACK_TABLE = [
    ("go.mod", "Go", "go test ./...", "go vet ./..."),
    ("package.json", "Node/TS", "npm test", "npx eslint ."),
    ("Cargo.toml", "Rust", "cargo test", "cargo clippy"),
    ("pyproject.toml", "Python", "python -m pytest", "ruff check ."),
    ("requirements.txt", "Python", "python -m pytest", "ruff check ."),
    ("setup.py", "Python", "python -m pytest", "ruff check ."),
    ("setup.cfg", "Python", "python -m pytest", "ruff check ."),
    ("Gemfile", "Ruby", "bundle exec rspec", "bundle exec rubocop"),
    ("pom.xml", "Java", "mvn test", None),
    ("build.gradle", "Java/Kotlin", "./gradlew test", None),
    ("mix.exs", "Elixir", "mix test", "mix credo"),
    ("composer.json", "PHP", "vendor/bin/phpunit", "vendor/bin/phpstan"),
    ("Makefile", "Generic", "make test", None),
]


def test_stacks_table_is_the_documented_table_in_order():
    rows = [(s.build_file, s.name, s.test_command, s.linter_command) for s in STACKS]
    assert rows == STACK_TABLE


@pytest.mark.parametrize("build_file,name,test_command,linter", STACK_TABLE)
def test_detect_finds_each_stack_from_its_build_file(
    tmp_path, build_file, name, test_command, linter
):
    (tmp_path / build_file).write_text("")
    found = detect(tmp_path)
    assert found is not None
    assert (found.name, found.build_file, found.test_command, found.linter_command) == (
        name,
        build_file,
        test_command,
        linter,
    )


def test_detect_returns_none_without_build_file(tmp_path):
    (tmp_path / "README.md").write_text("hi")
    assert detect(tmp_path) is None


@pytest.mark.parametrize("test_file", ["tests/test_stats.py", "test_x.py", "tests/unit/y_test.py"])
def test_a_python_project_with_no_build_file_is_found_by_its_test_files(tmp_path, test_file):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    (tmp_path / test_file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / test_file).write_text("def test_a():\n    pass\n")
    found = detect(tmp_path)
    assert found is not None and (found.name, found.test_command) == ("Python", "python -m pytest")


def src_layout(repo: Path, files: dict[str, str] | None = None) -> Path:
    """A src/ layout: src/shop/ and a test outside it that imports it (CRLF line endings)."""
    layout = {
        "pyproject.toml": '[project]\nname = "shop"\n',
        "src/shop/__init__.py": "def total(xs):\n    return sum(xs)\n",
        "tests/test_total.py": "from shop import total\r\n\r\n"
        "def test_t():\r\n    assert total([1])\r\n",
    }
    for name, text in {**layout, **(files or {})}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(text.encode())
    return repo


def test_a_src_layout_whose_tests_import_its_package_runs_them_with_src_on_the_path(tmp_path):
    found, test, _ = resolve_commands(src_layout(tmp_path), None, None)
    assert (found.name, test) == ("Python", "PYTHONPATH=src python -m pytest")


@pytest.mark.parametrize(
    "line",
    [
        "import shop",
        "import os, shop.cart",
        "from shop.cart import Cart",
        "    import shop  # late",
    ],
)
def test_each_form_of_importing_a_src_package_is_recognised(tmp_path, line):
    src_layout(tmp_path, {"tests/test_total.py": f"{line}\n", "src/shop/cart.py": ""})
    assert detect(tmp_path).test_command == "PYTHONPATH=src python -m pytest"


@pytest.mark.parametrize(
    "files",
    [
        {"pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n'},
        {"pyproject.toml": '[tool.pytest.ini_options]\npythonpath = "src"\n'},
        {"pytest.ini": "[pytest]\npythonpath = src\n"},
        {"setup.cfg": "[tool:pytest]\npythonpath = src\n"},
        {"tests/conftest.py": "import sys\nsys.path.insert(0, 'src')\n"},
        {"tests/test_total.py": "import shopping\nfrom shops import x\nimport other.shop\n"},
    ],
    ids=["pyproject-list", "pyproject-str", "pytest.ini", "setup.cfg", "conftest", "no-import"],
)
def test_a_src_layout_whose_tests_already_find_it_or_never_import_it_is_left_alone(tmp_path, files):
    src_layout(tmp_path, files)
    assert detect(tmp_path).test_command == "python -m pytest"


def test_a_src_folder_that_is_a_link_out_of_the_repository_is_no_src_layout(tmp_path):
    outside = src_layout(tmp_path / "outside")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("")
    (repo / "src").symlink_to(outside / "src")
    (repo / "tests").symlink_to(outside / "tests")
    assert detect(repo).test_command == "python -m pytest"


def test_a_build_file_wins_over_python_test_files(tmp_path):
    (tmp_path / "test_x.py").write_text("")
    (tmp_path / "Makefile").write_text("")
    assert detect(tmp_path).name == "Generic"


def test_detect_takes_first_row_in_table_order(tmp_path):
    for name in ("Makefile", "requirements.txt", "pyproject.toml", "package.json"):
        (tmp_path / name).write_text("")
    assert detect(tmp_path).build_file == "package.json"


def test_detect_ignores_a_directory_named_like_a_build_file(tmp_path):
    (tmp_path / "go.mod").mkdir()
    (tmp_path / "Makefile").write_text("")
    assert detect(tmp_path).name == "Generic"


def test_resolve_commands_spec_commands_win_over_detection(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    found, test, linter = resolve_commands(tmp_path, "make check", "flake8")
    assert found.name == "Python"
    assert (test, linter) == ("make check", "flake8")


def test_resolve_commands_falls_back_to_detected_commands(tmp_path):
    (tmp_path / "Cargo.toml").write_text("")
    assert resolve_commands(tmp_path, None, None)[1:] == ("cargo test", "cargo clippy")
    # A spec test command alone leaves the detected linter in place.
    assert resolve_commands(tmp_path, "cargo nextest run", None)[1:] == (
        "cargo nextest run",
        "cargo clippy",
    )


def test_resolve_commands_without_stack_or_spec_gives_none(tmp_path):
    assert resolve_commands(tmp_path, None, None) == (None, None, None)
    assert resolve_commands(tmp_path, "./run-tests.sh", None) == (None, "./run-tests.sh", None)


def test_resolve_commands_stack_without_linter(tmp_path):
    (tmp_path / "pom.xml").write_text("")
    assert resolve_commands(tmp_path, None, None)[1:] == ("mvn test", None)


# --- uncached test commands ---


@pytest.mark.parametrize(
    "stack_name,command,expected",
    [
        ("Go", "go test ./...", "go test -count=1 ./..."),
        ("Go", "go test -count=1 ./...", "go test -count=1 ./..."),
        ("Go", "go test -race ./pkg/...", "go test -count=1 -race ./pkg/..."),
        ("Python", "pytest", "pytest --cache-clear"),
        ("Python", "python -m pytest -q tests", "python -m pytest --cache-clear -q tests"),
        ("Python", "pytest -x && ruff check .", "pytest --cache-clear -x && ruff check ."),
        ("Python", ".venv/bin/pytest tests", ".venv/bin/pytest --cache-clear tests"),
        ("Python", "pytest --cache-clear", "pytest --cache-clear"),
        ("Python", "python -m unittest", "python -m unittest"),
        ("Node/TS", "npx jest", "npx jest --no-cache"),
        ("Node/TS", "npx jest --ci", "npx jest --no-cache --ci"),
        ("Node/TS", "npm test", "npm test"),
        ("Java/Kotlin", "./gradlew test", "./gradlew cleanTest test"),
        ("Java/Kotlin", "gradle test --info", "gradle cleanTest test --info"),
        ("Rust", "cargo test", "cargo test"),
        ("Java", "mvn test", "mvn test"),
        ("Generic", "make test", "make test"),
        (None, "./run-tests.sh", "./run-tests.sh"),
    ],
)
def test_uncached_test_command(stack_name, command, expected):
    assert uncached_test_command(stack_name, command) == expected


def test_uncached_npm_test_gets_no_cache_only_when_test_script_is_jest(tmp_path):
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest --coverage"}}))
    assert uncached_test_command("Node/TS", "npm test", tmp_path) == "npm test -- --no-cache"
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "mocha"}}))
    assert uncached_test_command("Node/TS", "npm test", tmp_path) == "npm test"
    (tmp_path / "package.json").write_text("{not json")
    assert uncached_test_command("Node/TS", "npm test", tmp_path) == "npm test"


# --- command_exists ---


def test_command_exists_on_path():
    assert command_exists("sh -c 'exit 0'", Path("/"))
    assert not command_exists("no-such-tool-xyz --flag", Path("/"))


def test_command_exists_python_module_form_needs_only_python(tmp_path):
    python = Path(sys.executable).name
    expected = shutil.which(python) is not None
    assert command_exists(f"{python} -m some_module_that_is_not_installed", tmp_path) is expected


def test_command_exists_resolves_relative_paths_against_cwd(tmp_path):
    script = tmp_path / "gradlew"
    script.write_text("#!/bin/sh\nexit 0\n")
    assert not command_exists("./gradlew test", tmp_path)  # not executable yet
    os.chmod(script, 0o755)
    assert command_exists("./gradlew test", tmp_path)
    assert not command_exists("./gradlew test", tmp_path / "..")
    assert not command_exists("vendor/bin/phpunit", tmp_path)


def test_command_exists_skips_env_assignments_and_trusts_shell_syntax(tmp_path):
    assert command_exists("CI=1 FOO=bar sh -c true", tmp_path)
    assert not command_exists("CI=1 no-such-tool-xyz", tmp_path)
    assert command_exists("cd sub && make test", tmp_path)
    assert command_exists("(cd sub; make test)", tmp_path)
    assert not command_exists("   ", tmp_path)


# --- parsing test output ---

PYTEST_MIXED = """\
============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/dev/proj
configfile: pyproject.toml
collected 7 items

tests/test_api.py ..F.s                                                  [ 71%]
tests/test_cli.py .s                                                     [100%]

=================================== FAILURES ===================================
________________________________ test_get_user _________________________________

    def test_get_user():
>       assert get_user(1) == {"id": 1}
E       AssertionError: assert None == {'id': 1}

tests/test_api.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_api.py::test_get_user - AssertionError: assert None == {'id': 1}
==================== 1 failed, 4 passed, 2 skipped in 0.12s ====================
"""

PYTEST_QUIET_ERRORS_XFAIL = """\
..E..xX.                                                                 [100%]
==================================== ERRORS ====================================
_____________________ ERROR at setup of test_db_connection _____________________
E       fixture 'db' not found
=========================== short test summary info ============================
ERROR tests/test_db.py::test_db_connection
5 passed, 1 xfailed, 1 xpassed, 3 warnings, 1 error in 1.03s
"""

PYTEST_NO_TESTS = """\
============================= test session starts ==============================
collected 0 items

============================ no tests ran in 0.01s =============================
"""

GO_VERBOSE = """\
=== RUN   TestParse
--- PASS: TestParse (0.00s)
=== RUN   TestParseTable
=== RUN   TestParseTable/empty
=== RUN   TestParseTable/unicode
    parse_test.go:41: got "x", want "y"
--- FAIL: TestParseTable (0.00s)
    --- PASS: TestParseTable/empty (0.00s)
    --- FAIL: TestParseTable/unicode (0.00s)
=== RUN   TestSlow
    slow_test.go:9: skipping in short mode
--- SKIP: TestSlow (0.00s)
FAIL
FAIL\texample.com/proj/parse\t0.004s
=== RUN   TestServe
--- PASS: TestServe (0.01s)
PASS
ok  \texample.com/proj/server\t0.015s
FAIL
"""

GO_BUILD_FAILED = """\
# example.com/proj/db
db/db.go:14:2: undefined: sqlx
=== RUN   TestServe
--- PASS: TestServe (0.01s)
PASS
ok  \texample.com/proj/server\t0.015s
FAIL\texample.com/proj/db [build failed]
FAIL
"""

GO_QUIET = """\
ok  \texample.com/proj/server\t0.015s
ok  \texample.com/proj/util\t(cached)
?   \texample.com/proj/cmd\t[no test files]
--- FAIL: TestParse (0.00s)
    parse_test.go:12: want 3, got 4
FAIL
FAIL\texample.com/proj/parse\t0.004s
FAIL
"""

CARGO_MULTI = """\
   Compiling mycrate v0.1.0 (/home/dev/mycrate)
    Finished test [unoptimized + debuginfo] target(s) in 1.52s
     Running unittests src/lib.rs (target/debug/deps/mycrate-3c9a2e1f0b)

running 6 tests
test tests::adds ... ok
test tests::slow ... ignored
test tests::parses ... FAILED
test tests::a ... ok
test tests::b ... ok
test tests::c ... ok

failures:

---- tests::parses stdout ----
thread 'tests::parses' panicked at src/lib.rs:30:9:
assertion `left == right` failed

failures:
    tests::parses

test result: FAILED. 4 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/integration.rs (target/debug/deps/integration-77aa)

running 2 tests
test roundtrip ... ok
test big ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

   Doc-tests mycrate

running 1 test
test src/lib.rs - add (line 5) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.20s

error: test failed, to rerun pass `--lib`
"""

JEST = """\
> myapp@1.0.0 test
> jest

PASS src/utils.test.js
FAIL src/api.test.js
  ● fetchUser › returns the user

    expect(received).toEqual(expected) // deep equality

      at Object.<anonymous> (src/api.test.js:14:25)

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 1 skipped, 4 passed, 6 total
Snapshots:   0 total
Time:        1.234 s
Ran all test suites.
"""

VITEST = """\
 ✓ src/math.test.ts (3)
 ❯ src/api.test.ts (2)
   × fetches

 Test Files  1 failed | 1 passed (2)
      Tests  1 failed | 4 passed (5)
   Start at  10:12:01
   Duration  512ms
"""

MOCHA = """\

  Array
    #indexOf()
      ✓ should return -1 when the value is not present
      1) should return the index
      - should handle NaN


  7 passing (12ms)
  1 pending
  1 failing

  1) Array
       #indexOf()
         should return the index:
     AssertionError [ERR_ASSERTION]: 1 == 0
"""

RSPEC = """\
Randomized with seed 4242
..F.*......

Pending: (Failures listed here are expected and do not affect your suite's status)

  1) User#admin? is not implemented yet
     # Not yet implemented
     # ./spec/models/user_spec.rb:20

Failures:

  1) User#name returns the full name
     Failure/Error: expect(user.name).to eq("Ada Lovelace")

       expected: "Ada Lovelace"
            got: "Ada"
     # ./spec/models/user_spec.rb:8:in `block (3 levels) in <top (required)>'

Finished in 0.04567 seconds (files took 0.3 seconds to load)
11 examples, 2 failures, 1 pending

Failed examples:

rspec ./spec/models/user_spec.rb:7 # User#name returns the full name
"""

RSPEC_LOAD_ERROR = """\
An error occurred while loading ./spec/broken_spec.rb.
Failure/Error: require "nope"

LoadError:
  cannot load such file -- nope

Finished in 0.00003 seconds (files took 0.1 seconds to load)
0 examples, 0 failures, 1 error occurred outside of examples
"""

MINITEST = """\
Run options: --seed 12345

# Running:

..F.S.

Finished in 0.012345s, 486.0 runs/s, 810.0 assertions/s.

  1) Failure:
TestCalc#test_divide [test/test_calc.rb:10]:
Expected: 2
  Actual: 3

6 runs, 10 assertions, 1 failures, 0 errors, 1 skips
"""

EXUNIT = """\
....

  1) test greets the world (HelloTest)
     test/hello_test.exs:5
     Assertion with == failed

.*
Finished in 0.04 seconds (0.02s async, 0.02s sync)
1 doctest, 7 tests, 1 failure, 1 skipped

Randomized with seed 123456
"""

PHPUNIT_FAIL = """\
PHPUnit 10.5.2 by Sebastian Bergmann and contributors.

Runtime:       PHP 8.3.0

..F.S                                                               5 / 5 (100%)

Time: 00:00.021, Memory: 8.00 MB

There was 1 failure:

1) Tests\\CalculatorTest::testDivide
Failed asserting that 3 matches expected 2.

FAILURES!
Tests: 5, Assertions: 7, Failures: 1, Skipped: 1.
"""

PHPUNIT_OK = """\
PHPUnit 10.5.2 by Sebastian Bergmann and contributors.

.....                                                               5 / 5 (100%)

Time: 00:00.010, Memory: 8.00 MB

OK (5 tests, 9 assertions)
"""

MAVEN = """\
[INFO] -------------------------------------------------------
[INFO]  T E S T S
[INFO] -------------------------------------------------------
[INFO] Running com.example.AppTest
[ERROR] Tests run: 4, Failures: 1, Errors: 0, Skipped: 1, Time elapsed: 0.05 s <<< FAILURE!
[INFO] Running com.example.UtilTest
[INFO] Tests run: 6, Failures: 0, Errors: 1, Skipped: 0, Time elapsed: 0.01 s
[INFO]
[INFO] Results:
[INFO]
[ERROR] Failures:
[ERROR]   AppTest.testAdd:12 expected:<3> but was:<4>
[INFO]
[ERROR] Tests run: 10, Failures: 1, Errors: 1, Skipped: 1
[INFO]
[INFO] BUILD FAILURE
"""


@pytest.mark.parametrize(
    "output,exit_code,expected",
    [
        (PYTEST_MIXED, 1, (4, 1, 2)),
        (PYTEST_QUIET_ERRORS_XFAIL, 1, (6, 1, 1)),
        (PYTEST_NO_TESTS, 5, (0, 0, 0)),
        (GO_VERBOSE, 1, (2, 1, 1)),
        (GO_BUILD_FAILED, 1, (1, 1, 0)),
        (CARGO_MULTI, 101, (7, 1, 1)),
        (JEST, 1, (4, 1, 1)),
        (VITEST, 1, (4, 1, 0)),
        (MOCHA, 1, (7, 1, 1)),
        (RSPEC, 1, (8, 2, 1)),
        (RSPEC_LOAD_ERROR, 1, (0, 1, 0)),
        (MINITEST, 1, (4, 1, 1)),
        (EXUNIT, 2, (6, 1, 1)),
        (PHPUNIT_FAIL, 1, (3, 1, 1)),
        (PHPUNIT_OK, 0, (5, 0, 0)),
        (MAVEN, 1, (7, 2, 1)),
    ],
    ids=[
        "pytest",
        "pytest-errors-xfail",
        "pytest-no-tests",
        "go-verbose",
        "go-build-failed",
        "cargo-multi",
        "jest",
        "vitest",
        "mocha",
        "rspec",
        "rspec-load-error",
        "minitest",
        "exunit",
        "phpunit-fail",
        "phpunit-ok",
        "maven",
    ],
)
def test_parse_test_output_counts(output, exit_code, expected):
    counts = parse_test_output(output, exit_code)
    assert counts.parsed
    assert (counts.passed, counts.failed, counts.skipped) == expected
    assert counts.exit_code == exit_code


def test_pytest_summary_reads_like_a_person_would_say_it():
    assert parse_test_output(PYTEST_MIXED, 1).summary == "4 passed, 1 failed, 2 skipped"
    assert parse_test_output("12 passed in 3.40s\n", 0).summary == "12 passed, 0 failed"


def test_pytest_summary_survives_colour_codes_and_crlf():
    coloured = "\x1b[32m\x1b[1m3 passed\x1b[0m, \x1b[31m1 failed\x1b[0m\x1b[32m in 0.50s\x1b[0m\r\n"
    counts = parse_test_output(coloured, 1)
    assert (counts.passed, counts.failed) == (3, 1)


def test_pytest_takes_the_last_summary_when_run_twice():
    output = "2 passed in 0.1s\n...\n1 failed, 3 passed in 0.2s\n"
    assert parse_test_output(output, 1).passed == 3


def test_cargo_sums_every_test_binary():
    counts = parse_test_output(CARGO_MULTI, 101)
    assert counts.summary == "7 passed, 1 failed, 1 skipped"


def test_go_without_verbose_counts_packages():
    counts = parse_test_output(GO_QUIET, 1)
    # A named failing test is a test-level line: test counts win where there are any.
    assert (counts.passed, counts.failed) == (0, 1)
    quiet_all_ok = "ok  \texample.com/a\t0.01s\nok  \texample.com/b\t(cached)\n"
    counts = parse_test_output(quiet_all_ok, 0)
    assert (counts.passed, counts.failed, counts.skipped) == (2, 0, 0)
    assert counts.summary == "2 packages passed, 0 failed"


def test_unrecognised_output_falls_back_to_exit_code():
    counts = parse_test_output("All good!\n", 0)
    assert not counts.parsed
    assert (counts.passed, counts.failed, counts.skipped) == (None, None, None)
    assert counts.summary == "exit code 0 (counts unavailable)"
    assert counts.ok
    failing = parse_test_output("make: *** [test] Error 2\n", 2)
    assert failing.summary == "exit code 2 (counts unavailable)"
    assert not failing.ok


def test_timeout_is_said_in_the_summary():
    assert parse_test_output("", None).summary == "timed out (counts unavailable)"
    assert parse_test_output("1 passed in 0.1s\n", None).summary == "1 passed, 0 failed (timed out)"


def test_exit_code_disagreeing_with_counts_is_noted():
    # Jest reports all tests passed while a suite failed to load: the run still failed.
    output = "Test Suites: 1 failed, 1 passed, 2 total\nTests:       4 passed, 4 total\n"
    counts = parse_test_output(output, 1)
    assert counts.summary == "4 passed, 0 failed (exit code 1)"
    assert not counts.ok


def test_ok_requires_zero_exit_and_no_failures():
    assert parse_test_output(PHPUNIT_OK, 0).ok
    assert not parse_test_output(PYTEST_MIXED, 1).ok


def test_uncached_npm_test_leaves_chained_scripts_alone(tmp_path):
    # `npm test -- --no-cache` would hand the flag to eslint, the script's last command.
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest && eslint ."}}))
    assert uncached_test_command("Node/TS", "npm test", tmp_path) == "npm test"


def test_other_tools_timing_lines_are_not_read_as_pytest():
    counts = parse_test_output("3 packages in 2.5s\nall fine\n", 0)
    assert not counts.parsed

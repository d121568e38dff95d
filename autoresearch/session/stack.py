"""The target's stack: build-file detection, its test and linter commands, test-output counts."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from autoresearch.safety import words as shell_words
from autoresearch.safety import worktree_files


@dataclass(frozen=True)
class Stack:
    name: str
    build_file: str
    test_command: str
    linter_command: str | None


# In this order: the first build file present wins.
STACKS: tuple[Stack, ...] = (
    Stack("Go", "go.mod", "go test ./...", "go vet ./..."),
    Stack("Node/TS", "package.json", "npm test", "npx eslint ."),
    Stack("Rust", "Cargo.toml", "cargo test", "cargo clippy"),
    # `python -m pytest`, not `pytest`: only the former puts the repository root on sys.path, which
    # a tests/ folder importing the package next to it needs when there is no pytest config.
    Stack("Python", "pyproject.toml", "python -m pytest", "ruff check ."),
    Stack("Python", "requirements.txt", "python -m pytest", "ruff check ."),
    Stack("Python", "setup.py", "python -m pytest", "ruff check ."),
    Stack("Python", "setup.cfg", "python -m pytest", "ruff check ."),
    Stack("Ruby", "Gemfile", "bundle exec rspec", "bundle exec rubocop"),
    Stack("Java", "pom.xml", "mvn test", None),
    Stack("Java/Kotlin", "build.gradle", "./gradlew test", None),
    Stack("Elixir", "mix.exs", "mix test", "mix credo"),
    Stack("PHP", "composer.json", "vendor/bin/phpunit", "vendor/bin/phpstan"),
    Stack("Generic", "Makefile", "make test", None),
)


# A Python project with no build file at all (a src/ folder and tests/test_*.py) is still
# one pytest can run: recognised by its test files, after every build file.
PYTHON_TESTS = Stack("Python", "test_*.py files", "python -m pytest", "ruff check .")
_PYTHON_TEST_GLOBS = (
    "test_*.py",
    "*_test.py",
    "tests/**/test_*.py",
    "tests/**/*_test.py",
    "test/**/test_*.py",
)


# What decides which tests run and how, for the runners of the table above: their config
# files, the files that hook into a run, and the build files that pick flags, features and
# tags. A change to one can skip, deselect or stop collecting a test as surely as an edit to
# the test itself, so where the tests are protected these are too (narrow's goal.protect_tests,
# the fix lens). Whole files: pyproject.toml and package.json hold the runner's own sections,
# and an edit elsewhere in them is no test change, but telling the two apart would take a
# parser per format that must never miss a section the runner reads.
TEST_RUNNER_FILES: tuple[str, ...] = (
    # Python: pytest reads the first config with a pytest section; every conftest.py (and a
    # plugin it names) can skip, deselect or rewrite a test; tox picks the command.
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    "conftest.py",
    ".coveragerc",
    # Go: the module and workspace files (go version, replace lines); build tags live in the
    # _test.go files, which the test globs cover.
    "go.mod",
    "go.work",
    # Node/TS: the test script and "jest" key of package.json, the runners' configs.
    "package.json",
    "jest.config.*",
    "vitest.config.*",
    "vitest.workspace.*",
    "vite.config.*",
    ".mocharc.*",
    # Rust: features and test targets; .cargo/config.toml sets cfg flags.
    "Cargo.toml",
    ".cargo",
    # Ruby, Java, Elixir, PHP, and `make test`.
    ".rspec",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
    "mix.exs",
    "phpunit.xml",
    "phpunit.xml.dist",
    "GNUmakefile",
    "makefile",
    "Makefile",
)


def detect(repo: Path) -> Stack | None:
    """The first row of the table whose build file exists at the repo root; else Python when
    the repository holds pytest-style test files. A Python `src/` layout gets its test
    command with `PYTHONPATH=src` when it needs it (`src_path_needed`)."""
    found = next((s for s in STACKS if (Path(repo) / s.build_file).is_file()), None)
    if found is None and any(next(Path(repo).glob(p), None) for p in _PYTHON_TEST_GLOBS):
        found = PYTHON_TESTS
    if found is not None and found.name == "Python" and src_path_needed(Path(repo)):
        return replace(found, test_command=f"{SRC_PATH} {found.test_command}")
    return found


# --- a src/ layout -------------------------------------------------------------------

# Part of the command, not a hidden setting: setup.json and session.md show it, and the
# user reruns the tests by hand with the same words.
SRC_PATH = "PYTHONPATH=src"
# pytest ini keys that put folders on sys.path (pytest's own, and pytest-pythonpath's).
_PATH_KEYS = ("pythonpath", "python_paths")
# src/ itself (a test inside it finds its package by pytest's own rootdir rule), and the
# folders pytest does not recurse into (its default norecursedirs).
_SKIPPED_DIRS = frozenset({"src", "node_modules", "__pycache__", "build", "dist", "venv", "CVS"})
# At most this many test files read and folders walked, looking for an import of src's
# packages: detection runs while Snakemake builds its DAG, and must stay quick on any repo.
_SCANNED_FILES = 2000
_WALKED_FOLDERS = 5000
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


def src_path_needed(repo: Path) -> bool:
    """Whether `python -m pytest` needs src/ on sys.path: src/ holds a package, a test
    outside src/ imports it, and neither the pytest config (`pythonpath`) nor a conftest.py
    (`sys.path`) puts it there. An installed copy of the package does not count: it is the
    user's checkout (editable) or a snapshot, never the session's worktree, whose own src/
    must be what the tests import (PYTHONPATH comes before both on sys.path)."""
    packages = _src_packages(repo)
    if not packages or set(pytest_config(repo) or {}) & set(_PATH_KEYS):
        return False
    imports = re.compile(
        rf"^[ \t]*(?:from|import)[ \t]+(?:[\w.]+[ \t]*,[ \t]*)*(?:{'|'.join(packages)})\b",
        re.MULTILINE,
    )
    imported = False
    for rel in _python_tests(repo):
        text = worktree_files.read_if_any(repo, rel) or ""
        if PurePosixPath(rel).name == "conftest.py" and "sys.path" in text:
            return False  # the project puts its folders on the path itself
        imported = imported or imports.search(text) is not None
    return imported


def _src_packages(repo: Path) -> list[str]:
    """The importable names directly under src/: packages (with or without __init__.py)
    and single modules."""
    src = repo / "src"
    if src.is_symlink() or not src.is_dir():
        return []
    names = []
    for entry in sorted(src.iterdir()):
        name = entry.stem if entry.suffix == ".py" else entry.name
        if not _IDENTIFIER.match(name) or entry.is_symlink():
            continue
        if (entry.is_file() and entry.suffix == ".py") or (
            entry.is_dir() and any(entry.glob("*.py"))
        ):
            names.append(re.escape(name))
    return names


def _python_tests(repo: Path) -> list[str]:
    """The test files and conftest.py files pytest would collect outside src/ (relative
    paths), without following links, at most _SCANNED_FILES of them."""
    found: list[str] = []
    for walked, (folder, dirs, files) in enumerate(os.walk(repo)):
        if walked >= _WALKED_FOLDERS:
            break
        here = Path(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _SKIPPED_DIRS
            and not d.startswith(".")
            and not d.endswith(".egg")
            and not (here / d / "pyvenv.cfg").exists()
        )
        for name in sorted(files):
            if name == "conftest.py" or (
                name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
            ):
                found.append(str((here / name).relative_to(repo)))
                if len(found) >= _SCANNED_FILES:
                    return found
    return found


def resolve_commands(
    repo: Path, test_command: str | None, linter_command: str | None
) -> tuple[Stack | None, str | None, str | None]:
    """(detected stack, test command, linter command); commands the spec sets win over detection."""
    stack = detect(repo)
    test = test_command or (stack.test_command if stack else None)
    linter = linter_command or (stack.linter_command if stack else None)
    return stack, test, linter


# --- running the suite without caches (evaluate's full run) ---

_GO_TEST = re.compile(r"(?<![\w./-])go\s+test(?=\s|$)")
_PYTEST = re.compile(r"(?<![\w./-])((?:python3?\s+-m\s+)?(?:[\w./-]*/)?py\.?test)(?=\s|$)")
_JEST = re.compile(r"(?<![\w./-])((?:[\w./-]*/)?jest)(?=\s|$)")
_GRADLE_TEST = re.compile(r"(?<![\w.-])((?:\./)?gradlew|gradle)(\s+)test(?=\s|$)")
_NPM_TEST = re.compile(r"^\s*(npm\s+(?:run\s+)?test|yarn\s+test|pnpm\s+(?:run\s+)?test)\s*$")


def uncached_test_command(
    stack_name: str | None, test_command: str, repo: Path | None = None
) -> str:
    """The test command with the flag that defeats the tool's result cache, when we know it.

    The tool is recognised in the command itself (a spec's own command may not match the stack);
    `stack_name` and `repo` only matter for `npm test`, whose runner is hidden in package.json.

    The flag goes right after the tool's own name rather than at the end, so a command like
    `pytest -q && echo ok` still hands it to pytest. A command that already has it is left alone.
    `npm test` only gets `-- --no-cache` when the repo's package.json shows the test script is Jest
    (pass `repo`), since other runners reject the flag. pytest gets no `--cache-clear` when its
    cache plugin is off (`pytest_cache_disabled`): there is nothing to clear, and pytest would
    reject the flag as unknown.
    """
    command = test_command
    if _GO_TEST.search(command) and "-count=" not in command:
        return _GO_TEST.sub("go test -count=1", command, count=1)
    if _PYTEST.search(command):
        if "--cache-clear" in command or pytest_cache_disabled(command, repo):
            return command
        return _PYTEST.sub(lambda m: m.group(1) + " --cache-clear", command, count=1)
    if _JEST.search(command):
        if "--no-cache" in command:
            return command
        return _JEST.sub(lambda m: m.group(1) + " --no-cache", command, count=1)
    if _GRADLE_TEST.search(command) and "cleanTest" not in command:
        return _GRADLE_TEST.sub(lambda m: f"{m.group(1)}{m.group(2)}cleanTest test", command, 1)
    if stack_name == "Node/TS" and repo is not None and _NPM_TEST.match(command):
        if package_test_script_is_jest(Path(repo)):
            return command.rstrip() + " -- --no-cache"
    return command


_SELECTS = re.compile(
    r"(?<!\S)(--lf|--last-failed|--ff|--failed-first|--sw|--stepwise|--cache-clear)\b"
)


def last_failed_command(test_command: str, repo: Path | None = None) -> str | None:
    """The test command running only the tests pytest's cache lists as last failed
    (`--lf`, and none at all when it lists none), or None when the stack cannot tell: not
    pytest, its cache plugin off, or a command that already picks tests by the cache."""
    if not _PYTEST.search(test_command) or _SELECTS.search(test_command):
        return None
    if pytest_cache_disabled(test_command, repo):
        return None
    return _PYTEST.sub(lambda m: m.group(1) + " --lf --lfnf=none", test_command, count=1)


def touching_tests(changed: Iterable[str], test_ids: Iterable[str]) -> frozenset[str]:
    """The pytest ids among `test_ids` that touch the `changed` files, as pytest's layout
    tells: the tests in a changed file (its doctests too), and those in a file named for a
    changed module (`test_<module>.py`, `<module>_test.py`, in any folder). A guess to fail
    fast on, never the tests a change can break: a test reaches any module it imports."""
    paths = set(changed)
    named: set[str] = set()
    for path in paths:
        module = PurePosixPath(path)
        if module.suffix == ".py" and module.stem != "__init__":
            named |= {f"test_{module.stem}.py", f"{module.stem}_test.py"}
    out = set()
    for test_id in test_ids:
        file = test_id.split("::", 1)[0]
        if file in paths or PurePosixPath(file).name in named:
            out.add(test_id)
    return frozenset(out)


_NO_CACHEPROVIDER = re.compile(r"-p\s*=?\s*no:cacheprovider\b")


def pytest_cache_disabled(command: str, repo: Path | None = None) -> bool:
    """Whether pytest runs without its cache plugin: `-p no:cacheprovider` in the command, in
    PYTEST_ADDOPTS, or in the `addopts` of the repo's pytest config.

    Without the plugin there is no cache to clear, and `--cache-clear` is then an unknown option
    (pytest exits 4 before running a test).
    """
    sources = [command, os.environ.get("PYTEST_ADDOPTS", "")]
    if repo is not None:
        sources.append(pytest_addopts(Path(repo)))
    return any(_NO_CACHEPROVIDER.search(text) for text in sources)


# pytest reads the first of these that has a pytest section (pytest.ini counts even when empty).
_PYTEST_CONFIGS = (
    ("pytest.ini", "pytest"),
    (".pytest.ini", "pytest"),
    ("pyproject.toml", None),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


def pytest_addopts(repo: Path) -> str:
    """The `addopts` of the pytest config pytest would pick in `repo`, or "" when there is none."""
    addopts = (pytest_config(repo) or {}).get("addopts", "")
    return " ".join(map(str, addopts)) if isinstance(addopts, list) else str(addopts)


def pytest_config(repo: Path) -> dict[str, Any] | None:
    """The options of the pytest config pytest would pick in `repo` (ini files: strings;
    pyproject.toml: its TOML values), or None when there is none."""
    for name, section in _PYTEST_CONFIGS:
        # Read by the worktree reader's rules: a link out or a FIFO counts as no file.
        text = worktree_files.read_if_any(Path(repo), name)
        if text is None:
            continue
        try:
            if section is None:
                table = tomllib.loads(text).get("tool", {}).get("pytest")
                if not isinstance(table, dict):
                    continue
                # pytest 9's native [tool.pytest] table, or the classic ini_options one.
                options = table.get("ini_options", table)
                return dict(options) if isinstance(options, dict) else {}
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text, name)
        except (OSError, ValueError, tomllib.TOMLDecodeError, configparser.Error):
            continue
        if parser.has_section(section):
            return dict(parser.items(section))
        if name.endswith("pytest.ini"):
            return {}
    return None


def package_test_script_is_jest(repo: Path) -> bool:
    """Whether package.json's test script is Jest alone, so flags after `npm test --` reach it."""
    try:
        text = worktree_files.read_text(Path(repo), "package.json")
        scripts = json.loads(text).get("scripts") or {}
    except (worktree_files.Refused, ValueError, AttributeError):
        return False
    test = scripts.get("test") if isinstance(scripts, dict) else None
    # npm appends extra arguments to the end of the script: they reach Jest only if Jest is all
    # the script runs.
    return (
        isinstance(test, str) and _JEST.search(test) is not None and not re.search(r"[;&|]", test)
    )


# --- does the command exist? ---

# The shell runs these itself; `which` cannot see them.
_SHELL_BUILTINS = frozenset(
    "cd . : source exec eval export set unset true false test [ [[ echo printf if for while "
    "until case time command builtin env !".split()
)
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_exists(command: str, cwd: Path) -> bool:
    """Whether the command's program resolves: on PATH, or as a path relative to `cwd`.

    Anything we cannot analyse (shell syntax, builtins) counts as existing: wrongly rejecting a
    working command would stop a session that would have run.
    """
    try:
        words = shell_words.split(command, comments=True)
    except ValueError:
        return True
    while words and _ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return False
    program = words[0]
    if program in _SHELL_BUILTINS or program[0] in "({$`":
        return True
    program = os.path.expanduser(program)
    if "/" in program:
        path = Path(program)
        if not path.is_absolute():
            path = Path(cwd) / path
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program) is not None


# --- counting tests in the output ---


@dataclass
class TestCounts:
    __test__ = False  # a record, not a pytest test class

    passed: int | None
    failed: int | None
    skipped: int | None
    exit_code: int | None
    parsed: bool
    summary: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.failed


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _counts_by_word(text: str) -> dict[str, int]:
    """{"passed": 3, "failed": 1, ...} from '3 passed, 1 failed'-style text."""
    counts: dict[str, int] = {}
    for number, word in re.findall(r"(\d+)\s+([A-Za-z]+)", text):
        counts[word.lower()] = counts.get(word.lower(), 0) + int(number)
    return counts


# pytest's own words only, so that "3 packages in 2.5s" from some other tool is not read as a run.
_PYTEST_WORD = r"(?:passed|failed|skipped|errors?|xfailed|xpassed|warnings?|deselected|rerun)"
_PYTEST_SUMMARY = re.compile(
    rf"^[=\s]*((?:\d+ {_PYTEST_WORD}(?:, )?)+|no tests ran) in [\d.]+s\b.*$", re.MULTILINE
)


def _parse_pytest(text: str) -> tuple[int, int, int] | None:
    matches = _PYTEST_SUMMARY.findall(text)
    if not matches:
        return None
    c = _counts_by_word(matches[-1])
    # xpassed tests ran and passed; xfailed ones are expected failures, reported like skips.
    passed = c.get("passed", 0) + c.get("xpassed", 0)
    failed = c.get("failed", 0) + c.get("error", 0) + c.get("errors", 0)
    skipped = c.get("skipped", 0) + c.get("xfailed", 0)
    return passed, failed, skipped


_CARGO_RESULT = re.compile(r"^test result: \w+\. (.*)$", re.MULTILINE)


def _parse_cargo(text: str) -> tuple[int, int, int] | None:
    # One result line per test binary (unit, each integration file, doc-tests): sum them.
    lines = _CARGO_RESULT.findall(text)
    if not lines:
        return None
    totals = [0, 0, 0]
    for line in lines:
        c = _counts_by_word(line)
        totals[0] += c.get("passed", 0)
        totals[1] += c.get("failed", 0)
        totals[2] += c.get("ignored", 0)
    return totals[0], totals[1], totals[2]


_JEST_TESTS = re.compile(r"^\s*Tests:\s+(.*\d+ total)\s*$", re.MULTILINE)


_VITEST_TESTS = re.compile(r"^\s*Tests\s+(\d+ [a-z]+(?: \| \d+ [a-z]+)*) \(\d+\)\s*$", re.MULTILINE)


def _parse_js(summary: re.Pattern[str], text: str) -> tuple[int, int, int] | None:
    """Jest's `Tests:` line or Vitest's `Tests` line (`summary`), the last one."""
    matches = summary.findall(text)
    if not matches:
        return None
    c = _counts_by_word(matches[-1])
    return c.get("passed", 0), c.get("failed", 0), c.get("skipped", 0) + c.get("todo", 0)


_MOCHA_PASSING = re.compile(r"^\s*(\d+) passing \(", re.MULTILINE)


def _parse_mocha(text: str) -> tuple[int, int, int] | None:
    passing = _MOCHA_PASSING.findall(text)
    if not passing:
        return None
    failing = re.findall(r"^\s*(\d+) failing\s*$", text, re.MULTILINE)
    pending = re.findall(r"^\s*(\d+) pending\s*$", text, re.MULTILINE)
    return (
        int(passing[-1]),
        int(failing[-1]) if failing else 0,
        int(pending[-1]) if pending else 0,
    )


_RSPEC_SUMMARY = re.compile(r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?", re.MULTILINE)


def _parse_rspec(text: str) -> tuple[int, int, int] | None:
    matches = _RSPEC_SUMMARY.findall(text)
    if not matches:
        return None
    examples, failures, pending = (int(x or 0) for x in matches[-1])
    # Errors outside examples (a spec file that fails to load) fail the run, not an example.
    outside = re.findall(r"(\d+) errors? occurred outside of examples", text)
    failed = failures + (int(outside[-1]) if outside else 0)
    return examples - failures - pending, failed, pending


_MINITEST_SUMMARY = re.compile(
    r"^(\d+) (?:runs|tests), \d+ assertions, (\d+) failures, (\d+) errors, (\d+) skips",
    re.MULTILINE,
)


def _parse_minitest(text: str) -> tuple[int, int, int] | None:
    matches = _MINITEST_SUMMARY.findall(text)
    if not matches:
        return None
    runs, failures, errors, skips = (int(x) for x in matches[-1])
    return runs - failures - errors - skips, failures + errors, skips


_EXUNIT_SUMMARY = re.compile(
    r"^(?:(\d+) doctests?, )?(?:(\d+) propert(?:y|ies), )?(\d+) tests?, (\d+) failures?(.*)$",
    re.MULTILINE,
)


def _parse_exunit(text: str) -> tuple[int, int, int] | None:
    matches = _EXUNIT_SUMMARY.findall(text)
    if not matches:
        return None
    doctests, properties, tests, failures, rest = matches[-1]
    c = _counts_by_word(rest)
    # ExUnit counts doctests and properties apart from tests, and skipped/excluded/invalid
    # tests inside the test count; failures cover all of them.
    total = int(doctests or 0) + int(properties or 0) + int(tests)
    skipped = c.get("skipped", 0) + c.get("excluded", 0)
    failed = int(failures) + c.get("invalid", 0)
    return total - failed - skipped, failed, skipped


_PHPUNIT_OK = re.compile(r"^OK \((\d+) tests?, \d+ assertions?\)", re.MULTILINE)
_PHPUNIT_COUNTS = re.compile(r"^Tests: (\d+), Assertions: \d+(.*)$", re.MULTILINE)


def _parse_phpunit(text: str) -> tuple[int, int, int] | None:
    counts = _PHPUNIT_COUNTS.findall(text)
    ok = _PHPUNIT_OK.findall(text)
    if counts:
        tests, rest = counts[-1]
        c = {k.lower(): int(v) for k, v in re.findall(r"([A-Za-z]+): (\d+)", rest)}
        failed = c.get("failures", 0) + c.get("errors", 0)
        skipped = c.get("skipped", 0) + c.get("incomplete", 0)
        return int(tests) - failed - skipped, failed, skipped
    if ok:
        return int(ok[-1]), 0, 0
    return None


# Surefire's per-class lines end with "Time elapsed"; the totals line in "Results:" does not.
_MAVEN_TOTALS = re.compile(
    r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)\s*$", re.MULTILINE
)


def _parse_maven(text: str) -> tuple[int, int, int] | None:
    matches = _MAVEN_TOTALS.findall(text)
    if not matches:
        return None
    run, failures, errors, skipped = (int(x) for x in matches[-1])
    return run - failures - errors - skipped, failures + errors, skipped


_GO_TEST_LINE = re.compile(r"^--- (PASS|FAIL|SKIP): ", re.MULTILINE)
_GO_PKG_OK = re.compile(r"^ok\s+\S+\s+(?:\(cached\)|[\d.]+s)", re.MULTILINE)
_GO_PKG_FAIL = re.compile(r"^FAIL\s+\S+\s+(\[(?:build|setup) failed\]|[\d.]+s)", re.MULTILINE)


def _parse_go(text: str) -> tuple[int, int, int] | None:
    # Top-level tests only (subtests are indented): a failing subtest already fails its parent.
    results = _GO_TEST_LINE.findall(text)
    if not results:
        return None
    pkg_fail = _GO_PKG_FAIL.findall(text)
    failed = results.count("FAIL") + sum(1 for reason in pkg_fail if reason.startswith("["))
    if failed == 0 and pkg_fail:  # e.g. a test binary that panicked or timed out
        failed = len(pkg_fail)
    return results.count("PASS"), failed, results.count("SKIP")


def _parse_go_packages(text: str) -> tuple[int, int, int] | None:
    # Without -v, go test names only failing tests: count packages rather than mislead.
    pkg_ok = len(_GO_PKG_OK.findall(text))
    pkg_fail = len(_GO_PKG_FAIL.findall(text))
    return (pkg_ok, pkg_fail, 0) if pkg_ok or pkg_fail else None


# (parser, what it counts); the first that recognises the output wins.
_PARSERS: tuple[tuple[Callable[[str], tuple[int, int, int] | None], str], ...] = (
    (_parse_pytest, ""),
    (_parse_cargo, ""),
    (partial(_parse_js, _JEST_TESTS), ""),
    (partial(_parse_js, _VITEST_TESTS), ""),
    (_parse_mocha, ""),
    (_parse_rspec, ""),
    (_parse_minitest, ""),
    (_parse_exunit, ""),
    (_parse_phpunit, ""),
    (_parse_maven, ""),
    (_parse_go, ""),
    (_parse_go_packages, "packages"),
)


def parse_test_output(output: str, exit_code: int | None) -> TestCounts:
    """Pass/fail/skip counts from a test run's output, or the exit code alone when unrecognised."""
    text = _ANSI.sub("", output).replace("\r\n", "\n")
    for parser, unit in _PARSERS:
        counts = parser(text)
        if counts is not None:
            passed, failed, skipped = counts
            summary = _summary(passed, failed, skipped, unit, exit_code)
            return TestCounts(passed, failed, skipped, exit_code, True, summary)
    return TestCounts(None, None, None, exit_code, False, _exit_only_summary(exit_code))


def _summary(passed: int, failed: int, skipped: int, unit: str, exit_code: int | None) -> str:
    noun = f" {unit}" if unit else ""
    text = f"{passed}{noun} passed, {failed} failed"
    if skipped:
        text += f", {skipped} skipped"
    # Say so when the exit code disagrees with the counts (crash after the summary, load errors).
    if exit_code is None:
        text += " (timed out)"
    elif exit_code != 0 and failed == 0:
        text += f" (exit code {exit_code})"
    return text


def _exit_only_summary(exit_code: int | None) -> str:
    if exit_code is None:
        return "timed out (counts unavailable)"
    return f"exit code {exit_code} (counts unavailable)"

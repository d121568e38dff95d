"""A canary in every go, cargo and Jest test run (pytest's is the report plugin's): a test file
of the harness's, laid where the runner finds it for the run and taken away after, holding a
test that must fail and one that must pass under names chosen afresh for the run, from the
project's own words, with no fixed mark a forger could spare it by (canary_names.py).

Something that rewrites every outcome (a `go test -exec` wrapper or a TestMain that reports a
pass, a cargo `runner` that turns `FAILED` into `ok`, a Jest `testResultsProcessor` or reporter
that flips failures) rewrites the canary's too: the one that must fail passes, or either is
missing from a run that reports tests, and the run is tampered. When the canary's failure is
the only one, the run's exit status is the runner's for a run without it.

Per runner: `lay` writes the file (cargo's is cargo_canary.lay), `take_back` removes it and
what was made for it, `judge` reads the run with the canary judged and taken out.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from autoresearch.gate import canary_names
from autoresearch.gate.runner_reports import Streamed
from autoresearch.safety import worktree_files
from autoresearch.safety.commands import CommandResult

TAMPERED = (
    "the harness's canary tests did not come out as they must (one must fail, one must "
    "pass): something rewrites the test outcomes"
)
# The exit status each runner gives a run with a failing test.
FAIL_CODE = {"cargo": 101, "go": 1, "jest": 1}
# How a test's name ends its id (runner_reports.py): `pkg::Test`, `file > test`.
SEPARATOR = {"cargo": "::", "go": "::", "jest": " > "}


@dataclass(frozen=True)
class Canary:
    runner: str  # cargo | go | jest
    paths: tuple[Path, ...]  # the files laid (go: one per package directory)
    stem: str  # cargo: the test target's name (its file's name without `.rs`)
    # How each test's id ends (go: one per package; Jest: `describe > test`).
    must_pass: tuple[str, ...]
    must_fail: tuple[str, ...]
    made: Path | None = None  # a folder the canary made (cargo's `tests`)
    # Whether the runner surely runs the canary (False where its config cannot be read: a
    # missing canary is then no proof, while a flipped one still is).
    surely_run: bool = True
    # The folders the canary's files went into, with their times before: given back after.
    folders: tuple[tuple[Path, tuple[int, int] | None], ...] = ()
    target: Path | None = None  # cargo: the `target` its test binary is built in


def lay_file(path: Path, text: str, beside: Path | None) -> tuple[Path, tuple[int, int] | None]:
    """Write the canary's file with the times of `beside` (a test file of the project's), the
    folder's times as they were; the folder and its times before, for take_back."""
    folder = path.parent
    before = canary_names.times_of(folder)
    path.write_text(text)
    canary_names.set_times(path, canary_names.times_of(beside) if beside else before)
    canary_names.set_times(folder, before)
    return folder, before


# `go test` flags with which the canary would not run, or would stop the package's own tests
# (-failfast stops a package at the canary's failure).
_GO_NO_CANARY = re.compile(r"(?<![\w-])--?(run|skip|list|failfast)\b")  # GOFLAGS=-run too
_GO_PACKAGE = re.compile(r"^\s*package\s+(\w+)", re.MULTILINE)
_GO_SKIPPED_DIRS = ("vendor", "testdata", "node_modules")


def lay_go(cwd: Path, command: str) -> Canary | None:
    """A canary file in every package directory under `cwd` that holds tests (`go test`
    builds a test binary there already, so the canary adds no build), in the package of the
    tests beside it, under names of its own in each; a nested module's too (a command may `cd`
    into it). None where the command picks tests by name (-run, -skip, -list) or stops at the
    first failure (-failfast)."""
    if _GO_NO_CANARY.search(command):
        return None
    found: list[tuple[Path, list[Path]]] = []
    for folder, dirs, files in os.walk(cwd):  # links to folders are not followed
        here = Path(folder)
        dirs[:] = [d for d in dirs if not d.startswith((".", "_")) and d not in _GO_SKIPPED_DIRS]
        tests = [here / f for f in sorted(files) if f.endswith("_test.go")]
        if tests:
            found.append((here, tests))
    texts = {t: (canary_names.read_texts(cwd, [t]) or [""])[0] for _, ts in found for t in ts}
    namer = canary_names.Namer(texts.values(), canary_names.GO_TESTS)
    paths, folders, must_pass, must_fail = [], [], [], []
    for here, tests in found:
        package = _GO_PACKAGE.search(texts[tests[0]])
        if package is None:
            continue
        stem = free_name(namer, here, "_test.go", canary_names.snake)
        passing = f"Test{canary_names.camel(namer.words_for())}"
        failing = f"Test{canary_names.camel(namer.words_for([passing]))}"
        beside = [t for t in tests if canary_names.GO_TESTS.search(texts[t])] or tests
        path = here / f"{stem}_test.go"
        folders.append(
            lay_file(
                path, _go_text(namer, package.group(1), passing, failing), namer.choice(beside)
            )
        )
        paths.append(path)
        must_pass.append(passing)
        must_fail.append(failing)
    if not paths:
        return None
    return Canary(
        "go", tuple(paths), "", tuple(must_pass), tuple(must_fail), folders=tuple(folders)
    )


def free_name(namer: canary_names.Namer, folder: Path, suffix: str, style) -> str:
    """A file name from the namer's words that `folder` does not hold yet."""
    taken = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    while True:
        stem = style(namer.words_for(taken))
        if not (folder / f"{stem}{suffix}").exists():
            return stem
        taken.append(stem)


def _go_text(namer: canary_names.Namer, package: str, passing: str, failing: str) -> str:
    """The two tests as a project writes them: a sum checked with got and want."""
    tests = []
    for name, off in ((passing, 0), (failing, 1 + namer.below(9))):
        a, b = namer.numbers()
        what = " ".join(namer.choice(namer.words) for _ in range(2))
        tests.append(
            f"func {name}(t *testing.T) {{\n"
            f"\tgot, want := {a}+{b}, {a + b + off}\n"
            f"\tif got != want {{\n"
            f'\t\tt.Errorf("{what}: got %d, want %d", got, want)\n'
            f"\t}}\n}}\n"
        )
    if namer.below(2):
        tests.reverse()
    return f'package {package}\n\nimport "testing"\n\n' + "\n".join(tests)


# Jest settings under which a file in the rootDir may not be found or may not run: the canary
# is then laid all the same, but its absence proves nothing.
_JEST_MOVES_TESTS = ("rootDir", "roots", "testMatch", "testRegex", "testPathIgnorePatterns")
_JEST_CONFIGS = ("jest.config.js", "jest.config.ts", "jest.config.mjs", "jest.config.cjs")
_JEST_NO_CANARY = re.compile(
    r"(?<!\S)(-t|--testNamePattern|--testPathPattern|--findRelatedTests|--onlyChanged|-o"
    r"|--changedSince|--listTests|--bail|-b)\b"
)


_NPM_TEST = re.compile(r"^\s*(npm|yarn|pnpm)\s+(run\s+)?test\b")
_JEST_WORD = re.compile(r"(?<![\w./-])(?:[\w./-]*/)?jest(?=\s|$)")


def _chained(script: str) -> bool:
    """Whether a script runs more than one command (npm appends the arguments to the last)."""
    return re.search(r"[;&|]", script) is not None


def lay_jest(cwd: Path, command: str) -> Canary | None:
    """A `canary_<random>.test.js` in `cwd`, the rootDir Jest's default testMatch searches.
    None where the command picks tests by name or changed files, stops at the first failure
    (--bail), or the config turns Jest's globals off. Under `npm test` what is judged is the
    package's test script (Jest alone, else None) with the arguments after `--`. A path
    pattern or a config the harness cannot read: the canary is laid, but its absence proves
    nothing."""
    package = worktree_files.read_if_any(cwd, "package.json")
    try:
        loaded = json.loads(package) if package else {}
        config, scripts = loaded.get("jest"), loaded.get("scripts")
    except (ValueError, AttributeError):
        config, scripts = None, None
    config = config if isinstance(config, dict) else {}
    npm = _NPM_TEST.match(command)
    if npm:
        script = scripts.get("test") if isinstance(scripts, dict) else None
        if not isinstance(script, str) or not _JEST_WORD.search(script) or _chained(script):
            return None  # flags after `--` would not reach a Jest the harness reads
        passed = command[npm.end() :].strip()
        command = f"{script} {passed.removeprefix('--')}"
    if (
        _JEST_NO_CANARY.search(command)
        or config.get("injectGlobals") is False
        or config.get("bail")
    ):
        return None
    after = _JEST_WORD.split(command, maxsplit=1)[-1]
    try:
        words = shlex.split(after)
    except ValueError:
        words = ["?"]  # cannot be read: as if it named a path
    own_config = any(w in ("-c", "--config") or w.startswith("--config=") for w in words)
    # A word that is no flag is a path pattern (or a flag's value: the canary is then only
    # not insisted on).
    named_paths = any(not w.startswith("-") and w != "--" for w in words)
    surely = not (
        own_config
        or named_paths
        or any((cwd / name).exists() for name in (*_JEST_CONFIGS, "jest.config.json"))
        or any(key in config for key in _JEST_MOVES_TESTS)
    )
    siblings = _jest_tests(cwd)
    texts = canary_names.read_texts(cwd, siblings[:_JEST_READ])
    namer = canary_names.Namer(texts, canary_names.JEST_TESTS)
    beside = namer.choice(siblings) if siblings else None
    path = _jest_path(namer, cwd, beside)
    style = (canary_names.read_texts(cwd, [beside]) or [""])[0] if beside else ""
    describe, passing, failing = (" ".join(namer.words_for()) for _ in range(3))
    folder = lay_file(path, _jest_text(namer, style, describe, passing, failing), beside)
    must_pass, must_fail = (f"{describe}{SEPARATOR['jest']}{t}" for t in (passing, failing))
    return Canary(
        "jest", (path,), path.stem, (must_pass,), (must_fail,), surely_run=surely, folders=(folder,)
    )


# A test file as Jest's default testMatch finds it: `*.test.js`, `*.spec.ts`, `__tests__/x.js`.
_JEST_TEST_FILE = re.compile(r"^(?P<base>.+?)(?P<infix>\.(?:test|spec))?(?P<ext>\.[mc]?[jt]sx?)$")
_JEST_READ = 200  # test files read for the project's words


def _jest_tests(cwd: Path) -> list[Path]:
    """The project's test files as Jest's defaults find them (node_modules and hidden folders
    aside), sorted."""
    found = []
    for folder, dirs, files in os.walk(cwd):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "node_modules")
        here = Path(folder)
        for name in sorted(files):
            match = _JEST_TEST_FILE.match(name)
            if match and (match["infix"] or "__tests__" in here.relative_to(cwd).parts):
                if not (here / name).is_symlink():
                    found.append(here / name)
    return found


def _lower_camel(words: list[str]) -> str:
    name = canary_names.camel(words)
    return name[0].lower() + name[1:]


def _jest_path(namer: canary_names.Namer, cwd: Path, beside: Path | None) -> Path:
    """Where the canary goes: beside a test file of the project's, named in its fashion (its
    `.test`/`.spec`, its extension where it is JavaScript, its words' separator)."""
    match = _JEST_TEST_FILE.match(beside.name) if beside is not None else None
    if beside is None or match is None:
        return cwd / f"{free_name(namer, cwd, '.test.js', canary_names.snake)}.test.js"
    ext = match["ext"] if "t" not in match["ext"].removeprefix(".") else ".js"
    infix = match["infix"] or ""
    base = match["base"]
    if "-" in base:
        style: Callable[[list[str]], str] = "-".join
    elif any(c.isupper() for c in base):
        style = _lower_camel
    else:
        style = canary_names.snake
    return beside.parent / f"{free_name(namer, beside.parent, infix + ext, style)}{infix}{ext}"


def _jest_text(
    namer: canary_names.Namer, beside: str, describe: str, passing: str, failing: str
) -> str:
    """The two tests in a describe block, written as the file beside writes its own (`it` or
    `test`, its quotes)."""
    call = "it" if beside.count("it(") > beside.count("test(") else "test"
    quote = "'" if beside.count("('") > beside.count('("') else '"'
    tests = []
    for title, off in ((passing, 0), (failing, 1 + namer.below(9))):
        a, b = namer.numbers()
        tests.append(
            f"  {call}({quote}{title}{quote}, () => {{\n"
            f"    expect({a} + {b}).toBe({a + b + off});\n  }});\n"
        )
    if namer.below(2):
        tests.reverse()
    return f"describe({quote}{describe}{quote}, () => {{\n" + "\n".join(tests) + "});\n"


def take_back(canary: Canary) -> None:
    """The tree as it was: the canary's files gone, a folder it made, and the folders' times."""
    for path in canary.paths:
        path.unlink(missing_ok=True)
    if canary.made is not None:
        shutil.rmtree(canary.made, ignore_errors=True)
    for folder, times in canary.folders:
        canary_names.set_times(folder, times)
    if canary.target is not None:
        # Its test binary, built afresh under its new name each run, would pile up in `target`.
        for built in canary.target.glob(f"*/deps/{canary.stem}-*"):
            if built.is_file() and not built.is_symlink():
                built.unlink(missing_ok=True)


def judge(
    canary: Canary,
    result: CommandResult,
    streamed: Streamed | None,
    others_failed: Callable[[str], bool] = lambda output: False,
) -> tuple[CommandResult, Streamed | None]:
    """The run's result and report with the canary judged and taken out of them.
    `others_failed(output)`: whether the output names a failure the tally cannot hold (cargo:
    a test target other than the canary's)."""
    tally = streamed.tally if streamed is not None else None
    if tally is None:
        if result.exit_code == 0:  # a pass with no report to find the canary in
            return result, Streamed(None, tampered=TAMPERED)
        return result, streamed
    ran = tally.passed | tally.failed | tally.errored | tally.skipped
    end = SEPARATOR[canary.runner]

    def ids(names: tuple[str, ...], among: set[str]) -> set[str]:
        return {i for i in among if i.endswith(tuple(f"{end}{name}" for name in names))}

    passed, failed = ids(canary.must_pass, tally.passed), ids(canary.must_fail, tally.failed)
    mine = ids(canary.must_pass, ran) | ids(canary.must_fail, ran)
    # A package or target that did not build ran no canary: it is no test that ran without one.
    # A cargo run that exits 0 always ran the crate's canary; a go or Jest run may have run
    # no test at all (no tests: not a pass either way).
    exited_0 = result.exit_code == 0 and canary.runner == "cargo"
    missing = not (passed and failed) and (ran - mine - tally.broken or exited_0)
    if ids(canary.must_fail, tally.passed) or (missing and (canary.surely_run or mine)):
        return result, replace(streamed, tampered=TAMPERED)
    for part in (tally.passed, tally.failed, tally.errored, tally.skipped):
        part -= mine
    if (
        failed
        and result.exit_code == FAIL_CODE[canary.runner]
        and not (tally.failed or tally.errored or tally.broken or others_failed(result.output))
    ):
        result = replace(result, exit_code=0)
    return result, streamed

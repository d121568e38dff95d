"""A canary in every go, cargo and Jest test run (pytest's is the report plugin's): a test file
of the harness's, laid where the runner finds it for the run and taken away after, holding a
test that must fail and one that must pass under names chosen afresh for the run.

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
import secrets
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

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
    stem: str  # the file's name without its suffix (cargo: the test target's name)
    must_pass: str
    must_fail: str
    made: Path | None = None  # a folder the canary made (cargo's `tests`)
    # Whether the runner surely runs the canary (False where its config cannot be read: a
    # missing canary is then no proof, while a flipped one still is).
    surely_run: bool = True


def names(prefix: str = "canary_") -> tuple[str, str, str]:
    """The file stem, the must-pass and the must-fail name, new for every run."""
    stem, must_pass, must_fail = (f"{prefix}{secrets.token_hex(8)}" for _ in range(3))
    return stem, must_pass, must_fail


# `go test` flags with which the canary would not run, or would stop the package's own tests
# (-failfast stops a package at the canary's failure).
_GO_NO_CANARY = re.compile(r"(?<![\w-])--?(run|skip|list|failfast)\b")  # GOFLAGS=-run too
_GO_PACKAGE = re.compile(r"^\s*package\s+(\w+)", re.MULTILINE)
_GO_SKIPPED_DIRS = ("vendor", "testdata", "node_modules")


def lay_go(cwd: Path, command: str) -> Canary | None:
    """A `canary_<random>_test.go` in every package directory under `cwd` that holds tests
    (`go test` builds a test binary there already, so the canary adds no build), in the
    package of the tests beside it; a nested module's too (a command may `cd` into it).
    None where the command picks tests by name (-run, -skip, -list) or stops at the first
    failure (-failfast)."""
    if _GO_NO_CANARY.search(command):
        return None
    stem, must_pass, must_fail = names()
    must_pass, must_fail = f"TestCanary{must_pass[7:]}", f"TestCanary{must_fail[7:]}"
    paths: list[Path] = []
    for folder, dirs, files in os.walk(cwd):  # links to folders are not followed
        here = Path(folder)
        dirs[:] = [d for d in dirs if not d.startswith((".", "_")) and d not in _GO_SKIPPED_DIRS]
        tests = sorted(f for f in files if f.endswith("_test.go"))
        if not tests:
            continue
        text = worktree_files.read_if_any(cwd, str((here / tests[0]).relative_to(cwd)))
        package = _GO_PACKAGE.search(text or "")
        if package is None:
            continue
        path = here / f"{stem}_test.go"
        path.write_text(
            f'package {package.group(1)}\n\nimport "testing"\n\n'
            f"func {must_pass}(t *testing.T) {{}}\n\n"
            f'func {must_fail}(t *testing.T) {{\n\tt.Fatal("the harness canary must fail")\n}}\n'
        )
        paths.append(path)
    if not paths:
        return None
    return Canary("go", tuple(paths), stem, must_pass, must_fail)


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
    stem, must_pass, must_fail = names()
    path = cwd / f"{stem}.test.js"
    path.write_text(
        f"test({json.dumps(must_pass)}, () => {{}});\n\n"
        f"test({json.dumps(must_fail)}, () => {{\n"
        '  throw new Error("the harness canary must fail");\n});\n'
    )
    return Canary("jest", (path,), stem, must_pass, must_fail, surely_run=surely)


def take_back(canary: Canary) -> None:
    """The tree as it was: the canary's files gone, and a folder it made."""
    for path in canary.paths:
        path.unlink(missing_ok=True)
    if canary.made is not None:
        shutil.rmtree(canary.made, ignore_errors=True)
    if canary.runner == "cargo":
        # Its test binary, built afresh under its new name each run, would pile up in `target`.
        crate = canary.paths[0].parent.parent
        for built in crate.glob(f"target/*/deps/{canary.stem}-*"):
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

    def ids(name: str, among: set[str]) -> set[str]:
        return {i for i in among if i.endswith(f"{end}{name}")}

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

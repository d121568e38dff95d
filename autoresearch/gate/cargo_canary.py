"""A canary in every cargo test run: an integration test file of the harness's, laid into the
crate's `tests/` for the run and taken away after, holding a test that must fail and one that
must pass under names chosen afresh for the run (pytest's are the report plugin's).

Something that rewrites every outcome (a `.cargo/config.toml` runner that turns `FAILED` into
`ok` and exits 0, a test binary forging its harness's lines) rewrites the canary's too: the one
that must fail passes, or either is missing from a run that reports tests, and the run is
tampered. When the canary's failure is the only one, the run's exit status is cargo's for a
run without it (cargo exits 101 for any failing target).
"""

from __future__ import annotations

import re
import secrets
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from autoresearch.gate.runner_reports import Streamed
from autoresearch.safety import worktree_files
from autoresearch.safety.commands import CommandResult

_PACKAGE = re.compile(r"^\s*\[package\]\s*$", re.MULTILINE)
_NO_AUTOTESTS = re.compile(r"^\s*autotests\s*=\s*false\b", re.MULTILINE)
_FAILED_TARGET = re.compile(r"`--test (\S+?)`")
TAMPERED = (
    "the harness's canary tests did not come out as they must (one must fail, one must "
    "pass): something rewrites the test outcomes"
)


@dataclass(frozen=True)
class Canary:
    path: Path  # tests/<stem>.rs
    stem: str  # the test target's name
    must_pass: str
    must_fail: str
    made: Path | None  # the `tests` folder, when the canary made it


def lay(cwd: Path) -> Canary | None:
    """The canary written into the crate at `cwd`, or None where cargo would not run it (no
    `[package]` in Cargo.toml: a virtual workspace; `autotests = false`; `tests` not a
    plain folder)."""
    text = worktree_files.read_if_any(Path(cwd), "Cargo.toml")  # a link out is not read
    if text is None or not _PACKAGE.search(text) or _NO_AUTOTESTS.search(text):
        return None
    tests = Path(cwd) / "tests"
    if tests.is_symlink() or (tests.exists() and not tests.is_dir()):
        return None
    made = None if tests.exists() else tests
    tests.mkdir(exist_ok=True)
    stem, must_pass, must_fail = (f"canary_{secrets.token_hex(8)}" for _ in range(3))
    path = tests / f"{stem}.rs"
    path.write_text(
        f"#[test]\nfn {must_pass}() {{}}\n\n"
        f'#[test]\nfn {must_fail}() {{\n    panic!("the harness canary must fail");\n}}\n'
    )
    return Canary(path, stem, must_pass, must_fail, made)


def take_back(canary: Canary) -> None:
    """The crate as it was: the file gone, and the `tests` folder when the canary made it."""
    canary.path.unlink(missing_ok=True)
    if canary.made is not None:
        shutil.rmtree(canary.made, ignore_errors=True)
    # Its test binary, built afresh under its new name each run, would pile up in `target`.
    for built in canary.path.parent.parent.glob(f"target/*/deps/{canary.stem}-*"):
        if built.is_file() and not built.is_symlink():
            built.unlink(missing_ok=True)


def judge(
    canary: Canary, result: CommandResult, streamed: Streamed | None
) -> tuple[CommandResult, Streamed | None]:
    """The run's result and report with the canary judged and taken out of them."""
    tally = streamed.tally if streamed is not None else None
    if tally is None:
        if result.exit_code == 0:  # a pass with no report to find the canary in
            return result, Streamed(None, tampered=TAMPERED)
        return result, streamed
    ran = tally.passed | tally.failed | tally.errored | tally.skipped

    def ids(name: str, among: set[str]) -> set[str]:
        return {i for i in among if i.endswith(f"::{name}")}

    passed, failed = ids(canary.must_pass, tally.passed), ids(canary.must_fail, tally.failed)
    mine = ids(canary.must_pass, ran) | ids(canary.must_fail, ran)
    if ids(canary.must_fail, tally.passed) or (
        not (passed and failed) and (ran - mine or result.exit_code == 0)
    ):
        return result, replace(streamed, tampered=TAMPERED)
    for part in (tally.passed, tally.failed, tally.errored, tally.skipped):
        part -= mine
    others = set(_FAILED_TARGET.findall(result.output)) - {canary.stem}
    if (
        failed
        and result.exit_code == 101
        and not (tally.failed or tally.errored or tally.broken or others)
    ):
        result = replace(result, exit_code=0)
    return result, streamed

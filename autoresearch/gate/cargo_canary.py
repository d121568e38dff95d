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
from pathlib import Path

from autoresearch.gate import runner_canary
from autoresearch.gate.runner_canary import Canary
from autoresearch.gate.runner_reports import Streamed
from autoresearch.safety import worktree_files
from autoresearch.safety.commands import CommandResult

_PACKAGE = re.compile(r"^\s*\[package\]\s*$", re.MULTILINE)
_NO_AUTOTESTS = re.compile(r"^\s*autotests\s*=\s*false\b", re.MULTILINE)
_FAILED_TARGET = re.compile(r"`--test (\S+?)`")


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
    stem, must_pass, must_fail = runner_canary.names()
    path = tests / f"{stem}.rs"
    path.write_text(
        f"#[test]\nfn {must_pass}() {{}}\n\n"
        f'#[test]\nfn {must_fail}() {{\n    panic!("the harness canary must fail");\n}}\n'
    )
    return Canary("cargo", (path,), stem, must_pass, must_fail, made)


take_back = runner_canary.take_back


def judge(
    canary: Canary, result: CommandResult, streamed: Streamed | None
) -> tuple[CommandResult, Streamed | None]:
    """The run's result and report with the canary judged and taken out of them: a failing
    test target other than the canary's fails the run though its tests are not named."""

    def others_failed(output: str) -> bool:
        return bool(set(_FAILED_TARGET.findall(output)) - {canary.stem})

    return runner_canary.judge(canary, result, streamed, others_failed)

"""cargo's canary (gate/cargo_canary.py): every cargo test run holds a test of the harness's that
must fail and one that must pass, under fresh names, in a file laid into the crate for the run.
Real cargo on temp crates (skipped where cargo is not installed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import make_repo

from autoresearch.gate import cargo_canary, testrun
from autoresearch.gate.testrun import FAILED, PASSED, TAMPERED

needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")

CARGO_TOML = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
LIB_RS = """\
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    #[test]
    fn adds() { assert_eq!(super::add(1, 2), 3); }
}
"""
BROKEN_RS = LIB_RS.replace("a + b", "a - b")
# A runner cargo starts each test binary with: it turns every failure into a pass.
FORGER = """\
#!/bin/sh
"$@" 2>&1 | sed -e 's/\\.\\.\\. FAILED/... ok/' \\
  -e 's/result: FAILED\\. \\([0-9]*\\) passed; [0-9]* failed/result: ok. \\1 passed; 0 failed/' \\
  | grep -v '^    [a-z_:]*$' | grep -v '^failures:$'
exit 0
"""


def run(repo: Path) -> testrun.TestRun:
    return testrun.run_tests("cargo test", repo, stack="Rust", timeout_s=600)


@pytest.mark.e2e
@needs_cargo
def test_an_honest_crate_passes_and_the_canary_is_neither_counted_nor_left(tmp_path):
    repo = make_repo(tmp_path / "r", {"Cargo.toml": CARGO_TOML, "src/lib.rs": LIB_RS})
    result = run(repo)
    assert (result.outcome, result.exit_code) == (PASSED, 0), result.tail
    assert result.passing_ids == {"calc src/lib.rs::tests::adds"}
    assert not any("canary" in i for i in result.passing_ids | (result.failing_ids or set()))
    assert not (repo / "tests").exists()
    assert not list((repo / "target").glob("*/deps/canary_*"))  # its binaries go too


@pytest.mark.e2e
@needs_cargo
def test_a_runner_that_turns_failures_into_passes_makes_the_run_tampered(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {
            "Cargo.toml": CARGO_TOML,
            "src/lib.rs": BROKEN_RS,
            "forge.sh": FORGER,
            ".cargo/config.toml": '[target.x86_64-unknown-linux-gnu]\nrunner = "sh forge.sh"\n',
        },
    )
    result = run(repo)
    assert result.outcome == TAMPERED, result.summary
    assert "canary" in result.cause


@pytest.mark.e2e
@needs_cargo
def test_a_real_failure_beside_the_canary_still_fails_the_run(tmp_path):
    repo = make_repo(
        tmp_path / "r",
        {"Cargo.toml": CARGO_TOML, "src/lib.rs": BROKEN_RS, "tests/it.rs": "#[test]\nfn ok() {}\n"},
    )
    result = run(repo)
    assert result.outcome == FAILED
    assert result.failing_ids == {"calc src/lib.rs::tests::adds"}
    # the crate's own tests/ folder kept, the canary's file gone
    assert sorted(p.name for p in (repo / "tests").iterdir()) == ["it.rs"]


def test_no_canary_where_cargo_would_not_run_it(tmp_path):
    (tmp_path / "Cargo.toml").write_text('[workspace]\nmembers = ["a"]\n')
    assert cargo_canary.lay(tmp_path) is None
    (tmp_path / "Cargo.toml").write_text(CARGO_TOML + "autotests = false\n")
    assert cargo_canary.lay(tmp_path) is None


def test_the_canarys_names_are_new_for_every_run(tmp_path):
    (tmp_path / "Cargo.toml").write_text(CARGO_TOML)
    first = cargo_canary.lay(tmp_path)
    cargo_canary.take_back(first)
    second = cargo_canary.lay(tmp_path)
    cargo_canary.take_back(second)
    assert {first.stem, first.must_pass, first.must_fail}.isdisjoint(
        {second.stem, second.must_pass, second.must_fail}
    )
    assert not (tmp_path / "tests").exists()

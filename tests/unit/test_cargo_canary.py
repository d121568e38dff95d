"""cargo's canary (gate/cargo_canary.py): every cargo test run holds a test of the harness's that
must fail and one that must pass, under fresh names, in a file laid into the crate for the run.
Real cargo on temp crates (skipped where cargo is not installed)."""

from __future__ import annotations

import shutil
import subprocess
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

# The same runner sparing the test binaries it takes for the harness's canary (`SPARE`, a shell
# condition: by a test's name in the binary's output, the binary's name, a marker in a file of
# `tests/`): their output goes through as it is, every other binary's is forged.
SPARING_FORGER = """\
#!/bin/sh
out=$("$@" 2>&1); code=$?
binary=$(basename "$1" | sed 's/-[0-9a-f]*$//')
if SPARE; then printf '%s\\n' "$out"; exit $code; fi
printf '%s\\n' "$out" | sed -e 's/\\.\\.\\. FAILED/... ok/' \\
  -e 's/result: FAILED\\. \\([0-9]*\\) passed; [0-9]* failed/result: ok. \\1 passed; 0 failed/' \\
  | grep -v '^    [a-z_:]*$' | grep -v '^failures:$'
exit 0
"""
CARGO_SPARES = {
    "by-test-name": "printf '%s' \"$out\" | grep -q canary_",
    "by-binary-name": 'case "$binary" in canary_*) true;; *) false;; esac',
    "by-marker": "grep -ls 'harness canary' tests/*.rs | sed 's#.*/##; s/[.]rs$//'"
    ' | grep -qx "$binary"',
}
RUNNER = '[target.x86_64-unknown-linux-gnu]\nrunner = "sh forge.sh"\n'


def run(repo: Path) -> testrun.TestRun:
    return testrun.run_tests("cargo test", repo, stack="Rust", timeout_s=600)


@pytest.mark.e2e
@needs_cargo
def test_an_honest_crate_passes_and_the_canary_is_neither_counted_nor_left(tmp_path):
    repo = make_repo(tmp_path / "r", {"Cargo.toml": CARGO_TOML, "src/lib.rs": LIB_RS})
    result = run(repo)
    assert (result.outcome, result.exit_code) == (PASSED, 0), result.tail
    assert result.passing_ids == {"calc src/lib.rs::tests::adds"}
    assert not (repo / "tests").exists()
    assert built(repo) == {"calc"}  # its binaries go too


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
    assert cargo_canary.lay(tmp_path) is None  # no member `a`
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "Cargo.toml").write_text(CARGO_TOML + "autotests = false\n")
    assert cargo_canary.lay(tmp_path) is None
    (tmp_path / "Cargo.toml").write_text(CARGO_TOML + "autotests = false\n")
    assert cargo_canary.lay(tmp_path) is None


def test_the_canarys_names_are_new_for_every_run(tmp_path):
    (tmp_path / "Cargo.toml").write_text(CARGO_TOML)
    first = cargo_canary.lay(tmp_path)
    cargo_canary.take_back(first)
    second = cargo_canary.lay(tmp_path)
    cargo_canary.take_back(second)
    # Drawn afresh (not disjoint: two runs may draw one name alike now and then).
    assert (first.stem, first.must_pass, first.must_fail) != (
        second.stem,
        second.must_pass,
        second.must_fail,
    )
    assert not (tmp_path / "tests").exists()


@pytest.mark.e2e
@needs_cargo
@pytest.mark.parametrize("how", sorted(CARGO_SPARES))
def test_a_runner_that_spares_what_it_takes_for_the_canary_is_still_tampered(
    tmp_path, monkeypatch, how
):
    files = {
        "Cargo.toml": CARGO_TOML,
        "src/lib.rs": BROKEN_RS,
        "forge.sh": SPARING_FORGER.replace("SPARE", CARGO_SPARES[how]),
        ".cargo/config.toml": RUNNER,
    }
    repo = make_repo(tmp_path / "r", files)
    result = run(repo)
    assert result.outcome == TAMPERED, result.summary
    # Without the canary the forgery passes the broken crate.
    monkeypatch.setattr(cargo_canary, "lay", lambda cwd, command="": None)
    assert run(repo).outcome == PASSED


WORKSPACE = {
    "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\nresolver = "2"\n',
    "crates/calc/Cargo.toml": CARGO_TOML,
    "crates/calc/src/lib.rs": LIB_RS,
    "crates/more/Cargo.toml": CARGO_TOML.replace("calc", "more"),
    "crates/more/src/lib.rs": "pub fn one() -> i32 { 1 }\n",
}


@pytest.mark.e2e
@needs_cargo
def test_a_forging_runner_in_a_virtual_workspace_is_tampered(tmp_path):
    files = {**WORKSPACE, "crates/calc/src/lib.rs": BROKEN_RS}
    # cargo runs each test binary in its own crate's folder: the runner is named by its path.
    runner = RUNNER.replace("forge.sh", str(tmp_path / "r" / "forge.sh"))
    repo = make_repo(tmp_path / "r", {**files, "forge.sh": FORGER, ".cargo/config.toml": runner})
    result = run(repo)
    assert result.outcome == TAMPERED, result.summary
    assert untracked(repo) == []


@pytest.mark.e2e
@needs_cargo
def test_an_honest_virtual_workspace_passes_and_its_failure_fails(tmp_path):
    repo = make_repo(tmp_path / "r", WORKSPACE)
    result = run(repo)
    assert (result.outcome, result.exit_code) == (PASSED, 0), result.tail
    assert "calc src/lib.rs::tests::adds" in result.passing_ids
    assert untracked(repo) == []
    assert built(repo) == {"calc", "more"}  # the canary's test binary is gone
    (repo / "crates/calc/src/lib.rs").write_text(BROKEN_RS)
    result = run(repo)
    assert (result.outcome, result.failing_ids) == (FAILED, {"calc src/lib.rs::tests::adds"})
    assert untracked(repo) == []


def untracked(repo: Path) -> list[str]:
    """Files git does not know, `target` (cargo's builds) aside."""
    out = subprocess.run(
        ["git", "ls-files", "--others", "--exclude=/target/", "--exclude=/Cargo.lock"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(out.split())


def built(repo: Path) -> set[str]:
    """The test binaries' names in the workspace's `target`."""
    deps = (repo / "target").glob("*/deps/*")
    return {p.name.rsplit("-", 1)[0] for p in deps if p.is_file() and p.stat().st_mode & 0o111}


def test_a_workspace_canary_goes_into_a_member_cargo_test_runs(tmp_path):
    for member in ("a", "b", "c"):
        (tmp_path / member).mkdir()
        (tmp_path / member / "Cargo.toml").write_text(CARGO_TOML.replace("calc", member))
    root = '[workspace]\nmembers = ["*"]\nexclude = ["a"]\n'
    (tmp_path / "Cargo.toml").write_text(root + 'default-members = ["c"]\n')
    canary = cargo_canary.lay(tmp_path, "cargo test")
    assert canary.paths[0].parent == tmp_path / "c" / "tests"  # the default member
    assert (canary.surely_run, canary.target) == (True, tmp_path / "target")
    cargo_canary.take_back(canary)
    assert not (tmp_path / "c" / "tests").exists()
    (tmp_path / "Cargo.toml").write_text(root)
    canary = cargo_canary.lay(tmp_path, "cargo test -p c")
    assert canary.paths[0].parent == tmp_path / "b" / "tests"  # `a` is excluded
    assert not canary.surely_run  # the packages picked may not hold it
    cargo_canary.take_back(canary)


def test_no_workspace_canary_goes_outside_the_worktree(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "Cargo.toml").write_text(CARGO_TOML)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "linked").symlink_to(tmp_path / "out")
    for members in ('["../out"]', '["linked"]'):
        (tmp_path / "ws" / "Cargo.toml").write_text(f"[workspace]\nmembers = {members}\n")
        assert cargo_canary.lay(tmp_path / "ws") is None, members
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["Cargo.toml"]


def test_no_canary_where_the_command_picks_targets_or_tests():
    picks = (
        "cargo test --lib",
        "cargo test --test it",
        "cargo test adds",  # a name filter
        "cargo test -p calc adds",
        "cargo test -- --exact tests::adds",
        "cargo test -- --ignored",
        "cd calc && cargo test --doc",
    )
    for command in picks:
        assert cargo_canary.picks_tests(command), command
    runs_all = (
        "cargo test",
        "cargo test --no-fail-fast",
        "cargo test -p calc --features fast",
        "cargo +nightly test --workspace -- --test-threads 1 --nocapture",
        "cargo test --tests && cargo clippy",
    )
    for command in runs_all:
        assert not cargo_canary.picks_tests(command), command


@pytest.mark.e2e
@needs_cargo
def test_an_honest_crate_tested_with_lib_only_passes(tmp_path):
    # The canary, an integration test, is not built by `--lib`: its absence is no forgery.
    repo = make_repo(tmp_path / "r", {"Cargo.toml": CARGO_TOML, "src/lib.rs": LIB_RS})
    result = testrun.run_tests("cargo test --lib", repo, stack="Rust", timeout_s=600)
    assert (result.outcome, result.passing_ids) == (PASSED, {"calc src/lib.rs::tests::adds"})

"""A canary in every cargo test run: an integration test file of the harness's, laid into a
crate's `tests/` for the run and taken away after, holding a test that must fail and one that
must pass under names chosen afresh for the run from the crate's own words (canary_names.py;
pytest's are the report plugin's). A virtual workspace (a root Cargo.toml with `[workspace]`
and no `[package]`) gets it in one of the members `cargo test` runs there.

Something that rewrites every outcome (a `.cargo/config.toml` runner that turns `FAILED` into
`ok` and exits 0, a test binary forging its harness's lines) rewrites the canary's too: the one
that must fail passes, or either is missing from a run that reports tests, and the run is
tampered. When the canary's failure is the only one, the run's exit status is cargo's for a
run without it (cargo exits 101 for any failing target).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from autoresearch.gate import canary_names, runner_canary
from autoresearch.gate.runner_canary import Canary
from autoresearch.gate.runner_reports import Streamed
from autoresearch.safety import worktree_files
from autoresearch.safety.commands import CommandResult

_FAILED_TARGET = re.compile(r"`--test (\S+?)`")
# cargo flags that choose packages: a workspace's canary, in one member, may then not run.
_PICKS_PACKAGES = re.compile(r"(?<!\S)(-p|--package|--exclude|--manifest-path)\b")
_READ = 200  # source files read for the crate's words


_CARGO_TEST = re.compile(r"cargo\s+(?:\+\S+\s+)?test(?=\s|$)")
# `cargo test` flags that pick targets (a new file of `tests/` is then not built) and those
# that take a value; after `--`, the test binaries' flags that run every test.
_PICKS_TARGETS = {"--lib", "--bin", "--bins", "--test", "--doc", "--example", "--examples"}
_PICKS_TARGETS |= {"--bench", "--benches"}
_VALUED = {"-p", "--package", "--exclude", "-F", "--features", "-j", "--jobs", "--target"}
_VALUED |= {"--target-dir", "--manifest-path", "--profile", "--color", "--message-format"}
_VALUED |= {"-Z", "--config"}
_RUNS_ALL = {"--nocapture", "--no-capture", "--show-output", "-q", "--quiet", "--report-time"}
_RUNS_ALL |= {"--include-ignored", "--shuffle"}
_RUNS_ALL_VALUED = {"--test-threads", "--color", "--format", "-Z", "--shuffle-seed"}


def picks_tests(command: str) -> bool:
    """Whether the `cargo test` of `command` picks targets or tests by name (`--lib`, `--test
    it`, a name filter, `-- --exact`, `-- --ignored`): the canary would then not run, and its
    absence from a run that exits 0 would be taken for a forgery."""
    found = _CARGO_TEST.search(command)
    if found is None:
        return False
    try:
        words = shlex.split(command[found.end() :])
    except ValueError:
        return True
    after, value_next = False, False
    for word in words:
        if word in ("&&", "||", ";", "|"):
            break
        flag = word.split("=", 1)[0]
        if value_next:
            value_next = False
        elif word == "--" and not after:
            after = True
        elif not after and flag in _PICKS_TARGETS:
            return True
        elif not after and flag in _VALUED:
            value_next = "=" not in word
        elif after and flag in _RUNS_ALL_VALUED:
            value_next = "=" not in word
        elif after and flag not in _RUNS_ALL:
            return True  # a name filter, --skip, --exact, --ignored, --list
        elif not after and not word.startswith("-"):
            return True  # a name filter
    return False


def lay(cwd: Path, command: str = "cargo test") -> Canary | None:
    """The canary written into the crate at `cwd`, or into a member of the virtual workspace
    there; None where cargo would not run it (`autotests = false`; `tests` not a plain
    folder; a workspace without such a member; a command that picks targets or tests)."""
    cwd = Path(cwd)
    if picks_tests(command):
        return None
    manifest = _manifest(cwd, "Cargo.toml")
    if manifest is None:
        return None
    surely = True
    crate: Path | None = cwd
    if "package" not in manifest:
        workspace = manifest.get("workspace")
        if not isinstance(workspace, dict):
            return None
        crate = _member(cwd, workspace)
        surely = _PICKS_PACKAGES.search(command) is None
    if crate is None or not _takes_tests(crate):
        return None
    tests = crate / "tests"
    sources = sorted(tests.glob("*.rs")) + sorted((crate / "src").rglob("*.rs"))
    sources = [p for p in sources if p.is_file() and not p.is_symlink()][:_READ]
    namer = canary_names.Namer(canary_names.read_texts(cwd, sources), canary_names.RUST_TESTS)
    made = None if tests.exists() else tests
    before = canary_names.times_of(crate)
    tests.mkdir(exist_ok=True)
    canary_names.set_times(crate, before)
    stem = runner_canary.free_name(namer, tests, ".rs", canary_names.snake)
    passing = canary_names.snake(namer.words_for())
    failing = canary_names.snake(namer.words_for([passing]))
    path = tests / f"{stem}.rs"
    beside = [p for p in sources if p.parent == tests] or [crate / "Cargo.toml"]
    folder = runner_canary.lay_file(path, _text(namer, passing, failing), namer.choice(beside))
    folders = (folder,) if made is None else ((crate, before),)  # `tests` goes with it
    return Canary(
        "cargo",
        (path,),
        stem,
        (passing,),
        (failing,),
        made,
        surely_run=surely,
        folders=folders,
        target=cwd / "target",
    )


def _manifest(folder: Path, rel: str) -> dict | None:
    text = worktree_files.read_if_any(folder, rel)  # a link out is not read
    try:
        return tomllib.loads(text) if text is not None else None
    except tomllib.TOMLDecodeError:
        return None


def _takes_tests(crate: Path) -> bool:
    """Whether cargo runs a new file of the crate's `tests/` as a test target."""
    manifest = _manifest(crate, "Cargo.toml")
    package = manifest.get("package") if manifest else None
    if not isinstance(package, dict) or package.get("autotests") is False:
        return False
    tests = crate / "tests"
    return not (tests.is_symlink() or (tests.exists() and not tests.is_dir()))


def _member(cwd: Path, workspace: dict) -> Path | None:
    """The first member (of `default-members` where the workspace names them: what `cargo
    test` runs) that takes a test file."""
    names = workspace.get("default-members") or workspace.get("members") or []
    excluded = {(cwd / e).resolve() for e in workspace.get("exclude") or [] if isinstance(e, str)}
    for name in names if isinstance(names, list) else []:
        if not isinstance(name, str):
            continue
        for folder in sorted(cwd.glob(name)):
            if not folder.is_dir() or not folder.resolve().is_relative_to(cwd.resolve()):
                continue  # a member behind a link or `..` lies outside the worktree
            if folder.resolve() not in excluded and _takes_tests(folder):
                return folder
    return None


def _text(namer: canary_names.Namer, passing: str, failing: str) -> str:
    tests = []
    for name, off in ((passing, 0), (failing, 1 + namer.below(9))):
        a, b = namer.numbers()
        tests.append(f"#[test]\nfn {name}() {{\n    assert_eq!({a} + {b}, {a + b + off});\n}}\n")
    if namer.below(2):
        tests.reverse()
    return "\n".join(tests)


take_back = runner_canary.take_back


def judge(
    canary: Canary, result: CommandResult, streamed: Streamed | None
) -> tuple[CommandResult, Streamed | None]:
    """The run's result and report with the canary judged and taken out of them: a failing
    test target other than the canary's fails the run though its tests are not named."""

    def others_failed(output: str) -> bool:
        return bool(set(_FAILED_TARGET.findall(output)) - {canary.stem})

    return runner_canary.judge(canary, result, streamed, others_failed)

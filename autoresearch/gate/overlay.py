"""The start's tests over a change: the files that define or configure the tests where a change
started, laid over the candidate for the gate's decisive run (docs/safety.md).

Which files: every file the runner reported a test from in the run at the change's start (read
from its ids, not guessed from globs) and every file under its nearest `tests` folder (helpers,
expected data), every `conftest.py`, the runner's configuration files
(`pytest.ini`, `setup.cfg`, `tox.ini`, `pyproject.toml`, each whole as the start had it), and
the plugin modules that configuration names (`-p name`, `pytest_plugins`). What the change
added that would run without a start's test naming it is taken away for that run: a runner
file (a new `conftest.py`, `pytest.ini`, ...), a start-up file or a distribution's entry
points, a new test module, any new file of a start's test folder, a new package `__init__.py`
above a start's test file (`_runs_by_itself`). The change's new tests run in the second run.
So a test weakened under its own id, a new config or plugin that rewrites outcomes, a conftest
anywhere, all take no part in the decisive run: the start's tests are what the change is held to.

Go's, Jest's and cargo's runs are graded the same way, with their own files
(runner_overlay.py): the start's test files and runner configuration laid over, what the
change added that would run by itself taken away, and the runner keys of a file the change
also keeps the rest of (package.json, Cargo.toml) set back to the start's.

Applied in place on a pristine worktree (nothing untracked or ignored: the callers clean it
first) and taken back after the run, so the index (per_fix's staged change) is never touched.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath

from autoresearch.gate import report_plugin, runner_overlay
from autoresearch.gate.testrun import TestRun, not_graded
from autoresearch.safety import git, sandbox, tamper

CONFTEST = "conftest.py"
RUNNER_CONFIG = ("pytest.ini", "setup.cfg", "tox.ini", "pyproject.toml")
LINK = "120000"
_PLUGIN_FLAG = re.compile(r"(?<![\w-])-p\s*([A-Za-z_][\w.]*)")
_PLUGINS_VAR = re.compile(r"pytest_plugins\s*=\s*[\[(]?([^\n\])]*)")
_NAME = re.compile(r"[\"']([A-Za-z_][\w.]*)[\"']")


@dataclass(frozen=True)
class Overlay:
    """What the decisive run changes in the candidate's tree, and what it learned on the way."""

    start: str
    restore: dict[str, str] = field(default_factory=dict)  # path -> the start's blob
    remove: tuple[str, ...] = ()  # runner files the change added
    edited: dict[str, str] = field(default_factory=dict)  # test -> how its expectation changed
    inputs: tuple[str, ...] = ()  # restored files the start's tests read or imported (inputs)
    # path -> text: a file of the change with its runner keys set back to the start's
    written: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether the candidate already has the start's tests as they were."""
        return not self.restore and not self.remove and not self.written

    @property
    def digest(self) -> str:
        text = json.dumps(
            [self.start, sorted(self.restore.items()), sorted(self.remove)]
            + ([sorted(self.written.items())] if self.written else [])
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def paths(self) -> list[str]:
        return sorted({*self.restore, *self.remove, *self.written})


def plan(
    worktree: Path,
    start: str,
    reference: TestRun,
    allow_edits: bool = False,
    support: tuple[str, ...] = (),
) -> Overlay | None:
    """The overlay of `start`'s tests on what the worktree's index holds; None when the run at
    the start names no test (a runner that gives no ids). With `allow_edits`, a test file
    whose tests the change edited is run as the change left it (still named). `support`:
    the spec's `test_support` globs, files laid over like the tests."""
    ids = (
        (reference.passing_ids or frozenset())
        | (reference.failing_ids or frozenset())
        | (reference.skipped_ids or frozenset())
    )
    runner = runner_overlay.runner_of(reference.source)
    if runner is not None:
        if not ids:
            return None
        return _plan_runner(worktree, start, runner, ids, support, reference.command, allow_edits)
    files = {i.split("::", 1)[0] for i in ids if "::" in i}
    files = {f for f in files if f.endswith(".py")}
    if not files:
        return None
    at_start = _tree(worktree, start)
    now = _index(worktree)
    if at_start is None or now is None:
        return None
    defining = {f for f in files if f in at_start}
    # A test folder's helpers and data (an expected-output file, an `assert_close`) define
    # its tests as much as its test files: every file under the nearest `tests` folder of
    # a reported test file. Never a test file's plain folder: source may live beside it.
    folders = {folder for f in defining if (folder := _test_folder(f))}
    defining |= {p for p in at_start if any(p.startswith(d + "/") for d in folders)}
    defining |= {p for p in at_start if _runner_file(p)}
    defining |= _plugins(worktree, start, at_start)
    read = inputs(reference, at_start)
    read |= {p for p in at_start if any(sandbox.glob_match(p, glob) for glob in support)}
    defining |= read
    restore = {
        p: at_start[p][1]
        for p in sorted(defining)
        if at_start[p][0] != LINK and now.get(p) != at_start[p]
    }
    remove = tuple(
        sorted(p for p in now if p not in at_start and _runs_by_itself(p, folders, defining))
    )
    edited = _edited(worktree, Overlay(start, restore, remove), ids, now)
    if allow_edits:
        # Expected data and helpers are the tests' expectations too: edited, they run as
        # the change left them, and are named like an edited test.
        edited |= {p: "read by the start's tests; edited" for p in restore if p in read}
        kept = {test.split("::", 1)[0] for test in edited}
        restore = {p: blob for p, blob in restore.items() if p not in kept}
    laid_inputs = tuple(sorted(p for p in restore if p in read))
    return Overlay(start, restore, remove, edited, laid_inputs)


def _plan_runner(
    worktree: Path,
    start: str,
    runner: str,
    ids: frozenset[str],
    support: tuple[str, ...],
    command: str,
    allow_edits: bool,
) -> Overlay | None:
    """The overlay for a go, Jest or cargo run (runner_overlay.py). A start's test the change
    edited is named (runner_overlay.edited); with `allow_edits` its file runs as the change
    left it."""
    at_start = _tree(worktree, start)
    now = _index(worktree)
    if at_start is None or now is None:
        return None
    show = partial(_show, worktree)
    picked = runner_overlay.pick(runner, set(ids), at_start, now, show, command)
    defining = picked.defining | {
        p for p in at_start if any(sandbox.glob_match(p, glob) for glob in support)
    }
    restore = {
        p: at_start[p][1]
        for p in sorted(defining)
        if at_start[p][0] != LINK and now.get(p) != at_start[p]
    }
    edited: dict[str, str] = {}
    for path in [p for p in restore if p in now]:
        found = runner_overlay.edited(
            runner, set(ids), path, show(restore[path]), show(now[path][1])
        )
        edited |= found
        if found and allow_edits:  # runs as the change left it, its edits named
            del restore[path]
    # Rust's unit tests live in source files, which are the change's: an edited one is
    # named all the same.
    for path in (p for p in now if p in at_start and p not in restore and now[p] != at_start[p]):
        if runner == "cargo" and path.endswith(".rs"):
            start_text, text = show(at_start[path][1]), show(now[path][1])
            edited |= runner_overlay.edited(runner, set(ids), path, start_text, text, True)
    written = {p: text for p, text in picked.written.items() if p not in restore}
    return Overlay(start, restore, tuple(sorted(picked.added)), edited, written=written)


def inputs(reference: TestRun, at_start: dict[str, tuple[str, str]]) -> set[str]:
    """The files outside the test folders that the start's tests read or imported, as its run
    logged them (report_plugin._Inputs), that define those tests: data a test or a test
    helper opened itself ("read"); data code of the root opened for a test ("read-via-code")
    whose path names it a test's data (`fixtures/`, `golden/`) and that lies in no Python
    package of the start (else it is the code's own data, which the change may edit with
    it); a module a test imported whose name says test (`testing_support`,
    report_plugin.says_test): never the code under test, which the tests import too. A
    module is never laid over for being read, only for being imported by that rule."""
    packages = {str(PurePosixPath(p).parent) for p in at_start if p.endswith("/__init__.py")}
    found: set[str] = set()
    for how, path in reference.test_inputs or ():
        if path not in at_start or at_start[path][0] == LINK:
            continue
        module = path.endswith((".py", ".pyc", ".so", ".pyd"))
        if how == "read" and not module:
            found.add(path)
        elif how == "read-via-code" and not module and _says_test_data(path):
            folders = [str(parent) for parent in PurePosixPath(path).parents]
            if not any(folder in packages for folder in folders):
                found.add(path)
        elif how == "import" and path.endswith(".py") and report_plugin.says_test(path):
            found.add(path)
    return found


# Words that name a test's data in a path (`fixtures/`, `golden/`, `expected_out.txt`).
_TEST_DATA_WORDS = ("test", "fixture", "golden", "expected", "snapshot", "cassette")


def _says_test_data(path: str) -> bool:
    """Whether a file code of the root opened for a test is named as a test's data: read
    through code, a template or a table the code reads for users (an app's `templates/`)
    is the code's own, which a change may edit with it; the spec's `test_support` names any
    other."""
    words = re.split(r"[/_\-.]", path.lower())
    return any(w.startswith(_TEST_DATA_WORDS) for w in words)


def apply(worktree: Path, overlay: Overlay) -> None:
    """Lay the start's files over the worktree (the index is left as it is)."""
    for path in overlay.remove:
        (worktree / path).unlink(missing_ok=True)
    for path, blob in overlay.restore.items():
        target = worktree / path
        if target.is_symlink() or target.is_dir():
            raise OverlayError(f"{path} is no longer a file in the worktree")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = git.raw(worktree, "cat-file", "blob", blob)
        if data.returncode != 0:
            raise OverlayError(f"git cannot read {path} of {overlay.start[:10]}")
        target.write_bytes(data.stdout)
    for path, text in overlay.written.items():
        target = worktree / path
        if target.is_symlink() or target.is_dir():
            raise OverlayError(f"{path} is no longer a file in the worktree")
        target.write_text(text)


def take_back(worktree: Path, overlay: Overlay) -> None:
    """The worktree as the index has it again, for the paths the overlay touched."""
    now = _index(worktree) or {}
    held = [p for p in overlay.paths if p in now]
    for path in overlay.paths:
        if path not in now:
            (worktree / path).unlink(missing_ok=True)
    if held:
        git.worktree_git(worktree, "checkout-index", "-f", "-q", "--", *held)


def run_laid(worktree: Path, overlay: Overlay, run: Callable[[], TestRun], command: str) -> TestRun:
    """`run()` with the start's files laid over the worktree, cleaned before and after (no
    file the run as it is left, none this run leaves), the files taken back after."""
    git.clean(worktree)
    try:
        apply(worktree, overlay)
        result = run()
    except OverlayError as e:
        result = not_graded(command, str(e))
    finally:
        take_back(worktree, overlay)
        git.clean(worktree)
    return result


class OverlayError(Exception):
    """The start's files could not be laid over the worktree: the run cannot be graded."""


TEST_FOLDERS = ("tests", "test", "testing")


def _test_folder(path: str) -> str | None:
    """The nearest folder named like a test folder that holds `path`."""
    parts = PurePosixPath(path).parts[:-1]
    for n in range(len(parts), 0, -1):
        if parts[n - 1] in TEST_FOLDERS:
            return "/".join(parts[:n])
    return None


def _runs_by_itself(path: str, folders: set[str], defining: set[str]) -> bool:
    """Whether a file the change added would take part in a run of the start's tests
    without any of them naming it: a runner file, a start-up file or a distribution's entry
    points (tamper.is_startup_path), a new test module anywhere (collected, and run as it is
    imported: `calc.mean = ...` at its top reaches every test after it), any new file of a
    start's test folder, and a new `__init__.py` of a folder above a start's test file (run
    when that file is imported as part of its package). The change's new tests run in the
    run of the change as it left them, not in this one."""
    p = PurePosixPath(path)
    if _runner_file(path) or tamper.is_startup_path(path):
        return True
    if p.suffix == ".py" and (p.name.startswith("test_") or p.stem.endswith("_test")):
        return True
    if any(path.startswith(d + "/") for d in folders):
        return True
    if p.name == "__init__.py":
        prefix = "" if str(p.parent) == "." else f"{p.parent}/"
        return any(f.startswith(prefix) for f in defining)
    return False


def _runner_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return name == CONFTEST or name in RUNNER_CONFIG


def _tree(worktree: Path, commit: str) -> dict[str, tuple[str, str]] | None:
    out = git.worktree_proc(worktree, "ls-tree", "-r", "-z", commit)
    if out.returncode != 0:
        return None
    entries: dict[str, tuple[str, str]] = {}
    for entry in out.stdout.split("\0"):
        if "\t" in entry:
            meta, path = entry.split("\t", 1)
            mode, kind, sha = meta.split()
            if kind == "blob":
                entries[path] = (mode, sha)
    return entries


def _index(worktree: Path) -> dict[str, tuple[str, str]] | None:
    out = git.worktree_proc(worktree, "ls-files", "-s", "-z")
    if out.returncode != 0:
        return None
    entries: dict[str, tuple[str, str]] = {}
    for entry in out.stdout.split("\0"):
        if "\t" in entry:
            meta, path = entry.split("\t", 1)
            mode, sha, _stage = meta.split()
            entries[path] = (mode, sha)
    return entries


def _show(worktree: Path, blob: str) -> str:
    out = git.worktree_proc(worktree, "cat-file", "blob", blob)
    return out.stdout if out.returncode == 0 else ""


def _plugins(worktree: Path, start: str, at_start: dict[str, tuple[str, str]]) -> set[str]:
    """The modules of `start` its pytest configuration loads as plugins."""
    names: set[str] = set()
    for path, (_mode, blob) in at_start.items():
        if not _runner_file(path):
            continue
        text = _show(worktree, blob)
        names.update(_PLUGIN_FLAG.findall(text))
        if PurePosixPath(path).name == CONFTEST:
            for listed in _PLUGINS_VAR.findall(text):
                names.update(_NAME.findall(listed))
    found: set[str] = set()
    for name in names:
        module = name.replace(".", "/")
        for suffix in (f"{module}.py", f"{module}/__init__.py"):
            found.update(p for p in at_start if p == suffix or p.endswith("/" + suffix))
    return found


def _edited(
    worktree: Path, overlay: Overlay, ids: frozenset[str], now: dict[str, tuple[str, str]]
) -> dict[str, str]:
    """The tests of the start whose code the change edited (a body, a decorator, an expected
    value), by test (an id without its parameters). A test deleted is a removal, judged as
    one; a test file that no longer parses is left to the run that parses it."""
    edited: dict[str, str] = {}
    files = {test_id.split("::", 1)[0] for test_id in ids}
    for path, blob in overlay.restore.items():
        # Only files a test was reported from: data (a binary one too) is no test's code.
        if path not in now or path not in files or _runner_file(path):
            continue
        before, after = _functions(_show(worktree, blob)), _functions(_show(worktree, now[path][1]))
        if before is None or after is None:
            continue
        for test_id in sorted(ids):
            parts = test_id.split("::")
            if parts[0] != path:
                continue
            name = tuple(part.split("[", 1)[0] for part in parts[1:])
            if name in before and name in after and before[name] != after[name]:
                edited["::".join([path, *name])] = "its code differs from the start's"
    return edited


def _functions(source: str) -> dict[tuple[str, ...], str] | None:
    """Each function of a module, by its qualified name, as a dump without positions."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found: dict[tuple[str, ...], str] = {}

    def walk(node: ast.AST, prefix: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, (*prefix, child.name))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found[(*prefix, child.name)] = ast.dump(child, include_attributes=False)

    walk(tree, ())
    return found

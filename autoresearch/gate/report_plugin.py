"""The harness's pytest plugin: each test's outcome streamed, as the run goes, to a pipe the
harness holds, plus two canary tests of the harness's run through pytest's own report machinery.

This file is copied into a folder outside the worktree (read-only in the jail) and loaded with
`-p`; it imports nothing of autoresearch, since the target's Python may not have it. testrun.py
reads the stream (`read_stream`); the format is one JSON object a line:

    {"t": "start"}                                  once, when pytest is configured
    {"t": "report", "id": ..., "when": ..., "outcome": ..., "xfail": bool}
    {"t": "collect_error", "id": ...}
    {"t": "collect_skip", "id": ...}                a module skipped while collected
    {"t": "canary", "id": ..., "outcome": ...}      the two canaries' call phases
    {"t": "changed", "what": ...}                   the runner's own code changed (once)
    {"t": "input", "path": ..., "how": ...}         a file of the root the tests read (below)
    {"t": "end", "exitstatus": int}                 then the pipe is closed

The code under test runs in this process and could write to the pipe too; the harness takes any
line after "end", a second "start" or a missing "end" as a failed run. The canaries catch an
outcome rewritten for every test (a patched report class, a makereport hook that passes all):
the one that must fail would pass. A rewrite aimed at some tests only (the report class patched
for the worktree's tests, reached by a name built at run time) leaves the canaries alone, so the
runner's own functions and classes are held too (`_Machinery`): taken when collection starts,
before any module of the target is imported, and compared before each test's call report is
made (the modules that make and hand on reports) and at the end (all of them). Any that is no
longer the same object is a changed runner: the harness takes the run as tampered.

What the tests read outside their folders (`_Inputs`): an `open` audit hook logs each file under
the root that is opened for reading while a test file, a conftest or a test helper (a path that
says test: `testing_support.py`) is on the stack: "read" when such a frame opened it itself,
"read-via-code" when code of the root between them did (a loader in the package); a finder
first on `sys.meta_path` logs each module of the root such a frame imported ("import"). The
overlay lays the start's version of each over the candidate (overlay.py), so expected data and
helpers the change edits take no part in the decisive run. Logged from this plugin's import
(before any conftest), buffered until the stream starts.

pytest's PYTEST_CURRENT_TEST and PYTEST_VERSION are never set in a run of this plugin: code under
test that is right only while a test runs (reads either variable) cannot tell by them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Bound when pytest loads this plugin, before the code under test runs: a `json.dumps`
# rebound later does not write this stream.
_dumps = json.dumps
# The modules that make a test's report and hand it to the hooks: held before every report.
REPORTING = (
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.python",
    "_pytest.nodes",
    "_pytest.skipping",
    "_pytest.outcomes",
    "_pytest.main",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._manager",
    "pluggy._result",
)

FD_VARIABLE = "AUTORESEARCH_REPORT_FD"
# Set for every process of a harness's run, and left in place: an xdist worker, which gets no
# stream, still hides pytest's variables from the code it tests (_hide_the_current_test).
RUN_VARIABLE = "AUTORESEARCH_PYTEST_RUN"
CANARY_VARIABLE = "AUTORESEARCH_CANARY"  # the canary module's path, os.pathsep, the two names

_stream: _Stream | None = None
_inputs: _Inputs | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _stream
    # An xdist worker reports to the controller, which streams; a pytest run inside a test
    # (pytester) has its own config and never sees this plugin unless it loads it.
    if hasattr(config, "workerinput") or _stream is not None:
        return
    fd = os.environ.pop(FD_VARIABLE, None)
    canary = os.environ.pop(CANARY_VARIABLE, "")
    if fd is None:
        return
    _stream = _Stream(int(fd), canary, config)
    config.pluginmanager.register(_stream, "autoresearch-report-stream")
    if _inputs is not None:
        _inputs.start(str(config.rootpath), _stream._write)


class _Stream:
    def __init__(self, fd: int, canary: str, config: pytest.Config) -> None:
        os.set_inheritable(fd, False)  # a subprocess of a test gets no copy
        self.out = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
        self.canary = canary.split(os.pathsep) if canary else []
        self.config = config
        self.machinery: _Machinery | None = None
        self.changed = False
        self._write({"t": "start"})

    def _write(self, record: dict) -> None:
        if not self.out.closed:
            self.out.write(_dumps(record) + "\n")

    def _hold(self, full: bool) -> None:
        if self.machinery is None or self.changed:
            return
        what = self.machinery.changed(full)
        if what:
            self.changed = True
            self._write({"t": "changed", "what": what})

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        self.machinery = _Machinery()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
        # Before the call phase's report is made: the one that says whether the test passed
        # (each check is ~0.1 ms; all three phases would be a tenth of a quick suite's CPU).
        if call.when == "call":
            self._hold(full=False)
        yield

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = {
            "t": "report",
            "id": report.nodeid,
            "when": report.when,
            "outcome": report.outcome,
            "xfail": hasattr(report, "wasxfail"),
        }
        # A subtest's report (pytest's `subtests`, pytest-subtests) carries its test's id
        # and a context of its own: streamed apart, it is no test of its own.
        if getattr(report, "context", None) is not None:
            record["sub"] = True
            if report.skipped:
                # Whether the summary line counts it: pytest 9 leaves skipped subtests out of
                # it at its default verbosity, and counts them under -q and -v.
                # The hook's answer is (category, letter, word); the summary counts by category.
                told = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
                record["counted"] = bool(told and told[0] == "skipped")
        self._write(record)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._write({"t": "collect_error", "id": report.nodeid or "."})
        elif report.skipped:  # a module skipped as it was collected: a skip in the summary
            self._write({"t": "collect_skip", "id": report.nodeid or "."})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        # After the suite's loop, while pytest's capture and logging are still set up for
        # running a test, whether the loop ran every test or stopped. (An old-style wrapper:
        # the code after `yield` runs even when the loop raised, on every pytest since 3.)
        yield
        self._run_canaries(session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if _inputs is not None:
            _inputs.finish()
        self._hold(full=True)
        self._write({"t": "end", "exitstatus": int(exitstatus)})
        self.out.close()

    def _run_canaries(self, session: pytest.Session) -> None:
        """The harness's two tests, run as pytest runs any test and handed to every report
        hook that is not pytest's own (pytest's would count them in the exit status and the
        summary), then read as the stream reads any report."""
        if len(self.canary) != 3:
            return
        from _pytest.runner import runtestprotocol

        path, *names = self.canary
        try:
            module = pytest.Module.from_parent(session, path=Path(path))
        except TypeError:  # pytest before 7 names the file `fspath`
            import py  # noqa: PLC0415 (pytest before 7 ships it)

            module = pytest.Module.from_parent(session, fspath=py.path.local(path))
        items = [i for i in module.collect() if isinstance(i, pytest.Item) and i.name in names]
        pm = self.config.pluginmanager
        outside = [p for p in pm.get_plugins() if _pytest_own(p) or p is self]
        logreport = pm.subset_hook_caller("pytest_runtest_logreport", outside)
        for item in items:
            for report in runtestprotocol(item, log=False):
                logreport(report=report)
                if report.when == "call":
                    self._write({"t": "canary", "id": item.name, "outcome": report.outcome})


class _Machinery:
    """The runner's functions and classes as they are now (pytest's, pluggy's, this plugin's):
    each module's functions and classes, and each function, method and property of the
    classes a module defines, held by the object itself (an id could be reused), with the
    live namespace it is read from (a module's dict, a class's mapping proxy)."""

    def __init__(self) -> None:
        self.held: dict[str, list[tuple[Any, str, object, str]]] = {}
        for name, module in list(sys.modules.items()):
            if module is None or not _watched(name):
                continue
            entries = []
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) or callable(value):
                    entries.append((vars(module), attr, value, attr))
                if isinstance(value, type) and value.__module__ == name:
                    space = vars(value)
                    for key, member in list(space.items()):
                        if callable(member) or isinstance(
                            member, staticmethod | classmethod | property
                        ):
                            entries.append((space, key, member, f"{value.__qualname__}.{key}"))
            self.held[name] = entries
        names = [n for n in (*REPORTING, __name__) if n in self.held]
        self.reporting = [entry for n in names for entry in self.held[n]]
        self.named = {id(entry): n for n in self.held for entry in self.held[n]}

    def changed(self, full: bool) -> str | None:
        """The first held name that is no longer the same object, or None (a few hundred
        lookups before each report: the modules that make and hand on reports)."""
        entries = (e for n in self.held for e in self.held[n]) if full else self.reporting
        for entry in entries:
            space, attr, value, shown = entry
            if space.get(attr) is not value:
                return f"{self.named[id(entry)]}: {shown}"
        return None


def _watched(name: str) -> bool:
    return name in ("pytest", "pluggy", __name__) or name.startswith(("_pytest.", "pluggy."))


def _pytest_own(plugin: object) -> bool:
    name = getattr(plugin, "__name__", None) or type(plugin).__module__
    return isinstance(name, str) and (name.startswith("_pytest") or name == "pytest")


class _Inputs:
    """Files of the root the tests read and modules they import, logged by an audit hook (which
    cannot be taken away once added). Attribution walks the stack to frames of the root (not
    the standard library's, pytest's or an installed package's): a read counts when a test
    frame is on the stack, as "read" when the nearest frame of the root is a test frame."""

    def __init__(self) -> None:
        self.root = os.path.realpath(os.getcwd()) + os.sep
        self.write: Any = None
        self.buffered: list[dict] = []
        self.logged: set[tuple[str, str]] = set()
        self.imported: set[str] = set()
        self.kinds: dict[str, int] = {}  # a frame's file -> 0 outside, 1 code, 2 test
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(__file__)}
        self.prefixes = tuple(os.path.realpath(p) + os.sep for p in prefixes)
        self.outside = self._outside()
        self.on = True
        sys.addaudithook(self._hook)
        # A finder first on the path sees every import not yet made, `import_module` too
        # (whose imports raise no audit event); it finds nothing itself.
        sys.meta_path.insert(0, self)  # type: ignore[arg-type]

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if self.on:
            try:
                self._imported(name)
            except Exception:  # noqa: BLE001, S110 (a log must never break the tested run)
                pass

    def _outside(self) -> tuple[str, ...]:
        """The interpreter's and this plugin's folders, unless the root lies in one (a
        worktree under /usr would otherwise hold no frame of the root at all)."""
        return tuple(p for p in self.prefixes if not self.root.startswith(p))

    def start(self, root: str, write: Any) -> None:
        self.root = os.path.realpath(root) + os.sep
        self.outside = self._outside()
        self.kinds.clear()
        self.write = write
        for record in self.buffered:
            if record["path"].startswith(self.root):
                self._emit(record["how"], record["path"])
        self.buffered.clear()

    def finish(self) -> None:
        """The modules a test frame imported, by their files (known once imported)."""
        for name in sorted(self.imported):
            module = sys.modules.get(name)
            path = getattr(module, "__file__", None) if module is not None else None
            if isinstance(path, str):
                self._emit("import", os.path.realpath(path))
        self.on = False

    def _emit(self, how: str, full: str) -> None:
        if not full.startswith(self.root):
            return
        key = (how, full[len(self.root) :])
        if key in self.logged:
            return
        self.logged.add(key)
        if self.write is None:
            self.buffered.append({"how": how, "path": full})
        else:
            self.write({"t": "input", "path": key[1], "how": how})

    def _hook(self, event: str, args: tuple) -> None:
        if not self.on or (event != "open" and event != "sqlite3.connect"):
            return
        try:
            if event == "open":
                self._opened(*args[:3])
            else:  # a database file opened by sqlite's own C code, read or written
                self._opened(args[0], "r", None)
        except Exception:  # noqa: BLE001, S110 (a log must never break the tested run)
            pass

    def _opened(self, path: object, mode: object, flags: object) -> None:
        if isinstance(path, int) or path is None:
            return
        if isinstance(mode, str):
            if any(c in mode for c in "wax+"):
                return
        elif isinstance(flags, int) and flags & os.O_ACCMODE != os.O_RDONLY:
            return
        full = os.path.abspath(os.fsdecode(path))  # type: ignore[arg-type]
        if not full.startswith(self.root):
            full = os.path.realpath(full)
            if not full.startswith(self.root):
                return
        if full.endswith((".py", ".pyc")) or os.sep + "__pycache__" + os.sep in full:
            return  # modules are logged by what imports them
        nearest, tested = self._frames()
        if tested:
            self._emit("read" if nearest == 2 else "read-via-code", os.path.realpath(full))

    def _imported(self, name: object) -> None:
        if isinstance(name, str) and name not in sys.modules and self._frames()[0] == 2:
            self.imported.add(name)

    def _frames(self) -> tuple[int, bool]:
        """The kind of the nearest frame of the root (0: none), and whether a test frame is on
        the stack at all."""
        frame = sys._getframe(2)
        nearest = 0
        while frame is not None:
            kind = self._kind(frame.f_code.co_filename)
            if kind and not nearest:
                nearest = kind
            if kind == 2:
                return nearest, True
            frame = frame.f_back
        return nearest, False

    def _kind(self, filename: str) -> int:
        kind = self.kinds.get(filename)
        if kind is None:
            full = os.path.realpath(filename) if filename[:1] != "<" else ""
            if not full.startswith(self.root) or full.startswith(self.outside):
                kind = 0
            elif os.sep + "site-packages" + os.sep in full:
                kind = 0
            else:
                kind = 2 if says_test(full[len(self.root) :]) else 1
            self.kinds[filename] = kind
        return kind


def says_test(path: str) -> bool:
    """Whether a path of the root is a test's or a test helper's by its name: a conftest, or a
    folder or file whose name has a word starting with `test` (tests/, test_x.py, x_test.py,
    testing_support.py, testutils.py). The overlay reads names with the same rule."""
    parts = path.replace(os.sep, "/").split("/")
    if parts[-1] == "conftest.py":
        return True
    stem = parts[-1].rsplit(".", 1)[0]
    words = [w for part in [*parts[:-1], stem] for w in re.split(r"[_\-.]", part.lower())]
    return any(w.startswith("test") for w in words)


# What pytest puts in the environment for its run: PYTEST_VERSION for the whole run (pytest
# 8.2 on), PYTEST_CURRENT_TEST for each test phase.
RUN_VARIABLES = ("PYTEST_VERSION", "PYTEST_CURRENT_TEST")


def _hide_the_current_test() -> None:
    """Code under test could read what pytest puts in the environment and be right only
    while tests run. Each variable is taken out, and the setter of PYTEST_CURRENT_TEST is
    made to clear it instead (the runner's functions are held after this, so the held
    object is this one). pytest itself reads neither back."""
    for name in RUN_VARIABLES:
        os.environ.pop(name, None)
    try:
        from _pytest import runner
    except ImportError:
        return
    if not hasattr(runner, "_update_current_test_var"):
        return

    def _update_current_test_var(item: object, when: object) -> None:
        os.environ.pop("PYTEST_CURRENT_TEST", None)

    runner._update_current_test_var = _update_current_test_var  # type: ignore[attr-defined]


if FD_VARIABLE in os.environ:
    _inputs = _Inputs()
if FD_VARIABLE in os.environ or os.environ.get(RUN_VARIABLE):
    _hide_the_current_test()

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
"""

from __future__ import annotations

import json
import os
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
CANARY_VARIABLE = "AUTORESEARCH_CANARY"  # the canary module's path, os.pathsep, the two names

_stream: _Stream | None = None


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

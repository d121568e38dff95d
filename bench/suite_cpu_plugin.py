"""A pytest plugin for bench/bench_suite_files.py: the CPU of each test's setup, call and
teardown, with every process the test run waited for (Snakemake, its jobs, git, the target's
test runs).

A module- or session-scoped fixture is paid in the setup of the first test that asks for
it, so a file's costliest setups name its costliest fixtures. Written as JSON lines to the
file in $SUITE_CPU_OUT (nodeid, phase, cpu_s), one line a phase.
"""

from __future__ import annotations

import json
import os
import resource

import pytest


def cpu_s() -> float:
    """User and system CPU of this process and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


def _record(item: pytest.Item, phase: str, start: float) -> None:
    out = os.environ.get("SUITE_CPU_OUT")
    if out:
        line = {"nodeid": item.nodeid, "phase": phase, "cpu_s": round(cpu_s() - start, 3)}
        with open(out, "a") as stream:
            stream.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    start = cpu_s()
    yield
    _record(item, "setup", start)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = cpu_s()
    yield
    _record(item, "call", start)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    start = cpu_s()
    yield
    _record(item, "teardown", start)

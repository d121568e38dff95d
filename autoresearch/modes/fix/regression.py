"""Regression tests for the handed bugs the fix lens fixed.

A bug handed on with a reproduction (a test that failed while the bug was there) is fixed
when that reproduction passes. After the last iteration the harness adds each such
reproduction to the target's tests and commits them in one `test:` commit on the session's
branch, but only once each passes where it now lives and the test command passes with all
of them; otherwise they are left out, with the reason, in regression.json.

The agent's own fixes may not touch tests (`protect_tests`); this commit is the harness's,
made after the last measurement, so nothing resets it away. It is made from the last kept
commit every time until regression.json records it: a kill between the commit and the record
repeats the same commit.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autoresearch.engine.stage import StageEnv
from autoresearch.gate.testrun import TestRun
from autoresearch.safety import commands, git
from autoresearch.safety.protect import ProtectedChange
from autoresearch.session.files import read_json, write_json
from autoresearch.session.layout import SessionLayout

from ..lens.reproduction import judge_reproduction
from .count import HandedBug


@dataclass
class RegressionTests:
    """What the harness added after the last iteration (regression.json)."""

    start: str  # the last kept commit, which the `test:` commit is made on
    commit: str  # the branch's final commit: the `test:` commit, or `start`
    added: list[dict[str, str]] = field(default_factory=list)  # id, title, path
    left_out: list[str] = field(default_factory=list)  # "<id>: <why>"


def path_of(layout: SessionLayout) -> Path:
    return layout.root / "regression.json"


def regression_test_path(worktree: Path, bug: HandedBug) -> str:
    """Where the bug's regression test goes: the target's tests folder, else its root."""
    folder = next((d for d in ("tests", "test") if (worktree / d).is_dir()), "")
    stem = re.sub(r"[^a-z0-9]+", "_", bug.id.lower()).strip("_") or "bug"
    name = f"test_regression_{stem}.py"
    return f"{folder}/{name}" if folder else name


def add(
    env: StageEnv, bugs: list[HandedBug], fixed: set[str], repro_command: str, end: str
) -> RegressionTests:
    """Commit the reproductions of the `fixed` bugs (their ids) as regression tests on top of
    `end`, the last kept commit; recorded in regression.json, which a rerun reads back (unless
    the session has gone on since, from a later commit)."""
    done = read_json(path_of(env.layout))
    if done and done["start"] == end:
        return RegressionTests(**done)
    worktree = env.worktree
    git.reset_to(worktree, end)
    result = RegressionTests(start=end, commit=end)
    for bug in bugs:
        if bug.id not in fixed or not bug.reproduction:
            continue
        path = regression_test_path(worktree, bug)
        if (worktree / path).exists():
            result.left_out.append(f"{bug.id}: {path} already exists in the target")
            continue
        (worktree / path).write_text(bug.reproduction)
        run = commands.run(
            repro_command.replace("{file}", shlex.quote(path)),
            worktree,
            timeout_s=env.spec.test_timeout_s,
            extra_secrets=env.spec.secrets,
            jail=env.jail,
        )
        verdict = judge_reproduction(run.output, None if run.timed_out else run.exit_code)
        if verdict.verdict != "not-reproduced":  # it must run, and pass, where it now lives
            (worktree / path).unlink()
            result.left_out.append(f"{bug.id}: at {path}, {verdict.reason}")
            continue
        result.added.append({"id": bug.id, "title": bug.title, "path": path})
    if result.added:  # the whole suite with them, judged as any change is
        baseline = TestRun.from_record(env.record.baseline)
        verdict = env.judge_tests(env.run_tests(), baseline)
        if not verdict.ok:
            result.left_out += [
                f"{a['id']}: with the regression tests added, {verdict.reason}"
                for a in result.added
            ]
            result.added = []
    if result.added:
        ids = ", ".join(a["id"] for a in result.added)
        body = "\n".join(f"- {a['id']} {a['title']}: {a['path']}" for a in result.added)
        message = (
            f"test: regression tests for {ids}\n\n"
            f"Each failed while its bug was there and passes with the fix.\n\n{body}"
        )
        try:
            result.commit = env.protection.commit_added(
                worktree, [a["path"] for a in result.added], message
            )
        except ProtectedChange as err:  # a test run changed a protected file
            result.left_out += [f"{a['id']}: {err.reason}" for a in result.added]
            result.added = []
    git.reset_to(worktree, result.commit)  # nothing a test run left behind
    write_json(path_of(env.layout), asdict(result))
    for line in result.left_out:
        env.log(f"fix: regression test left out: {line}")
    return result

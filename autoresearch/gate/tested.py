"""Which trees a session has tested: test-runs.jsonl (its one writer and reader) and the
rule for when a recorded run may stand for a tree, so no tree is tested twice.

The rule. A run stands for the tree `T` only when
- at its start the worktree held exactly `T`: every file as `T` has it, committed or
  staged (the per-fix gate tests a staged change), no unstaged change, no untracked file
  and no ignored one (a cache, a build product, a file the tests read), protected paths
  as the base has them (`exact_tree`);
- it ran the same command, in its cached or uncached form, on the same selection of tests
  (the whole suite, or the ids a selecting run was given), under the same timeout, secrets,
  jail settings and stack, in the same track's worktree (`RunKey`);
- and it got to its tests: a run that passed or failed. One that timed out or never ran
  says nothing of the tree, and is run again.
The tree id is git's, computed from what the worktree holds before the run starts (not the
commit's tree, which is the same run only if nothing else was there).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoresearch.gate import testrun
from autoresearch.gate.testrun import TestRun
from autoresearch.safety import git
from autoresearch.safety.protect import Protection
from autoresearch.session.files import append_line, locked

# Outcomes that say something of the tree; a timeout or a run that never started do not.
CONCLUSIVE = (testrun.PASSED, testrun.FAILED)


@dataclass(frozen=True)
class RunKey:
    """What a test run depends on besides the tree. `tree` comes first: json.dumps keeps
    the order, and a reader then parses only the lines of its tree."""

    tree: str
    command: str  # as the spec gives it, or its selecting form (`--lf`) for a selection
    uncached: bool
    track: str
    timeout_s: float | None
    settings: str  # digest of the secrets removed, the jail's settings and the stack
    # digest of the test ids a selecting run was given; "" for the whole suite, so a run
    # of some tests never stands for a run of all of them
    selection: str = ""
    # digest of the start's files laid over the tree for a graded run (overlay.py); "" for
    # the tree as it is
    overlay: str = ""

    @staticmethod
    def settings_digest(secrets: list[str], jail: Any, stack: str | None) -> str:
        text = json.dumps([sorted(secrets), jail, stack], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @staticmethod
    def selection_digest(test_ids: frozenset[str]) -> str:
        text = json.dumps(sorted(test_ids))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# A line written before the key had a field holds what the field's default meant then.
_ABSENT = {"selection": "", "overlay": ""}


def exact_tree(
    worktree: Path, protection: Protection, state: git.TreeState | None = None
) -> str | None:
    """The id of the tree `worktree` holds exactly (HEAD with its staged changes), or None
    when anything else is there: an unstaged change, an untracked or ignored file, a
    protected path that differs from the base. Only a run started on such a worktree stands
    for a tree. Git sees no empty directory: callers clean the worktree first. `state`: the
    worktree's status as the caller read it, with nothing run in it since (a reset that
    found it exact already), so it is not read twice."""
    state = state or git.tree_state(worktree)
    # "1 XY": X the index against HEAD (a staged change is part of the tree), Y the files
    # against the index; "?" untracked, "!" ignored, "u" a conflict.
    if state is None or not state.staged_only:
        return None
    index = git.index_listing(worktree)
    # An index entry that tells git not to look at its file (assume-unchanged,
    # skip-worktree) hides a change from status: nothing of ours sets one; a command run
    # without the jail could.
    if index is None or index.hidden or protection.changed(worktree):
        return None
    if state.clean and not index.gitlinks:
        # The index is HEAD's (a gitlink staged would be invisible to status: none here).
        return git.tree_of(worktree, state.head)
    return git.worktree_git(worktree, "write-tree")


@dataclass(frozen=True)
class TestRunLog:
    """A session's test-runs.jsonl: one line per run of an exact tree, key then run."""

    __test__ = False  # a record, not a pytest test class

    path: Path
    lock: Path

    def add(self, key: RunKey, run: TestRun) -> None:
        with locked(self.lock):
            append_line(self.path, json.dumps(asdict(key) | {"run": run.to_record()}))

    def find(self, key: RunKey) -> TestRun | None:
        """The latest recorded run with this key that got to its tests and ran this very
        command, or None."""
        if not self.path.exists():
            return None
        wanted = asdict(key)
        start = json.dumps({"tree": key.tree})[:-1]
        found = None
        for line in self.path.read_text().splitlines():
            if not line.startswith(start):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed job
            run = entry.get("run")
            if not isinstance(run, dict) or any(
                entry.get(k, _ABSENT.get(k)) != v for k, v in wanted.items()
            ):
                continue
            if run.get("outcome") in CONCLUSIVE and run.get("command") == key.command:
                found = run
        return TestRun.from_record(found) if found else None

    def failed_before(self, track: str) -> frozenset[str]:
        """The ids of every test that failed in a recorded run of this track: the session's
        previous failures, which a fix is the likeliest to break again."""
        if not self.path.exists():
            return frozenset()
        failed: set[str] = set()
        for line in self.path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            run = entry.get("run") if isinstance(entry, dict) else None
            ids = run.get("failing_ids") if isinstance(run, dict) else None
            if entry.get("track") == track and isinstance(ids, list):
                failed.update(i for i in ids if isinstance(i, str))
        return frozenset(failed)

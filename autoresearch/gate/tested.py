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

The agent's own `run_tests` is made by the same rule and filed in the same log (`by:
"agent"`), so the gate does not run that tree again: before it, the worktree is brought to
the tree the agent's change would be committed as (`hold_written`: the files the agent
wrote staged, whatever commands left removed), and it runs the gate's command, uncached,
through the harness's report channel with its canaries (StageEnv.agent_tests). When that
cannot be done without touching the agent's work, the run is made as the worktree is and
filed nowhere. The log is in the session's folder, which no agent tool and no jailed
command can reach: only the harness writes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoresearch.gate import testrun
from autoresearch.gate.testrun import TestRun
from autoresearch.safety import commands, git, worktree_files
from autoresearch.safety.protect import Protection
from autoresearch.safety.worktree_files import MAX_WRITE_BYTES
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


# What marks a line filed by the agent's own run, before the line is parsed.
_BY_AGENT = '"by": "agent"'
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


def hold_written(worktree: Path, written: Mapping[str, str]) -> list[str] | None:
    """Make `worktree` hold the tree the agent's change would be committed as (what
    Protection.keep_written leaves): HEAD with the files the agent wrote (`written`: path ->
    sha256 of what its tools wrote, Toolbox.written) staged, and every untracked or ignored
    file a command left removed. Returns the paths staged (the caller unstages them after
    its run); None, with nothing touched, when that would touch the agent's work or the
    gate would not keep the change as it is: a tracked file changed that the agent did not
    write, a file it wrote changed since, an ignored file it wrote, a change staged."""
    status = git.worktree_proc(
        worktree,
        "status",
        "--porcelain=v1",
        "-z",
        "--no-renames",
        "--untracked-files=all",
        "--ignored=matching",
    )
    if status.returncode != 0:
        return None
    files: list[str] = []
    leftovers = False
    for entry in filter(None, status.stdout.split("\0")):
        code, path = entry[:2], entry[3:]
        if code in ("??", "!!") and path.endswith("/"):  # a folder whole (ignored, a nested
            if any(p.startswith(path) for p in written):  # repository): a write in it stays
                return None
            leftovers = True
        elif path in written:
            if code not in (" M", "??") or _written_digest(worktree, path) != written[path]:
                return None
            files.append(path)
        elif code in ("??", "!!"):
            leftovers = True
        else:
            return None
    if files:
        git.worktree_git(worktree, "add", "-A", "--", *(f":(literal){p}" for p in files))
    if leftovers:
        git.clean(worktree)  # nested `.git` folders too, as every reset
    return files


def _written_digest(worktree: Path, rel: str) -> str | None:
    try:
        data = worktree_files.read_bytes(worktree, rel, max_bytes=MAX_WRITE_BYTES)
    except worktree_files.Refused:
        return None
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class AgentRuns:
    """The agent's run_tests made as the gate makes its runs (StageEnv.agent_tests), for a
    toolbox with these settings: one whose command, jail, timeout or secrets differ (an
    experiment's jail, blind to its holdout files) runs its own way and files nothing.
    `run` takes the agent's writes and returns the run and, when it was made now rather
    than found in the log, the command's own result."""

    command: str
    jail: Any
    timeout_s: float
    secrets: tuple[str, ...]
    run: Callable[[Mapping[str, str]], tuple[TestRun, commands.CommandResult | None]]

    def serves(self, command: str | None, jail: Any, timeout_s: float, secrets: list[str]) -> bool:
        mine = (self.command, self.jail, self.timeout_s, self.secrets)
        return (command, jail, timeout_s, tuple(secrets)) == mine


@dataclass(frozen=True)
class TestRunLog:
    """A session's test-runs.jsonl: one line per run of an exact tree, key then run."""

    __test__ = False  # a record, not a pytest test class

    path: Path
    lock: Path

    def add(self, key: RunKey, run: TestRun, by: str = "", head: str = "") -> None:
        """File `run` under `key`. `by` names who asked for it when not the gate
        ("agent"), `head` the commit the agent's change was being made on."""
        about = {"by": by, "head": head} if by else {}
        entry = asdict(key) | about | {"run": run.to_record()}
        with locked(self.lock):
            append_line(self.path, json.dumps(entry))

    def find(self, key: RunKey) -> TestRun | None:
        """The latest recorded run with this key that got to its tests and ran this very
        command, or None.

        An agent's run that passed after a run of its own failed (or timed out, or could
        not be trusted) while it made a change on the same commit does not stand: the agent
        chose to hand in after seeing that pass, and with a test that passes only some of
        the time that choice is a pick among runs. The gate runs such a tree itself."""
        if not self.path.exists():
            return None
        wanted = asdict(key)
        start = json.dumps({"tree": key.tree})[:-1]
        found = None
        failed_at: set[tuple[Any, Any]] = set()  # (head, track) of an agent's run not passed
        for line in self.path.read_text().splitlines():
            agents = _BY_AGENT in line
            if not (agents or line.startswith(start)):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed job
            run = entry.get("run")
            if not isinstance(run, dict):
                continue
            agents = entry.get("by") == "agent"
            at = (entry.get("head"), entry.get("track"))
            if (
                all(entry.get(k, _ABSENT.get(k)) == v for k, v in wanted.items())
                and run.get("outcome") in CONCLUSIVE
                and run.get("command") == key.command
                and not (agents and run.get("outcome") == testrun.PASSED and at in failed_at)
            ):
                found = run
            if agents and run.get("outcome") != testrun.PASSED:
                failed_at.add(at)
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

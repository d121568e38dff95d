"""The context every stage job works in: session, cycle, track, worktree, log.

Also the rule that makes reruns safe: a stage first returns its worktree to the
commit it started from, so a rerun never stacks duplicate commits (docs/architecture.md).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from autoresearch.agents.backends.base import StageLimits
from autoresearch.engine.loop import Decision
from autoresearch.gate import overlay, tested, testrun
from autoresearch.gate.testrun import TestRun
from autoresearch.gate.verdict import Verdict, acceptable, graded_verdict
from autoresearch.safety import commands, git, seen, tamper
from autoresearch.safety.jail import Jail, build_jail
from autoresearch.safety.protect import Protection
from autoresearch.session import spec, stack
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.views import journal


@dataclass(frozen=True)
class Graded:
    """What `tested_run` learned of a run it returned: the test edits the overlay found,
    the run of the tree as the change left it, and the files laid over for what the tests
    read. Held with the run itself: a lookup by `id()` alone would hand a later run whose
    object took a freed run's address the earlier change's companion (and its verdict)."""

    run: TestRun
    edits: dict[str, str]
    as_left: TestRun
    inputs: tuple[str, ...]


@dataclass
class StageEnv:
    layout: SessionLayout
    spec: spec.SessionSpec
    record: SetupRecord
    cycle: int
    track: str = ""
    log_file: Path | None = None
    # The mode's tamper screen profile (Mode.tamper_profile; None: the mode screens itself).
    tamper_profile: str | None = tamper.GATE

    def finished(self, path: Path) -> Any:
        """The JSON of a file no stage of this job writes (an earlier cycle's decision, an
        earlier stage's record), read once per job; each caller gets its own copy.

        Kept on this StageEnv, which is one job's (jobs are threads of one process: nothing
        is shared between them), and not a dataclass field: an env derived from this one
        (a candidate's) starts with nothing read."""
        parsed = self.__dict__.setdefault("_parsed", {})
        if path not in parsed:
            parsed[path] = json.loads(path.read_text())
        return copy.deepcopy(parsed[path])

    @property
    def worktree(self) -> Path:
        """The worktree's real place (sessions/<name>/worktree is a link to it)."""
        return self.layout.worktree(self.track).resolve()

    @property
    def place(self) -> str:
        """Where this stage's test runs happen, for their record: the track (a lane of
        parallel Green has a worktree, so a place, of its own)."""
        return self.track

    @cached_property
    def jail(self) -> Jail:
        """How this worktree's commands are confined (docs/safety.md)."""
        return jail_for(
            self.layout, self.record.worktrees, self.spec.get("commands"), self.worktree
        )

    @property
    def cycle_dir(self) -> Path:
        return self.layout.cycle(self.cycle, self.track)

    @property
    def label(self) -> str:
        return f"{self.track + ' ' if self.track else ''}cycle {self.cycle:03d}"

    def log(self, line: str) -> None:
        """One line to the rule's log and to the terminal running Snakemake (each value
        the session's masker has seen masked)."""
        line = seen.scrub_for(self.layout.root / seen.STORE, line)
        print(line, file=sys.stderr, flush=True)
        if self.log_file:
            with self.log_file.open("a") as handle:
                handle.write(line + "\n")

    def previous_decision(self) -> Decision | None:
        if self.cycle <= 1:
            return None
        path = self.layout.decision(self.cycle - 1, self.track)
        return Decision.from_json(self.finished(path), path) if path.exists() else None

    def decisions_before(self) -> list[Decision]:
        """Every completed decision of this loop (this track) before the current cycle."""
        return [
            d for d in journal.load_decisions(self.layout, self.track) if d["cycle"] < self.cycle
        ]

    def commits_total(self, cycle_start: str, end: str) -> int:
        """Commits on the loop's branch from its base to `end`, which this cycle built on
        `cycle_start`: the previous cycle's count and this cycle's own, when the cycle began
        where the previous one ended (git then walks this cycle's commits, not the branch's)."""
        prev = self.previous_decision()
        if prev and prev.end_commit == cycle_start:
            earlier = prev.get("commits_total")
            if isinstance(earlier, int):
                return earlier + git.count_commits(self.worktree, cycle_start, end)
        return git.count_commits(self.worktree, self.track_base(), end)

    def track_base(self) -> str:
        """Where this loop's branch started (a broad track records its own)."""
        if self.track:
            meta = json.loads(self.layout.track_meta(self.track).read_text())
            return meta["base_commit"]
        return self.record.base_commit

    def cycle_start(self) -> str:
        prev = self.previous_decision()
        return prev.end_commit if prev else self.track_base()

    def reference_tests(self) -> TestRun:
        """The test run this cycle is held to: where the previous cycle left the suite, or
        the baseline. A change is kept only if it keeps every test that passed there.

        A run that never got to its tests (timed out, not run) names no test that passes,
        and holding a cycle to it would let any test go: the latest earlier run that did
        stands in, since every change kept after it was held to it."""
        return self._reference()[0]

    def reference_commit(self) -> str:
        """The commit the reference run tested: its tests are what a change is held to."""
        return self._reference()[1]

    def hold_to(self, run: TestRun, commit: str) -> bool:
        """From now on in this job, a change is held to `run`, the run of `commit` as the
        last kept change left it (with its own tests), not to where the cycle started: a
        test a change added this cycle is then one the next change may not lose or break.
        False, and nothing held, where `run` never got to its tests."""
        if run.outcome not in (testrun.PASSED, testrun.FAILED):
            return False
        self.__dict__["_held_reference"] = (run, commit)
        return True

    def _reference(self) -> tuple[TestRun, str]:
        held = self.__dict__.get("_held_reference")
        if held is not None:
            return held
        for cycle in range(self.cycle - 1, 0, -1):
            path = self.layout.decision(cycle, self.track)
            earlier = Decision.from_json(self.finished(path), path) if path.exists() else None
            tests = earlier.tests if earlier else None
            if tests and tests.get("outcome") in (testrun.PASSED, testrun.FAILED):
                return TestRun.from_record(tests), earlier.end_commit
        return TestRun.from_record(self.record.baseline), self.track_base()

    def judge_tests(self, after: TestRun, reference: TestRun | None = None) -> Verdict:
        """Whether a change whose run is `after` may stay, held to `reference` (default: the
        run where this cycle started) under the spec's allow_* keys (verdict.acceptable).

        When `after` is a graded run (`tested_run`: the start's tests over the change), the
        change's own tests, run as it left them, must pass too, and a test whose expectation
        the change edited keeps it from being kept unless `allow_test_edits: true`."""
        reference = self.reference_tests() if reference is None else reference
        allow = (self.spec.allow_failing_baseline, self.spec.allow_test_removal)
        graded = self._graded_of(after)
        if graded is None:
            return acceptable(after, reference, *allow)
        return graded_verdict(
            after,
            graded.as_left,
            reference,
            graded.edits,
            *allow,
            self.spec.allow_test_edits,
            graded.inputs,
        )

    @property
    def protection(self) -> Protection:
        """The session's protected paths, held to its base commit, and the tamper screen
        every change passes before the gate (protect.py)."""
        return Protection(
            self.record.base_commit, tuple(self.spec.protected), self.screen, self.log
        )

    @property
    def screen(self) -> tamper.Screen | None:
        """The mode's tamper screen (Mode.tamper_profile); None where the mode screens its
        changes itself."""
        profile = self.tamper_profile
        if profile is None:
            return None
        literal = tuple(
            p.removeprefix("./") for p in self.spec.protected if not any(c in p for c in "*?[]")
        )
        return tamper.Screen(
            profile=profile,
            allowed=self.spec.allow_tamper_flags,
            evaluator=literal,
        )

    def pristine(self, commit: str | None = None) -> None:
        """Make the worktree hold exactly `commit` (default HEAD) before a measurement:
        nothing an agent or a command left outside git, protected files from the base."""
        self._pristine(commit)

    def _pristine(
        self, commit: str | None = None, known: git.TreeState | None = None
    ) -> git.TreeState | None:
        """`pristine`, and the status it read when the worktree was exact already (None
        after a reset or a restore): `_run_key` then reads no second one. `known`: the
        status a reset to HEAD read just before, with nothing run in the worktree since
        (Settled.state): HEAD is not read again, only the protected paths are checked."""
        if known is not None and commit is None:
            restored = self.protection.changed(self.worktree)
            self.protection.restore(self.worktree, restored)
            state = None if restored else known
        else:
            # HEAD itself, not its id: a reset to HEAD needs no rev-parse first.
            restored, state = self.protection.pristine_state(self.worktree, commit or "HEAD")
        if restored:
            self.log(f"protected files restored from base before measuring: {', '.join(restored)}")
        return state

    def run_tests(
        self,
        *,
        uncached: bool = False,
        on_result: Callable[[commands.CommandResult], None] | None = None,
    ) -> TestRun:
        """A run of the test command in the worktree as it is (an uncommitted change)."""
        return testrun.run_tests(
            self.record.test_command,
            self.worktree,
            stack=self.record.stack,
            timeout_s=self.spec.test_timeout_s,
            secrets=self.spec.secrets,
            uncached=uncached,
            jail=self.jail,
            on_result=on_result,
        )

    def agent_tests(
        self, written: Mapping[str, str]
    ) -> tuple[TestRun, commands.CommandResult | None]:
        """The agent's `run_tests` (tested.AgentRuns), made as the gate makes its run of
        the tree the agent's change would be committed as, and filed under that tree like
        one (tested.py), so the gate does not run it again: the files the agent wrote
        (`written`) staged, whatever commands left removed, the gate's command uncached.
        A tree filed before is not run again: its run comes back, with no command result.
        When the worktree cannot be brought to that tree without touching the agent's
        work (tested.hold_written), the run is made as it is and filed nowhere."""
        staged = tested.hold_written(self.worktree, written)
        try:
            key = self._run_key(uncached=True) if staged is not None else None
            runs = self._run_log()
            earlier = runs.find(key) if key and not self.spec.rerun_tests else None
            if earlier is not None:
                self.log(f"tests: the agent's tree {key.tree[:12]} was tested before")
                return earlier, None
            results: list[commands.CommandResult] = []
            run = self.run_tests(uncached=True, on_result=results.append)
            if key:
                runs.add(key, run, by="agent", head=git.head(self.worktree))
            return run, results[-1] if results else None
        finally:
            if staged:  # the agent's change unstaged again, as the agent left it
                git.worktree_git(self.worktree, "reset", "-q")

    def measure_tests(
        self,
        *,
        uncached: bool = False,
        reuse: bool = False,
        at: str | None = None,
        known: git.TreeState | None = None,
    ) -> TestRun:
        """A run of the test command on the committed HEAD (`at`: that commit, checked out
        first) in a pristine worktree (`pristine`), so nothing outside the commit reaches
        the result. With `reuse`, a tree already tested with the same command in this
        session is not tested again (unless the spec says `evaluate.rerun: true`): its
        recorded run is returned. `known`: as `_pristine` takes it."""
        state = self._pristine(at, known)
        return self.tested_run(uncached=uncached, reuse=reuse, state=state)

    def test_change(self) -> TestRun:
        """The per-fix gate's run: the change staged in the index, on a worktree holding
        nothing else (no ignored file either: only what would be committed may decide),
        uncached, so the run stands for its tree and is not run again (tested.py)."""
        git.clean(self.worktree)
        return self.tested_run(uncached=True, reuse=True)

    def measure_only(self, test_ids: frozenset[str]) -> TestRun | None:
        """A run of only `test_ids` on the committed HEAD in a pristine worktree, through
        pytest's `--lf` with the ids written as its last failures; None when the stack
        cannot select tests that way (stack.last_failed_command). Filed under its tree and
        the selection, never as a run of the suite: it decides nothing on its own, and the
        same selection on the same tree is not run again."""
        command = stack.last_failed_command(self.record.test_command, self.worktree)
        if command is None or not test_ids:
            return None
        state = self._pristine()
        cache = self.worktree / ".pytest_cache"
        if cache.exists() or cache.is_symlink():
            return None  # committed: not ours to write (it could lead out of the worktree)
        # The tree before the cache is written: the cache holds the selection, in the key.
        key = self._run_key(uncached=False, command=command, selection=test_ids, state=state)
        runs = self._run_log()
        earlier = runs.find(key) if key and not self.spec.rerun_tests else None
        if earlier is not None:
            self.log(f"tests: these {len(test_ids)} ran on this tree before: {earlier.summary}")
            return earlier
        (cache / "v" / "cache").mkdir(parents=True)
        lastfailed = {test_id: True for test_id in sorted(test_ids)}
        (cache / "v" / "cache" / "lastfailed").write_text(json.dumps(lastfailed))
        run = testrun.run_tests(
            command,
            self.worktree,
            stack=self.record.stack,
            timeout_s=self.spec.test_timeout_s,
            secrets=self.spec.secrets,
            jail=self.jail,
        )
        if key:
            runs.add(key, run)
        return run

    def tested_before(self) -> TestRun | None:
        """The recorded uncached run of the suite on the committed HEAD, if this session has
        one (what `measure_tests(uncached=True, reuse=True)` would return without a run)."""
        state = self._pristine()
        key = self._run_key(uncached=True, state=state)
        if key is None or self.spec.rerun_tests:
            return None
        return self._run_log().find(key)

    def failed_before(self) -> frozenset[str]:
        """The tests that failed in any recorded run of this track (tested.py)."""
        return self._run_log().failed_before(self.track)

    def tested_run(
        self, *, uncached: bool, reuse: bool, state: git.TreeState | None = None
    ) -> TestRun:
        """The gate's decisive run of the worktree (a pristine tree: callers clean it first).

        When the change touched what defines or configures the tests of its start (a test
        file the start's run reported a test from, a conftest, the runner's configuration, a
        plugin it names, or a runner file it added), the run is graded: the start's files are
        laid over the change for it (overlay.py), and the change as it left them runs too,
        for `judge_tests`. Otherwise the one run is both. Each run is recorded under its tree
        (and overlay) when the worktree holds one exactly; with `reuse`, a run recorded under
        the same key stands in (tested.py). `state`: the worktree's status as `pristine`
        just read it (`_pristine`)."""
        key = self._run_key(uncached=uncached, state=state)
        reference, start = self._reference()
        laid = overlay.plan(
            self.worktree, start, reference, self.spec.allow_test_edits, self.spec.test_support
        )
        as_is = self._run_as_is(key, uncached=uncached, reuse=reuse)
        if laid is None or laid.empty:
            if laid is not None and laid.edited:  # allowed, and named in the verdict
                self._hold_graded(Graded(as_is, laid.edited, as_is, ()))
            return as_is
        graded_key = replace(key, overlay=laid.digest) if key else None
        graded = self._graded_run(graded_key, laid, uncached=uncached, reuse=reuse)
        self._hold_graded(Graded(graded, laid.edited, as_is, laid.inputs))
        return graded

    def as_left(self, run: TestRun) -> TestRun:
        """The run of the tree as the change left it: for a graded run, its companion (what
        the next cycle, which starts from this tree, is held to); else `run` itself."""
        graded = self._graded_of(run)
        return graded.as_left if graded else run

    def _hold_graded(self, graded: Graded) -> None:
        # The entry holds its run, so no other object can take the run's id while it lives.
        self.__dict__.setdefault("_graded", {})[id(graded.run)] = graded

    def _graded_of(self, run: TestRun) -> Graded | None:
        graded = self.__dict__.get("_graded", {}).get(id(run))
        return graded if graded is not None and graded.run is run else None

    def _run_as_is(self, key: tested.RunKey | None, *, uncached: bool, reuse: bool) -> TestRun:
        runs = self._run_log()
        if key and reuse and not self.spec.rerun_tests:
            earlier = runs.find(key)
            if earlier is not None:
                self.log(f"tests: tree {key.tree[:12]} was tested before: {earlier.summary}")
                return earlier
        run = self.run_tests(uncached=uncached)
        if key:  # only a run of an exact tree stands for that tree
            runs.add(key, run)
        return run

    def _graded_run(
        self, key: tested.RunKey | None, laid: overlay.Overlay, *, uncached: bool, reuse: bool
    ) -> TestRun:
        """The run with the start's tests laid over the worktree, then taken back."""
        runs = self._run_log()
        if key and reuse and not self.spec.rerun_tests:
            earlier = runs.find(key)
            if earlier is not None:
                self.log(f"tests: tree {key.tree[:12]} with the start's tests was tested before")
                return earlier
        self.log(
            f"tests: the start's tests laid over the change ({len(laid.restore)} restored, "
            f"{len(laid.remove)} taken away: {', '.join(laid.paths[:5])})"
        )
        run = overlay.run_laid(
            self.worktree, laid, lambda: self.run_tests(uncached=uncached), self.record.test_command
        )
        if key:
            runs.add(key, run)
        return run

    def _run_key(
        self,
        *,
        uncached: bool,
        command: str | None = None,
        selection: frozenset[str] = frozenset(),
        state: git.TreeState | None = None,
    ) -> tested.RunKey | None:
        """What a run of the worktree as it is now depends on; None when it holds no exact
        tree (tested.exact_tree). Per place: each track's worktree (and each parallel
        Green lane's) is an environment of its own, and a result stands only for the place
        it was measured in."""
        tree = tested.exact_tree(self.worktree, self.protection, state)
        if not tree:
            return None
        return tested.RunKey(
            tree=tree,
            command=command or self.record.test_command,
            uncached=uncached,
            track=self.place,
            timeout_s=self.spec.test_timeout_s,
            settings=tested.RunKey.settings_digest(
                self.spec.secrets, self.spec.get("commands"), self.record.stack
            ),
            selection=tested.RunKey.selection_digest(selection) if selection else "",
        )

    def _run_log(self) -> tested.TestRunLog:
        return tested.TestRunLog(self.layout.test_runs, self.layout.journal_lock)

    def stage_record(self, stage: str) -> dict[str, Any]:
        """An earlier stage's record of this cycle (its job has ended: the file is final)."""
        return self.finished(self.cycle_dir / f"{stage}.json")

    def begin(self, start: str) -> None:
        """Reset the worktree to the stage's start commit (idempotent reruns)."""
        git.reset_to(self.worktree, start)

    def limits(self) -> StageLimits:
        return StageLimits(
            max_turns=self.spec.agent.get("max_turns"),
            deadline_s=self.spec.agent.get("stage_timeout_s"),
            max_cost_usd=self.spec.stage_budget_usd,
        )

    def toolbox_options(self) -> dict[str, Any]:
        return {
            "jail": self.jail,
            "allow_ignored_writes": bool(self.spec.get("allow_ignored_writes")),
            "test_command": self.record.test_command,
            "linter_command": self.record.linter_command,
            "test_timeout_s": self.spec.test_timeout_s,
            "protected": self.spec.protected,
            "include": self.spec.scope_include,
            "exclude": self.spec.scope_exclude,
            "secrets": self.spec.secrets,
            "agent_runs": tested.AgentRuns(
                self.record.test_command,
                self.jail,
                self.spec.test_timeout_s,
                tuple(self.spec.secrets),
                self.agent_tests,
            ),
        }

    def progress(self, team: str) -> Callable[[str], None]:
        """A backend's progress lines, labelled with session, cycle and team."""
        return lambda line: self.log(f"[{self.layout.name} {self.label} {team}] {line}")


def jail_for(
    layout: SessionLayout, store: str | None, settings: dict[str, Any] | None, worktree: Path
) -> Jail:
    """The jail for a command in `worktree`: it sees nothing of the workflow's folder
    (sessions/, config/) or of other worktrees in the store, only this one."""
    hide = [layout.root.parents[1]] + ([Path(store).parent] if store else [])
    return build_jail(settings, worktree, hide=hide)

"""The test gate: whether a stage's changes may stay on the session branch.

Two ways to keep the same promise, that no kept commit breaks or loses a test that
passed where the cycle started (verdict.acceptable: judged by test id), nor one a change
kept before it in the stage added (`per_fix`: each change is held to the tree the last one
left; Refactor to the tree Green left):

- `per_fix` (TestGate): the suite runs after each change, before it is committed; a
  change that breaks a test is never committed. Each run is recorded with the tree it
  tested (tested.py), so the stage's final run and evaluate reuse the last one.
- `batch` (BatchGate): each change is committed at once and the suite runs once when the
  stage ends. When that run fails, a bisection over the stage's commits finds the first
  one whose tree fails; it is taken out, the commits after it are replayed without it,
  and the new end is tested again, until the end passes. On a slow suite where most
  changes pass, one run replaces one per change. Before the full run of the end the
  stage left, the tests of the changed files run alone when the stack can select them
  (`_fails_fast`): when one of them fails, bisection starts without the full run of a
  tree known to fail. Their pass decides nothing: the full run of every end does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from autoresearch.engine.stage import StageEnv
from autoresearch.gate.testrun import TestRun
from autoresearch.gate.verdict import Verdict
from autoresearch.safety import git
from autoresearch.safety.protect import ProtectedChange
from autoresearch.session import stack

BATCH = "batch"


@dataclass
class TestGate:
    """The suite runs on each change before it is committed (`test_gate: per_fix`)."""

    env: StageEnv
    reference: TestRun
    last: TestRun | None = None
    verdict: Verdict | None = None
    # Whether `check` runs anything in the worktree (so a caller must tidy what the run
    # left before committing), and whether `settle` ends by resetting the worktree (so a
    # caller need not put an unfinished change away first).
    runs_on_check = True
    resets_on_settle = False

    def check(self) -> Verdict:
        """The suite on the change staged in the worktree. The run is recorded under the
        tree it tested, so Green's final run and evaluate do not run that tree again."""
        self.last = self.env.test_change()
        self.verdict = self.env.judge_tests(self.last, self.reference)
        return self.verdict

    def kept_message(self) -> str:
        """What the agent is told when its change was committed (a test removal the spec
        allows, or a run that could not be checked by id, says so)."""
        return self.verdict.reason if self.verdict else "kept"

    def refused(self) -> str:
        """Why the change was not kept, and the end of the run's output."""
        reason = self.verdict.reason if self.verdict else "the tests did not run"
        tail = self.last.tail[-1500:] if self.last else ""
        return f"{reason}\n{tail}".rstrip()

    def settle(self, start: str, commits: list[Landed]) -> Settled:
        """Every commit was tested before it was made: nothing to settle."""
        return Settled(kept={c.sha: c.sha for c in commits})

    def committed(self, sha: str) -> None:
        """The change `check` passed was committed as `sha`: the next change is held to the
        tree it left (a test it added may not go), not to where the cycle started."""
        if self.last is not None:
            self.hold_to(self.env.as_left(self.last), sha)

    def hold_to(self, run: TestRun, commit: str) -> None:
        """Changes from now on are held to `run` of `commit` (StageEnv.hold_to: the start's
        tests the graded run lays over are `commit`'s too)."""
        if self.env.hold_to(run, commit):
            self.reference = run


@dataclass(frozen=True)
class Landed:
    """A commit the stage made: its sha now, the sha it was first made as (a replay
    gives it a new one), its message, and what the stage calls it."""

    sha: str
    message: str
    label: str
    origin: str = ""

    @property
    def first(self) -> str:
        return self.origin or self.sha


@dataclass
class Settled:
    """What `settle` left, by each commit's first sha: the kept ones' sha now, and the
    ones taken out with the reason; `runs`, the test runs it took."""

    kept: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    # The commit the worktree was left at, when `settle` put it there ("" when it did not),
    # and the status its reset read when the worktree was exact there already
    end: str = ""
    state: git.TreeState | None = None
    runs: int = 0
    quick_runs: int = 0  # bisection steps that ran only the end's failures
    early_runs: int = 0  # runs of the changed files' tests alone before an end's full run


@dataclass
class BatchGate(TestGate):
    """Changes are committed untested; `settle` runs the suite once at the stage's end and
    bisects when it fails (`test_gate: batch`)."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)  # full runs only: they decide
    runs: dict[str, TestRun] = field(default_factory=dict)  # the full run of each sha
    # a bisection step's verdict, by (sha, the suspects it ran)
    probed: dict[tuple[str, frozenset[str]], Verdict] = field(default_factory=dict)
    probe_settled: bool = False  # whether a step of this round was settled by the suspects
    runs_on_check = False
    resets_on_settle = True

    def check(self) -> Verdict:
        self.verdict = Verdict(True, "committed untested")
        return self.verdict

    def committed(self, sha: str) -> None:
        """Nothing tested yet: every change of the stage is held to its start at `settle`."""

    def kept_message(self) -> str:
        return (
            "committed; the tests run once when the stage ends (test_gate: batch), and a "
            "change that breaks one is taken out then"
        )

    def settle(self, start: str, commits: list[Landed]) -> Settled:
        done = Settled()
        kept = list(commits)
        good = 0  # how many of `kept`, from the first, are known to pass
        early = True
        while kept:
            # The first commit whose tree fails. The start passes by definition (it is
            # what the stage is held to), and a passing tree's commits before it are
            # taken to pass too; the loop's test of the new end checks that.
            # The early run only on the end the stage left: on a new end it would find
            # a second break sooner, but cost a run on every new end that passes.
            suspects = self._fails_fast(start, kept[-1].sha, done) if early else frozenset()
            early = False
            # A round begun by the early run knows the commits before `hi` pass its
            # failures only, as a step settled by the suspects does.
            self.probe_settled = bool(suspects)
            if not suspects:
                if self._judge(kept[-1].sha, done).ok:
                    break
                suspects = self._suspects(kept[-1].sha)
            lo, hi = good, len(kept) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if self._probe(kept[mid].sha, suspects, done).ok:
                    lo = mid + 1
                else:
                    hi = mid
            bad = kept[hi]
            full = self.verdicts.get(bad.sha)
            why = (full or self.probed[(bad.sha, suspects)]).reason
            self._drop(
                bad, f"the stage's end test run, bisected, fails from this change on: {why}", done
            )
            base = kept[hi - 1].sha if hi else start
            kept = kept[:hi] + self._replay(base, kept[hi + 1 :], bad, done)
            # The commits before `hi` passed this round's suspects only: the end may still
            # fail for another reason (a test gone), which the next round must seek there.
            good = good if self.probe_settled else hi
        done.end = kept[-1].sha if kept else start
        done.state = git.reset_to(self.env.worktree, done.end)
        done.kept = {c.first: c.sha for c in kept}
        return done

    def _judge(self, sha: str, done: Settled) -> Verdict:
        """The suite on the committed tree `sha` (a tree tested before is not run again)."""
        if sha in self.verdicts:
            return self.verdicts[sha]
        env = self.env
        self.last = env.measure_tests(uncached=True, reuse=True, at=sha)
        done.runs += 1
        self.verdict = env.judge_tests(self.last, self.reference)
        # A change whose code rewrites a protected file when the tests run (a benchmark, a
        # metric script) is refused as per_fix's commit guard refuses it.
        changed = env.protection.changed(env.worktree)
        if changed:
            env.protection.restore(env.worktree, changed)
            names = ", ".join(changed)
            self.verdict = Verdict(
                False,
                f"protected file{'s' if len(changed) > 1 else ''} {names} changed by the "
                "test run: restored",
            )
        self.verdicts[sha] = self.verdict
        self.runs[sha] = self.last
        return self.verdict

    def _fails_fast(self, start: str, sha: str, done: Settled) -> frozenset[str]:
        """The early run of the end `sha`: the tests that touch the stage's changed files
        (stack.touching_tests) and those that failed before in this session (the
        previous failures, `--lf`), among those that passed where the cycle started, run
        alone. Returns the ones that fail: the end fails, and they are the bisection's
        suspects. Empty when they pass, or the run cannot tell (it did not run each of
        them, a protected file changed), or it is skipped: the stack cannot select tests,
        the reference names no passing test, none touches the changes, they are more than
        half the suite (the full run costs little more), or the end's full run is known.
        The full run follows an empty answer, and decides."""
        known = self.reference.passing_ids
        if sha in self.verdicts or not known:
            return frozenset()
        env = self.env
        git.reset_to(env.worktree, sha)
        changed = git.changed_files(env.worktree, start, sha)
        chosen = stack.touching_tests(changed, known) | (env.failed_before() & known)
        if not chosen or 2 * len(chosen) > len(known) or env.tested_before() is not None:
            return frozenset()
        run = env.measure_only(chosen)
        if run is None:
            return frozenset()
        done.early_runs += 1
        env.log(f"test gate: {sha[:10]}: the {len(chosen)} tests of the changes: {run.summary}")
        ran = (run.passing_ids or frozenset()) | (run.failing_ids or frozenset())
        failing = chosen & (run.failing_ids or frozenset())
        if not chosen <= ran or env.protection.changed(env.worktree) or not failing:
            return frozenset()
        names = ", ".join(sorted(failing)[:5])
        self.probed[(sha, failing)] = Verdict(
            False, f"tests of the changed files fail here, run alone: {names}"
        )
        return failing

    def _suspects(self, sha: str) -> frozenset[str]:
        """The tests whose failure made the full run of `sha` fail: a bisection step runs
        those first (`--lf`), since a tree on which one still fails fails too."""
        run = self.runs.get(sha)
        if run is None or not run.failing_ids:
            return frozenset()
        if self.reference.passing_ids is not None:  # a test failing from the start is none
            return run.failing_ids & self.reference.passing_ids
        return run.failing_ids - (self.reference.failing_ids or frozenset())

    def _probe(self, sha: str, suspects: frozenset[str], done: Settled) -> Verdict:
        """A bisection step: whether `sha` already holds the end's failure. Only the
        suspects run when the stack can select them: the step looks for the first commit
        on which one fails, and that is all it needs to know (any failure the end still
        has is a suspect; one that is gone by the end does not matter). When the run
        cannot be read by id (it did not run each suspect) or a protected file changed,
        the full run decides the step. What is kept is decided by the full run of every
        new end, never by a step. A tree whose full run is filed (the agent's own, say)
        is judged on it, with no run."""
        if sha in self.verdicts:
            return self.verdicts[sha]
        if (sha, suspects) in self.probed:
            self.probe_settled = True
            return self.probed[(sha, suspects)]
        env = self.env
        git.reset_to(env.worktree, sha)
        if env.tested_before() is not None:  # the whole suite ran on it (the agent's run)
            return self._judge(sha, done)
        quick = env.measure_only(suspects) if suspects else None
        if quick is not None:
            done.quick_runs += 1
            env.log(f"test gate: {sha[:10]}: the end's failures alone: {quick.summary}")
            ran = (quick.passing_ids or frozenset()) | (quick.failing_ids or frozenset())
            still = suspects & (quick.failing_ids or frozenset())
            if suspects <= ran and not env.protection.changed(env.worktree):
                names = ", ".join(sorted(still)[:5])
                self.probe_settled = True
                self.probed[(sha, suspects)] = (
                    Verdict(False, f"tests that fail at the end fail here: {names}")
                    if still
                    else Verdict(True, "the tests that fail at the end pass here")
                )
                return self.probed[(sha, suspects)]
        return self._judge(sha, done)

    def _drop(self, c: Landed, why: str, done: Settled) -> None:
        reason = f"not kept: {why}"
        done.dropped[c.first] = reason
        self.env.log(f"test gate: {c.label} taken out: {reason}")

    def _replay(self, base: str, later: list[Landed], bad: Landed, done: Settled) -> list[Landed]:
        """`later` again on top of `base`, without `bad`; one that no longer applies is
        taken out too."""
        env = self.env
        git.reset_to(env.worktree, base)
        out: list[Landed] = []
        for c in later:
            sha = None
            if git.apply_commit(env.worktree, c.sha):
                try:
                    # Exactly the paths of the commit replayed: what the cherry-pick staged.
                    sha = env.protection.commit(env.worktree, c.message, staged=True)
                except ProtectedChange:
                    sha = None
            if sha is None:
                git.reset_to(env.worktree, out[-1].sha if out else base)
                self._drop(c, f"it built on {bad.label}, which was taken out", done)
                continue
            out.append(Landed(sha, c.message, c.label, c.first))
        return out


# What an agent is told when it handed in no change of its own, by what was missing.
NOTHING_HANDED = {
    "in the worktree": "there is no change in the worktree to commit",
    "the agent made": "there is no change of yours in the worktree",
}


class Check(Protocol):
    """What hand_in asks of a gate: the test gates above, or a mode's own check (ship's
    gates run again). `runs_on_check`: whether `check` runs anything in the worktree."""

    runs_on_check: bool

    def check(self) -> Verdict: ...

    def committed(self, sha: str) -> None: ...


@dataclass
class Handed:
    """What became of one change an agent handed in (hand_in)."""

    sha: str | None = None  # committed
    nothing: str | None = None  # a key of NOTHING_HANDED: there was nothing to check
    protected: str | None = None  # refused by the protection (why); the worktree restored
    # The gate passed: committed, or refused by the protection at the commit, or (no sha,
    # nothing protected) passed with nothing left to commit
    passed: bool = False


def hand_in(env: StageEnv, gate: Check, written: dict[str, str], message: str) -> Handed:
    """One agent attempt, checked, then committed or restored: the check runs on the agent's
    change alone (what a command left beside it is not the agent's), only that change is
    committed, and a change not kept leaves no trace in the worktree. Not passed and neither
    `nothing` nor `protected`: the gate refused it (a test gate's verdict and refused() say
    why)."""
    passed = False
    try:
        kept = env.protection.take_written(env.worktree, written)
        if kept is None:
            return Handed(nothing="in the worktree")
        if not kept.files:
            return Handed(nothing="the agent made")
        passed = gate.check().ok
        if not passed:
            git.restore(env.worktree)
            return Handed()
        if gate.runs_on_check:  # what the tests left: the agent's writes again
            kept = env.protection.take_written(env.worktree, written)
    except ProtectedChange as err:
        git.restore(env.worktree)
        return Handed(protected=err.reason, passed=passed)
    handed = commit_change(env, message, kept.changes if kept else None)
    if handed.sha:
        gate.committed(handed.sha)
    return handed


def commit_change(
    env: StageEnv, message: str, changes: tuple[git.Staged, ...] | None = None
) -> Handed:
    """The change staged in the worktree, its check passed, committed through the protection:
    hand_in's last step, and the decide step's of the modes whose agent hands in a patch that
    a later job applies and measures (experiment, fix). Refused: `protected` says why, and
    the worktree is restored. `changes`: as Protection.commit takes them."""
    try:
        sha = env.protection.commit(env.worktree, message, staged=True, changes=changes)
    except ProtectedChange as err:
        git.restore(env.worktree)
        return Handed(protected=err.reason, passed=True)
    return Handed(sha=sha, passed=True)


def gate_for(env: StageEnv) -> TestGate:
    """The gate the session's spec names (`test_gate`, default batch)."""
    kind = env.spec.test_gate
    gate = BatchGate if kind == BATCH else TestGate
    return gate(env, env.reference_tests())

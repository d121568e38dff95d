"""The batch gate's bisection: every change whose tree fails is taken out, the others stay
(replayed on a new sha), and the branch ends on a tree that passes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from conftest import git, make_repo

from autoresearch.gate.keep import BatchGate, Landed
from autoresearch.gate.testrun import FAILED, PASSED, TestRun
from autoresearch.gate.verdict import Verdict, acceptable
from autoresearch.safety import git as ar_git
from autoresearch.safety.protect import Protection


def run_of(ok: bool) -> TestRun:
    return TestRun(
        command="t",
        ran="t",
        outcome=PASSED if ok else FAILED,
        cause="" if ok else "1 test failed",
        passed=1 if ok else 0,
        failed=0 if ok else 1,
        skipped=0,
        errors=0,
        failing_ids=frozenset() if ok else frozenset({"test_values"}),
        passing_ids=None,
        exit_code=0 if ok else 1,
        duration_s=0.0,
        tail="",
        source="junit",
    )


@dataclass
class Spec:
    allow_failing_baseline: bool = False


@dataclass
class Env:
    """What the gate asks of a stage: its worktree, commits, and a suite that fails when any
    file holds the word BROKEN."""

    worktree: Path
    protection: Protection
    spec: Spec = field(default_factory=Spec)
    tested: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    selects: bool = False  # whether the stack can run the suspects alone (pytest's --lf)
    probed: list[str] = field(default_factory=list)
    reads_ids: bool = True  # whether a run of the suspects names each test it ran

    def measure_only(self, test_ids: frozenset[str]) -> TestRun | None:
        if not self.selects:
            return None
        self.probed.append(ar_git.head(self.worktree))
        run = self.measure_tests()
        self.tested.pop()  # not a run of the suite
        if not self.reads_ids:
            return replace(run, failing_ids=None)
        return replace(run, passing_ids=frozenset() if run.failing_ids else test_ids)

    def measure_tests(self, **_) -> TestRun:
        self.tested.append(ar_git.head(self.worktree))
        files = [p for p in self.worktree.glob("*.txt")]
        return run_of(not any("BROKEN" in p.read_text() for p in files))

    def log(self, line: str) -> None:
        self.lines.append(line)

    def tested_before(self) -> TestRun | None:
        return None  # no run filed before the gate's: the agent ran none here

    def judge_tests(self, after: TestRun, reference: TestRun) -> Verdict:
        # A file saying GONE stands for a change that removed a test: no test fails, and
        # the gate still refuses the tree.
        if any("GONE" in p.read_text() for p in self.worktree.glob("*.txt")):
            return Verdict(False, "a test that passed is gone")
        return acceptable(after, reference, self.spec.allow_failing_baseline)


def stage(tmp_path: Path, contents: list[tuple[str, str]]) -> tuple[Env, str, list[Landed]]:
    """A worktree and one commit per (file, content), as a stage would have made them."""
    repo = make_repo(tmp_path / "target", {f"f{i}.txt": "ok\n" for i in range(8)})
    wt = tmp_path / "wt"
    ar_git.open_worktree(repo, wt, "autoresearch/s", ar_git.head(repo))
    start = ar_git.head(wt)
    env = Env(wt, Protection(start))
    commits = []
    for n, (name, text) in enumerate(contents, 1):
        (wt / name).write_text(text)
        message = f"fix: [F-{n:03d}] change {name}"
        commits.append(Landed(env.protection.commit(wt, message), message, f"F-{n:03d}"))
    return env, start, commits


def test_when_the_end_passes_one_run_settles_everything(tmp_path):
    env, start, commits = stage(tmp_path, [("f1.txt", "a\n"), ("f2.txt", "b\n")])
    settled = BatchGate(env, run_of(True)).settle(start, commits)
    assert settled.runs == 1 and not settled.dropped
    assert settled.kept == {c.sha: c.sha for c in commits}


def test_two_breaking_changes_among_six_are_taken_out_and_the_rest_replayed(tmp_path):
    changes = [(f"f{i}.txt", "BROKEN\n" if i in (2, 5) else f"fix {i}\n") for i in range(1, 7)]
    env, start, commits = stage(tmp_path, changes)
    settled = BatchGate(env, run_of(True)).settle(start, commits)
    assert set(settled.dropped) == {commits[1].sha, commits[4].sha}
    assert (
        "the stage's end test run, bisected, fails from this change on"
        in (settled.dropped[commits[1].sha])
    )
    assert "test_values" in settled.dropped[commits[4].sha]
    kept = [c for c in commits if c.sha in settled.kept]
    assert [c.label for c in kept] == ["F-001", "F-003", "F-004", "F-006"]
    head = ar_git.head(env.worktree)
    assert settled.kept[commits[5].sha] == head  # the last kept change ends the branch
    assert git(env.worktree, "log", "--format=%s", f"{start}..HEAD").splitlines() == [
        "fix: [F-006] change f6.txt",
        "fix: [F-004] change f4.txt",
        "fix: [F-003] change f3.txt",
        "fix: [F-001] change f1.txt",
    ]
    assert "BROKEN" not in "".join(p.read_text() for p in env.worktree.glob("*.txt"))
    # No tree is tested twice, and the one the branch ends on is tested.
    assert len(env.tested) == len(set(env.tested)) == settled.runs
    assert env.tested[-1] == head


def test_a_change_that_only_applies_on_a_dropped_one_goes_with_it(tmp_path):
    env, start, commits = stage(
        tmp_path, [("f1.txt", "BROKEN\n"), ("f1.txt", "BROKEN, noted\n"), ("f2.txt", "fine\n")]
    )
    settled = BatchGate(env, run_of(True)).settle(start, commits)
    assert settled.dropped[commits[1].sha] == "not kept: it built on F-001, which was taken out"
    assert list(settled.kept) == [commits[2].sha]
    assert (env.worktree / "f1.txt").read_text() == "ok\n"
    assert (env.worktree / "f2.txt").read_text() == "fine\n"


def test_a_bisection_step_runs_the_ends_failures_and_only_the_full_run_keeps(tmp_path):
    changes = [(f"f{i}.txt", "BROKEN\n" if i in (2, 5) else f"fix {i}\n") for i in range(1, 7)]
    env, start, commits = stage(tmp_path, changes)
    env.selects = True
    settled = BatchGate(env, run_of(True)).settle(start, commits)
    # What the full bisection keeps, and drops.
    assert set(settled.dropped) == {commits[1].sha, commits[4].sha}
    assert "test_values" in settled.dropped[commits[1].sha]
    assert [c.label for c in commits if c.sha in settled.kept] == [
        "F-001",
        "F-003",
        "F-004",
        "F-006",
    ]
    assert env.probed and settled.quick_runs == len(env.probed)
    # No step ran the full suite: only the three ends did (8 full runs when every step is
    # one), and the branch's end had its full run, which decided.
    assert settled.runs == len(env.tested) == 3
    assert env.tested[-1] == ar_git.head(env.worktree)


def test_a_run_of_the_suspects_that_names_no_ids_leaves_the_step_to_the_full_run(tmp_path):
    changes = [(f"f{i}.txt", "BROKEN\n" if i == 2 else f"fix {i}\n") for i in range(1, 5)]
    env, start, commits = stage(tmp_path, changes)
    env.selects, env.reads_ids = True, False
    settled = BatchGate(env, run_of(True)).settle(start, commits)
    assert set(settled.dropped) == {commits[1].sha}
    assert env.probed and set(env.probed) <= set(env.tested)  # each went on to a full run


def test_after_a_step_settled_by_the_suspects_a_failure_of_another_kind_is_still_found(tmp_path):
    # F-002 removes a test (no test fails), F-005 breaks one: the suspects find F-005; the
    # new end still fails, for F-002, which the next round must find among the commits
    # the suspects' steps passed, not blame a later one.
    changes = [
        (f"f{i}.txt", {2: "GONE\n", 5: "BROKEN\n"}.get(i, f"fix {i}\n")) for i in range(1, 7)
    ]
    env, start, commits = stage(tmp_path, changes)
    env.selects = True
    settled = BatchGate(env, run_of(True)).settle(start, commits)
    assert set(settled.dropped) == {commits[1].sha, commits[4].sha}
    assert [c.label for c in commits if c.sha in settled.kept] == [
        "F-001",
        "F-003",
        "F-004",
        "F-006",
    ]

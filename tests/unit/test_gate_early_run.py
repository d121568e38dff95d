"""The batch gate's early run: before the full run of a stage's end, the tests of the
changed files run alone; when one fails, bisection starts without the full run of that
end, and their pass never stands for the full run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from conftest import make_repo

from autoresearch.gate.keep import BatchGate, Landed
from autoresearch.gate.testrun import FAILED, PASSED, TestRun
from autoresearch.gate.verdict import Verdict, acceptable
from autoresearch.safety import git as ar_git
from autoresearch.safety.protect import Protection

FILES = [f"f{i}.txt" for i in range(8)]
OTHER = "tests/test_other.py::test_other"  # fails when any file says OTHER
ALL = frozenset({f"{name}::test" for name in FILES} | {OTHER})


def run_of(passing: set[str], failing: set[str]) -> TestRun:
    return TestRun(
        command="t",
        ran="t",
        outcome=FAILED if failing else PASSED,
        cause=f"{len(failing)} tests failed" if failing else "",
        passed=len(passing),
        failed=len(failing),
        skipped=0,
        errors=0,
        failing_ids=frozenset(failing),
        passing_ids=frozenset(passing),
        exit_code=1 if failing else 0,
        duration_s=0.0,
        tail="",
        source="junit",
    )


@dataclass
class Spec:
    allow_failing_baseline: bool = False


@dataclass
class Env:
    """A suite of one test per file (`f3.txt::test` fails when f3.txt says BROKEN) and
    test_other, which fails when any file says OTHER; it can run any of them alone."""

    worktree: Path
    protection: Protection
    spec: Spec = field(default_factory=Spec)
    full: list[str] = field(default_factory=list)  # the tree of each full run
    alone: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    recorded: set[str] = field(default_factory=set)  # trees whose full run is on file
    events: list[tuple[str, str]] = field(default_factory=list)  # ("full" | "alone", tree)
    lines: list[str] = field(default_factory=list)

    def _outcomes(self) -> tuple[set[str], set[str]]:
        texts = {name: (self.worktree / name).read_text() for name in FILES}
        failing = {f"{n}::test" for n, t in texts.items() if "BROKEN" in t}
        if any("OTHER" in t for t in texts.values()):
            failing.add(OTHER)
        return set(ALL) - failing, failing

    def measure_tests(self, **_) -> TestRun:
        self.full.append(ar_git.head(self.worktree))
        self.events.append(("full", self.full[-1]))
        return run_of(*self._outcomes())

    def measure_only(self, test_ids: frozenset[str]) -> TestRun | None:
        self.alone.append((ar_git.head(self.worktree), test_ids))
        self.events.append(("alone", self.alone[-1][0]))
        passing, failing = self._outcomes()
        return run_of(passing & test_ids, failing & test_ids)

    def tested_before(self) -> TestRun | None:
        head = ar_git.head(self.worktree)
        return run_of(*self._outcomes()) if head in self.recorded else None

    def failed_before(self) -> frozenset[str]:
        return frozenset()

    def log(self, line: str) -> None:
        self.lines.append(line)

    def judge_tests(self, after: TestRun, reference: TestRun) -> Verdict:
        return acceptable(after, reference, self.spec.allow_failing_baseline)


def stage(tmp_path: Path, contents: list[tuple[str, str]]) -> tuple[Env, str, list[Landed]]:
    repo = make_repo(tmp_path / "target", {name: "ok\n" for name in FILES})
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


def gate(env: Env) -> BatchGate:
    return BatchGate(env, run_of(set(ALL), set()))


def test_a_failing_test_of_the_changed_files_starts_bisection_without_the_ends_full_run(
    tmp_path,
):
    changes = [("f1.txt", "a\n"), ("f2.txt", "BROKEN\n"), ("f3.txt", "c\n")]
    env, start, commits = stage(tmp_path, changes)
    settled = gate(env).settle(start, commits)
    assert list(settled.dropped) == [commits[1].sha]
    assert "f2.txt::test" in settled.dropped[commits[1].sha]
    # The end the stage left was never run in full: its changed files' tests failed.
    assert commits[-1].sha not in env.full
    assert env.alone[0] == (commits[-1].sha, {"f1.txt::test", "f2.txt::test", "f3.txt::test"})
    # The branch's new end had its full run, which decided; no early run of its own.
    assert env.full == [ar_git.head(env.worktree)] and settled.runs == 1
    assert settled.early_runs == 1


def test_a_pass_of_the_changed_files_tests_never_stands_for_the_full_run(tmp_path):
    # F-001's own test passes; its change breaks test_other, which only the full run runs.
    env, start, commits = stage(tmp_path, [("f1.txt", "OTHER\n")])
    settled = gate(env).settle(start, commits)
    assert settled.early_runs == 1 and env.alone == [(commits[0].sha, {"f1.txt::test"})]
    assert env.full[0] == commits[0].sha
    assert list(settled.dropped) == [commits[0].sha]
    assert ar_git.head(env.worktree) == start


def test_no_early_run_when_the_changed_files_tests_are_most_of_the_suite(tmp_path):
    changes = [(name, "BROKEN\n" if name == "f6.txt" else "x\n") for name in FILES[1:]]
    env, start, commits = stage(tmp_path, changes)
    settled = gate(env).settle(start, commits)
    assert settled.early_runs == 0
    assert env.events[0] == ("full", commits[-1].sha)  # the end's full run came first
    assert list(settled.dropped) == [commits[5].sha]


def test_no_early_run_on_an_end_whose_full_run_is_on_file(tmp_path):
    env, start, commits = stage(tmp_path, [("f1.txt", "a\n"), ("f2.txt", "b\n")])
    env.recorded.add(commits[-1].sha)
    settled = gate(env).settle(start, commits)
    assert settled.early_runs == 0 and env.alone == []
    assert not settled.dropped and env.full == [commits[-1].sha]

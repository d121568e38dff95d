"""`autoresearch verify`: every claim of a session's files held to git and the recorded runs.

Each test builds a two-cycle sweep session the way the engine lays one out (a target
repository, the session branch in a worktree, each cycle's stage files, decision, rows in
results.tsv and the test run of its end tree), changes one thing the way a run that wants
to look good might, and reads what verify says.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import CALC, CALC_TESTS, ROOT, git, make_repo

from autoresearch.engine import evaluate
from autoresearch.modes.base import Ended, cycles_done
from autoresearch.session import verify
from autoresearch.session.files import append_line
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord, load_record
from autoresearch.views import journal, status

BRANCH = "autoresearch/improve"
IDS = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_mean"]
USAGE = {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.25, "requests": 2}


def run(summary: str = "2 passed", failing: tuple[str, ...] = ()) -> dict:
    """A test run as the harness records it (testrun.TestRun.to_record's fields)."""
    passing = [i for i in IDS if i not in failing]
    return {
        "outcome": "failed" if failing else "passed",
        "ok": not failing,
        "summary": summary,
        "passed": len(passing),
        "failed": len(failing),
        "skipped": 0,
        "errors": 0,
        "failing_ids": list(failing),
        "passing_ids": passing,
        "skipped_ids": [],
    }


@dataclass
class Session:
    target: Path
    root: Path  # sessions/s
    worktree: Path
    base: str

    @property
    def layout(self) -> SessionLayout:
        return SessionLayout(self.root)

    def commit(self, text: str, message: str) -> str:
        (self.worktree / "calc.py").write_text(text)
        git(self.worktree, "commit", "-q", "-am", message)
        return git(self.worktree, "rev-parse", "HEAD")

    def tree(self, commit: str) -> str:
        return git(self.target, "rev-parse", f"{commit}^{{tree}}")

    def cycle(self, n: int, start: str, fixes: list[tuple[str, str]]) -> dict:
        """Cycle `n` from `start`: one fix commit per (id, summary), every stage file, the
        decision, its rows and the test run of its end tree."""
        folder = self.layout.cycle(n)
        folder.mkdir(parents=True)
        fixed = []
        for fid, summary in fixes:
            message = f"fix: [{fid}] {summary}"
            sha = self.commit(CALC + f"# {fid}\n", message)
            key = f"{summary} (calc.py:1)"
            fixed.append(
                {"id": fid, "key": key, "commit": sha, "summary": summary, "message": message}
            )
        end = git(self.worktree, "rev-parse", "HEAD")
        for name in ("red-findings.md", "sanitized.md", "green-patch.md", "refactor-patch.md"):
            (folder / name).write_text(f"# {name}\n")
        stage = {"cycle": n, "track": "", "start_commit": start, "end_commit": start}
        (folder / "red.json").write_text(json.dumps({**stage, "findings": len(fixes)}))
        green = {**stage, "end_commit": end, "fixed": fixed, "skipped": [], "usage": USAGE}
        (folder / "green.json").write_text(json.dumps(green))
        refactor = {**stage, "start_commit": end, "end_commit": end, "changes": 0, "commits": []}
        (folder / "refactor.json").write_text(json.dumps(refactor))
        tests = run()
        decision = {
            "cycle": n,
            "track": "",
            "start_commit": start,
            "end_commit": end,
            "tests_pass": True,
            "test_summary": tests["summary"],
            "tests": tests,
            "reverted": [],
            "findings": len(fixes),
            "fixed": fixed,
            "skipped": [],
            "files_changed": ["calc.py"],
            "open_issues": [],
            "commits_total": int(git(self.target, "rev-list", "--count", f"{self.base}..{end}")),
            "stop": False,
            "reason": None,
        }
        (folder / "decision.json").write_text(json.dumps(decision))
        (folder / "eval-results.md").write_text(evaluate.render_results(decision))
        journal.note_decision(self.layout, n)
        team = {"status": "ok", "tests_pass": True, "timestamp": journal.now()}
        journal.upsert_results(
            self.layout,
            "",
            f"{n:03d}",
            [
                {**team, "team": "red", "description": f"{len(fixes)} findings"},
                {
                    **team,
                    "team": "green",
                    "description": f"{len(fixes)} fixed, 0 skipped",
                    "tokens": 1200,
                    "cost_usd": 0.25,
                },
                {**team, "team": "refactor", "description": "0 changes"},
            ],
        )
        entry = {"tree": self.tree(end), "command": "pytest", "uncached": True, "track": ""}
        append_line(self.layout.test_runs, json.dumps(entry | {"run": tests}))
        for stage in ("red", "sanitize", "green", "refactor", "evaluate"):
            log = self.root / "logs" / stage / f"{n:03d}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"{stage} of cycle {n}\n")
        return decision

    def edit(self, path: str, change) -> None:
        """Rewrite one of the session's JSON files with `change(data)`."""
        file = self.root / path
        data = json.loads(file.read_text())
        change(data)
        file.write_text(json.dumps(data))

    def move_branch(self, commit: str) -> None:
        git(self.worktree, "reset", "-q", "--hard", commit)

    def verify(self) -> verify.Audit:
        return verify.audit(self.root)

    def lines(self) -> list[str]:
        return [str(d) for d in self.verify().differences]


@pytest.fixture
def session(tmp_path) -> Session:
    """A finished two-cycle sweep session: cycle 1 kept two fixes, cycle 2 one."""
    target = make_repo(tmp_path / "target", {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS})
    root = tmp_path / "work" / "sessions" / "s"
    worktree = root / "worktree"
    root.mkdir(parents=True)
    git(target, "worktree", "add", "-q", "-b", BRANCH, str(worktree))
    base = git(target, "rev-parse", "HEAD")
    s = Session(target, root, worktree, base)
    SetupRecord(
        name="s",
        mode="sweep",
        version="0.1.0",
        target=str(target),
        stack="Python",
        test_command="pytest",
        linter_command=None,
        branch=BRANCH,
        base_commit=base,
        baseline=run(),
        date="2026-12-01",
        config_file=None,
        conventions="",
    ).save(s.layout)
    (root / "results.tsv").write_text("\t".join(journal.RESULTS_COLUMNS) + "\n")
    (root / "session.yaml").write_text(f"mode: sweep\ntarget: {target}\n")
    first = s.cycle(1, base, [("F-001", "guard mean"), ("F-002", "check add")])
    last = s.cycle(2, first["end_commit"], [("F-003", "name the module")])
    cycles = [journal.cycle_line(d) for d in (first, last)]
    (root / "session.md").write_text("# s\n\n## Cycles completed\n" + "\n".join(cycles) + "\n")
    record = load_record(s.layout)
    (root / "done").write_text(cycles_done("sweep", Ended(s.layout, record, None, [first, last])))
    return s


# --- a session as the engine left it -------------------------------------------------------


def test_a_session_as_the_engine_left_it_verifies_with_its_counts(session):
    found = session.verify()
    assert found.differences == []
    assert found.summary() == "verified: 2 cycles, 3 commits, 2 test runs matched to their trees"


# --- stage files ----------------------------------------------------------------------------


def test_a_deleted_eval_results_under_done_is_reported_with_the_command_that_reruns_it(session):
    (session.root / "cycles/001/eval-results.md").unlink()
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/001/eval-results.md: missing, though cycle 1")
    assert "`autoresearch redo s --cycle 1 --stage red`" in line


def test_a_deleted_decision_between_decided_cycles_is_reported(session):
    (session.root / "cycles/001/decision.json").unlink()
    lines = session.lines()
    assert lines[0].startswith("sessions/s/cycles/001/decision.json: missing, though")


def test_a_decision_of_the_last_cycle_deleted_under_done_is_reported(session):
    (session.root / "cycles/002/decision.json").unlink()
    (session.root / "cycles/decisions.jsonl").unlink()  # the index cannot give it away
    assert "sessions/s/cycles/002/decision.json: missing, though the session is done" in (
        session.lines()
    )


def test_a_cycle_still_running_is_not_a_difference(session):
    (session.root / "done").unlink()
    folder = session.layout.cycle(3)
    folder.mkdir()
    (folder / "red-findings.md").write_text("# red\n")
    session.commit(CALC + "# in progress\n", "fix: [F-004] in progress")
    assert session.lines() == []


def without_refactor(session: Session) -> None:
    """The session as `teams: [red, green]` leaves it: no Refactor files, rows or logs."""
    spec = session.root / "session.yaml"
    spec.write_text(spec.read_text() + "teams: [red, green]\n")
    for n in (1, 2):
        for name in ("refactor-patch.md", "refactor.json"):
            (session.layout.cycle(n) / name).unlink()
    shutil.rmtree(session.root / "logs/refactor")
    rows = (session.root / "results.tsv").read_text().splitlines(keepends=True)
    (session.root / "results.tsv").write_text("".join(r for r in rows if "\trefactor\t" not in r))


def test_a_session_whose_teams_leave_out_refactor_verifies_without_its_files(session):
    without_refactor(session)
    assert session.lines() == []


def test_a_refactor_record_deleted_from_a_session_with_refactor_is_still_reported(session):
    (session.layout.cycle(2) / "refactor.json").unlink()
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/002/refactor.json: missing, though cycle 2")


def test_a_refactor_commit_hidden_by_dropping_refactor_from_the_spec_is_reported(session):
    # Its record deleted and the frozen spec edited to say there never was a Refactor: the
    # commit it made is still on the branch, and now no record names it.
    tidied = session.commit(CALC + "# tidied\n", "refactor: tidy calc")
    made = [{"commit": tidied, "message": "refactor: tidy calc"}]
    session.edit("cycles/002/refactor.json", lambda d: d.update(end_commit=tidied, commits=made))
    session.edit("cycles/002/decision.json", lambda d: d.update(end_commit=tidied))
    unnamed = (
        f"sessions/s/cycles/002/decision.json: commit {tidied[:12]} 'refactor: tidy calc' "
        "is named by no record"
    )
    assert unnamed not in session.lines()  # its record names it
    without_refactor(session)
    assert unnamed in session.lines()


def test_a_stage_file_linked_to_another_cycles_is_reported(session):
    eval_results = session.root / "cycles/002/eval-results.md"
    eval_results.unlink()
    eval_results.symlink_to(session.root / "cycles/001/eval-results.md")
    assert session.lines() == [
        "sessions/s/cycles/002/eval-results.md: is a link, not the file the stage wrote"
    ]


def test_a_decision_copied_from_another_cycle_is_reported(session):
    first = (session.root / "cycles/001/decision.json").read_text()
    (session.root / "cycles/002/decision.json").write_text(first)
    assert (
        "sessions/s/cycles/002/decision.json: is the decision of cycle 1, not of its folder's"
        in session.lines()
    )


def test_a_fifo_in_place_of_a_decision_is_reported_and_never_read(session):
    decision = session.root / "cycles/002/decision.json"
    decision.unlink()
    os.mkfifo(decision)
    proc = cli(session.root.parent.parent, "verify", "s")  # a read would block: a timeout
    assert proc.returncode == 1
    assert "sessions/s/cycles/002/decision.json: is not a regular file" in proc.stdout


def test_a_last_cycle_removed_whole_is_found_by_the_logs_it_left(session):
    first = json.loads((session.root / "cycles/001/decision.json").read_text())
    shutil.rmtree(session.root / "cycles/002")
    (session.root / "cycles/decisions.jsonl").unlink()
    rows = (session.root / "results.tsv").read_text().splitlines(keepends=True)
    (session.root / "results.tsv").write_text("".join(r for r in rows if not r.startswith("002")))
    session.move_branch(first["end_commit"])
    record = load_record(session.layout)
    (session.root / "done").write_text(
        cycles_done("sweep", Ended(session.layout, record, None, [first]))
    )
    assert session.lines() == [
        "sessions/s/cycles/002/decision.json: missing with its folder, though "
        "sessions/s/logs/red/002.log ran"
    ]


@pytest.mark.parametrize(
    ("said", "lie", "line"),
    [("cycles: 2", "cycles: 3", 4), ("final commit: ", "final commit: 0", 8)],
)
def test_done_counting_other_cycles_or_another_final_commit_is_reported(session, said, lie, line):
    done = session.root / "done"
    done.write_text(done.read_text().replace(said, lie))
    (found,) = session.lines()
    assert found.startswith(f"sessions/s/done: is not what its records render: line {line} reads ")
    assert lie in found.split(", they render")[0]


def test_done_whose_records_cannot_render_it_is_reported_not_a_crash(session):
    # The last decision's test run is no record: done's tests line cannot be made from it.
    session.edit("cycles/002/decision.json", lambda d: d.update(tests_pass=False, tests="x"))
    lines = session.lines()
    assert any(ln.startswith("sessions/s/done: its records cannot render it (") for ln in lines)


def test_a_loop_folder_the_session_does_not_have_is_reported(session):
    # A sweep has one loop; a folder beside its cycles is no track of it.
    (session.root / "cycles/h9/001").mkdir(parents=True)
    assert session.lines() == [
        "sessions/s/cycles/h9: a loop the session does not have (its tracks: none)"
    ]


def test_a_cycle_page_that_says_pass_for_a_failed_cycle_is_reported(session):
    session.edit("cycles/002/decision.json", lambda d: d.update(tests_pass=False))
    lines = session.lines()
    assert (
        "sessions/s/cycles/002/eval-results.md: is not what its records render: line 3 reads "
        "'- Test status: pass (2 passed)', they render '- Test status: FAIL (2 passed)'"
    ) in lines
    # `done` renders the same decision: it is held to the failed run too.
    assert "line 7 reads 'tests: pass', they render 'tests: FAIL'" in lines[-1]


def test_a_cycle_page_naming_another_ending_commit_is_reported(session):
    page = session.root / "cycles/001/eval-results.md"
    page.write_text(page.read_text().replace("- Ending commit: ", "- Ending commit: 0"))
    (line,) = session.lines()
    assert line.startswith(
        "sessions/s/cycles/001/eval-results.md: is not what its records render: line 5 reads "
        "'- Ending commit: 0"
    )


def test_a_cycle_page_whose_test_counts_were_raised_is_reported(session):
    # The status word still matches the decision: only the counts after it were made better.
    page = session.root / "cycles/002/eval-results.md"
    page.write_text(page.read_text().replace("pass (2 passed)", "pass (12 passed)"))
    (line,) = session.lines()
    assert line == (
        "sessions/s/cycles/002/eval-results.md: is not what its records render: line 3 "
        "reads '- Test status: pass (12 passed)', they render '- Test status: pass (2 passed)'"
    )


def test_a_cycle_page_listing_a_fix_its_decision_never_kept_is_reported(session):
    page = session.root / "cycles/002/eval-results.md"
    page.write_text(page.read_text().replace("## Fixed\n", "## Fixed\n- [F-009] fix the cache\n"))
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/002/eval-results.md: is not what its records")
    assert "reads '- [F-009] fix the cache'" in line


def test_a_cycle_page_cut_short_is_reported(session):
    page = session.root / "cycles/001/eval-results.md"
    page.write_text(page.read_text().split("## Remaining")[0])
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/001/eval-results.md: is not what its records")
    assert "ends at line" in line


def test_done_claiming_more_fixes_than_the_decisions_keep_is_reported(session):
    done = session.root / "done"
    done.write_text(done.read_text().replace("fixes kept: 3", "fixes kept: 9"))
    (line,) = session.lines()
    assert line == (
        "sessions/s/done: is not what its records render: line 5 reads 'fixes kept: 9', "
        "they render 'fixes kept: 3'"
    )


def test_a_session_md_that_lists_a_cycle_otherwise_than_its_decision_is_reported(session):
    summary = session.root / "session.md"
    summary.write_text(summary.read_text().replace("- Cycle 2: 1 fixed", "- Cycle 2: 3 fixed"))
    (line,) = session.lines()
    assert line.startswith("sessions/s/session.md: does not list cycle 2 as its decision says")


# --- commits --------------------------------------------------------------------------------


def test_a_decision_whose_end_commit_is_not_on_the_branch_is_reported(session):
    elsewhere = git(session.target, "commit-tree", session.tree(session.base), "-m", "x")
    session.edit("cycles/002/decision.json", lambda d: d.update(end_commit=elsewhere))
    lines = session.lines()
    assert (
        f"sessions/s/cycles/002/decision.json: end commit {elsewhere[:12]} is not on {BRANCH}"
        in (lines)
    )


def test_a_commit_id_that_is_a_git_option_is_reported_and_never_given_to_git(session, tmp_path):
    written = tmp_path / "written-by-git"
    option = f"--output={written}"
    session.edit("cycles/002/decision.json", lambda d: d.update(end_commit=option))
    session.edit("cycles/001/decision.json", lambda d: d["fixed"][0].update(commit=option))
    lines = session.lines()
    assert "sessions/s/cycles/002/decision.json: its start and end commits are not commit ids" in (
        lines
    )
    assert any("kept commit --output=" in line and "not a commit id" in line for line in lines)
    assert not written.exists()


def test_a_commit_amended_after_the_fact_is_reported_as_amended(session):
    last = json.loads((session.root / "cycles/002/decision.json").read_text())["end_commit"]
    (session.worktree / "calc.py").write_text(CALC + "# something else\n")
    git(session.worktree, "commit", "-q", "-a", "--amend", "--no-edit")  # same message
    amended = git(session.worktree, "rev-parse", "HEAD")
    lines = session.lines()
    assert any(
        line.startswith("sessions/s/cycles/002/decision.json: end commit " + last[:12])
        and f"the branch has {amended[:12]} with its message: amended after the fact?" in line
        for line in lines
    )
    assert any(line.startswith("sessions/s/done: the session is done, but") for line in lines)


def test_an_amended_commit_whose_records_were_rewritten_too_fails_on_its_untested_tree(session):
    old = json.loads((session.root / "cycles/002/decision.json").read_text())["end_commit"]
    (session.worktree / "calc.py").write_text(CALC + "# something else\n")
    git(session.worktree, "commit", "-q", "-a", "--amend", "--no-edit")
    new = git(session.worktree, "rev-parse", "HEAD")
    for path in session.root.rglob("*"):  # every record, page and count, consistently
        if path.is_file() and "worktree" not in path.relative_to(session.root).parts:
            path.write_text(path.read_text().replace(old, new).replace(old[:12], new[:12]))
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/002/decision.json: its test run (2 passed) is no run")
    assert session.tree(new)[:12] in line


def test_a_branch_forced_back_is_reported(session):
    first = json.loads((session.root / "cycles/001/decision.json").read_text())["end_commit"]
    session.move_branch(first)
    lines = session.lines()
    assert any(
        line.startswith("sessions/s/cycles/002/decision.json: end commit")
        and "was moved back behind it" in line
        for line in lines
    )
    assert any(line.startswith("sessions/s/done:") for line in lines)


def test_a_commit_added_to_the_branch_after_the_session_is_reported(session):
    extra = session.commit(CALC + "# later\n", "fix: [F-009] never decided")
    (line,) = session.lines()
    assert line.startswith("sessions/s/done: the session is done, but")
    assert extra[:12] in line


def test_a_decision_that_does_not_start_where_the_last_one_ended_is_reported(session):
    session.edit("cycles/002/decision.json", lambda d: d.update(start_commit=session.base))
    assert any(
        line.startswith("sessions/s/cycles/002/decision.json: starts at " + session.base[:12])
        for line in session.lines()
    )


def test_a_kept_commit_recorded_with_another_message_is_reported(session):
    def better(d):
        d["fixed"][0]["message"] = "fix: [F-003] a far bigger fix"

    session.edit("cycles/002/decision.json", better)
    (line,) = session.lines()
    assert "recorded as 'fix: [F-003] a far bigger fix', git says" in line


def test_a_commit_slipped_into_a_cycle_that_no_record_names_is_reported(session):
    slipped = session.commit(CALC + "# unreviewed\n", "refactor: nobody asked")
    session.edit("cycles/002/decision.json", lambda d: d.update(end_commit=slipped))
    assert (
        f"sessions/s/cycles/002/decision.json: commit {slipped[:12]} 'refactor: nobody asked' "
        "is named by no record"
    ) in session.lines()


# --- test runs ------------------------------------------------------------------------------


def test_a_decision_claiming_a_pass_its_tree_never_had_is_reported(session):
    path = session.layout.test_runs
    lines = path.read_text().splitlines()
    entry = json.loads(lines[-1])
    entry["run"] = run("FAILED: 1 failed, 1 ok", failing=(IDS[0],))
    path.write_text("\n".join([*lines[:-1], json.dumps(entry)]) + "\n")
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/002/decision.json: its test run says '2 passed'")
    assert "say 'FAILED: 1 failed, 1 ok'" in line


def test_a_run_of_some_tests_never_stands_for_a_decisions_run_of_its_tree(session):
    # The run recorded for cycle 2's tree ran a selection of the suite (the batch gate's
    # early run, a bisection step): the decision's run, however alike, is no run of it.
    path = session.layout.test_runs
    lines = path.read_text().splitlines()
    entry = json.loads(lines[-1]) | {"selection": "0123456789abcdef"}
    path.write_text("\n".join([*lines[:-1], json.dumps(entry)]) + "\n")
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/002/decision.json: its test run (2 passed) is no")
    assert "test-runs.jsonl records none of that tree" in line


def test_a_graded_run_never_stands_for_a_decisions_run_of_its_tree(session):
    # The run recorded for cycle 2's tree had the start's tests laid over it (the gate's
    # graded run): the decision's run is the tree's as the change left it, recorded apart.
    path = session.layout.test_runs
    lines = path.read_text().splitlines()
    entry = json.loads(lines[-1]) | {"overlay": "0123456789abcdef"}
    path.write_text("\n".join([*lines[:-1], json.dumps(entry)]) + "\n")
    (line,) = session.lines()
    assert line.startswith("sessions/s/cycles/002/decision.json: its test run (2 passed) is no")


def test_a_session_that_records_no_run_by_tree_says_so_instead_of_claiming_it(session):
    session.layout.test_runs.unlink()
    for n in (1, 2):
        session.edit(f"cycles/00{n}/decision.json", lambda d: d.pop("tests"))
    found = session.verify()
    assert found.ok
    assert "test runs matched" not in found.summary()
    assert "not checked: the test runs of 2 cycles" in found.summary()


def test_a_decision_that_says_pass_of_a_run_the_gate_refuses_is_reported(session):
    # The cycle's run failed, and is recorded for its tree as it was; only tests_pass lies.
    failing = run("FAILED: 1 failed, 1 ok", failing=(IDS[0],))
    session.edit("cycles/002/decision.json", lambda d: d.update(tests=failing))
    path = session.layout.test_runs
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:-1], json.dumps({**json.loads(lines[-1]), "run": failing})]))
    (line,) = session.lines()
    assert line.startswith(
        "sessions/s/cycles/002/decision.json: says its tests pass, but the gate, asked again, "
        "says: tests fail"
    )


def test_a_deleted_frozen_spec_is_a_difference_not_a_skipped_check(session):
    # Without session.yaml the gate's allow_* keys are unknown: the verdicts cannot be re-asked.
    (session.root / "session.yaml").unlink()
    assert session.lines() == [
        "sessions/s/session.yaml: missing: the frozen spec, which the test gate's verdicts "
        "are checked with"
    ]


def test_a_decision_whose_commits_are_not_ids_is_reported(session):
    session.edit("cycles/002/decision.json", lambda d: d.update(end_commit=["HEAD"]))
    assert "sessions/s/cycles/002/decision.json: its start and end commits are not commit ids" in (
        session.lines()
    )


# --- results.tsv ----------------------------------------------------------------------------


def rewrite_rows(session: Session, change) -> None:
    rows = journal.read_results(session.layout)
    for row in rows:
        change(row)
    (session.root / "results.tsv").write_text("\t".join(journal.RESULTS_COLUMNS) + "\n")
    for cycle in sorted({r["cycle"] for r in rows}):
        journal.upsert_results(session.layout, "", cycle, [r for r in rows if r["cycle"] == cycle])


def test_a_rewritten_results_row_is_reported(session):
    def boast(row):
        if row["cycle"] == "002" and row["team"] == "green":
            row["description"] = "4 fixed, 0 skipped"

    rewrite_rows(session, boast)
    assert session.lines() == ["results.tsv: cycle 2, green row: 4 fixed, the decision keeps 1"]


def test_a_results_row_that_says_pass_for_a_cycle_that_failed_is_reported(session):
    # The cycle's tests failed; its rows, left as they were, say they passed.
    session.edit("cycles/002/decision.json", lambda d: d.update(tests_pass=False))
    assert "results.tsv: cycle 2, red row: tests_pass True, the decision says False" in (
        session.lines()
    )


def test_a_results_row_that_lowers_its_cost_is_reported(session):
    def cheaper(row):
        if row["cycle"] == "001" and row["team"] == "green":
            row["cost_usd"] = "0.01"

    rewrite_rows(session, cheaper)
    assert session.lines() == [
        "results.tsv: cycle 1, green row: cost_usd 0.01, its stage recorded 0.25"
    ]


def test_a_kept_commit_without_its_row_is_reported(session):
    rewrite_rows(session, lambda row: None)
    text = (session.root / "results.tsv").read_text()
    kept = [line for line in text.splitlines() if not line.startswith("002\t")]
    (session.root / "results.tsv").write_text("\n".join(kept) + "\n")
    assert session.lines() == ["results.tsv: no row for cycle 2"]


def test_a_results_row_of_a_cycle_that_never_ran_is_reported(session):
    journal.upsert_results(
        session.layout, "", "007", [{"team": "green", "status": "ok", "description": "9 fixed"}]
    )
    assert "results.tsv: a row of cycle 007, which has no folder" in session.lines()


# --- reads only ------------------------------------------------------------------------------


def snapshot(*folders: Path) -> dict[str, str]:
    """Every file under `folders` (git's own included) with its content digest and mtime."""
    seen = {}
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                seen[str(path)] = f"{digest} {path.stat().st_mtime_ns}"
    return seen


def test_verify_writes_nothing_even_where_readers_would_rebuild_an_index(session):
    (session.root / "cycles/decisions.jsonl").write_text("")  # load_decisions would rebuild it
    (session.root / "cycles/001/eval-results.md").unlink()
    before = snapshot(session.root.parent.parent, session.target)
    assert not session.verify().ok
    assert snapshot(session.root.parent.parent, session.target) == before


# --- the command and status ---------------------------------------------------------------


def cli(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_verify_exits_0_with_one_line_1_with_differences_2_without_a_session(session):
    work = session.root.parent.parent
    ok = cli(work, "verify", "s")
    assert (ok.returncode, ok.stdout) == (
        0,
        "verified: 2 cycles, 3 commits, 2 test runs matched to their trees\n",
    )
    for name in ("red-findings.md", "sanitized.md", "green-patch.md", "eval-results.md"):
        for n in (1, 2):
            (session.root / f"cycles/00{n}" / name).unlink()
    bad = cli(work, "verify", "s")
    lines = bad.stdout.splitlines()
    assert bad.returncode == 1
    assert len(lines) == 6
    assert all(line.startswith("sessions/s/cycles/001/") for line in lines[:4])
    assert lines[4].startswith("sessions/s/cycles/002/red-findings.md: missing")
    assert lines[5] == "... and 3 more"
    (work / "sessions" / "half").mkdir()
    for name in ("nope", "half"):
        missing = cli(work, "verify", name)
        assert missing.returncode == 2
        assert missing.stderr.startswith(f"autoresearch: no set-up session '{name}'")
        assert len(missing.stderr.splitlines()) == 1


def test_status_says_in_one_line_when_verify_would_fail(session):
    assert not any(
        line.startswith("Verify:") for line in status.render_one(session.root).split("\n")
    )
    (session.root / "cycles/001/eval-results.md").unlink()
    lines = [line for line in status.render_one(session.root).split("\n") if "verify" in line]
    assert lines == [
        "Verify: would fail: sessions/s/cycles/001/eval-results.md: missing, though cycle 1 is "
        "decided; rerun it whole, as the resume rule does a cycle without its eval-results.md: "
        "`autoresearch redo s --cycle 1 --stage red` (later ones are set aside too); "
        "run `autoresearch verify s`"
    ]


@pytest.mark.parametrize(
    "decision",
    ["{not json", '{"cycle": 2}', '{"cycle": 2, "end_commit": "--output=written-by-git"}'],
)
def test_status_of_a_session_with_a_broken_last_decision_says_so_and_writes_nothing(
    session, decision
):
    # The branch check reads the last decision's end commit: a broken file or a commit id
    # that is a git option is a status line, never a traceback or an argument to git.
    (session.root / "cycles/002/decision.json").write_text(decision)
    text = status.render_one(session.root)
    assert "cycles/002/decision.json" in text
    assert not list(session.root.parents[2].rglob("written-by-git"))

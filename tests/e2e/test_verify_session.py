"""`autoresearch verify` on sessions the workflow really ran: what they claim verifies, and
each way of making one look better afterwards (its files or its branch) is caught."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import CALC, CALC_TESTS, Workflow, git, make_repo, script_spec
from test_broad import FILES as BROAD_FILES
from test_broad import broad_spec
from test_experiment import MAIN_SCRIPT, make_target, spec_for
from test_sweep import SCRIPT

BRANCH = "autoresearch/improve"
VERIFIED = "verified: 2 cycles, 2 commits, 2 test runs matched to their trees\n"


def cli(workflow: Workflow, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        cwd=workflow.workdir,
        env=workflow.env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def sweep_session(base: Path) -> SimpleNamespace:
    """Two scripted sweep cycles: the first keeps a fix and a refactor, the second nothing."""
    target = make_repo(
        base / "target",
        {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "README.md": "# calc\n"},
    )
    wf = Workflow(base / "work")
    wf.run("s", script_spec(target, wf.script(SCRIPT), wf.workdir / "t.jsonl", max_cycles=2))
    session = wf.session("s")
    return SimpleNamespace(wf=wf, target=target, session=session, worktree=session / "worktree")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> SimpleNamespace:
    return sweep_session(tmp_path_factory.mktemp("verify"))


def session_files(session: Path) -> dict[Path, bytes]:
    return {
        p: p.read_bytes()
        for p in session.rglob("*")
        if p.is_file() and "worktree" not in p.relative_to(session).parts
    }


@contextmanager
def restored(run: SimpleNamespace) -> Iterator[None]:
    """Whatever the test does to the session's files and branch is undone after it."""
    files = session_files(run.session)
    tip = git(run.target, "rev-parse", BRANCH)
    try:
        yield
    finally:
        for path in session_files(run.session).keys() - files.keys():
            path.unlink()
        for path, data in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        git(run.worktree, "reset", "-q", "--hard", tip)


def decision(run: SimpleNamespace, n: int) -> dict:
    return json.loads((run.session / f"cycles/{n:03d}/decision.json").read_text())


def test_a_scripted_session_verifies_and_status_says_nothing_of_verify(sweep):
    proc = cli(sweep.wf, "verify", "s")
    assert (proc.returncode, proc.stdout) == (0, VERIFIED)
    assert "Verify:" not in cli(sweep.wf, "status", "s").stdout


# --- each way to look better, caught ----------------------------------------------------------


def rewrite_row(run):
    """Cycle 1's green row claims a second fix."""
    results = run.session / "results.tsv"
    text = results.read_text()
    assert "\t1 fixed, 2 skipped\t" in text
    results.write_text(text.replace("\t1 fixed, 2 skipped\t", "\t2 fixed, 1 skipped\t", 1))
    return "results.tsv: cycle 1, green row: 2 fixed, the decision keeps 1"


def better_page(run):
    """Cycle 2's page claims more passing tests than its run had; its status word is true."""
    page = run.session / "cycles/002/eval-results.md"
    text = page.read_text()
    counted = text.split("- Test status: ", 1)[1].split("\n", 1)[0]
    page.write_text(text.replace(counted, counted.replace(" passed", "0 passed", 1), 1))
    return "sessions/s/cycles/002/eval-results.md: is not what its records render: line 3"


def better_done(run):
    """`done` claims a fix more than the decisions keep."""
    done = run.session / "done"
    done.write_text(done.read_text().replace("fixes kept: 1", "fixes kept: 2"))
    return "sessions/s/done: is not what its records render: line 5 reads 'fixes kept: 2'"


def drop_rows(run):
    """Cycle 1's rows, the ones of its kept commits, are gone."""
    results = run.session / "results.tsv"
    kept = [ln for ln in results.read_text().splitlines() if not ln.startswith("001\t")]
    results.write_text("\n".join(kept) + "\n")
    return "results.tsv: no row for cycle 1"


def end_off_the_branch(run):
    """Cycle 2's decision ends at a commit that is not on the session branch."""
    tree = git(run.target, "rev-parse", f"{BRANCH}^{{tree}}")
    elsewhere = git(run.target, "commit-tree", tree, "-p", BRANCH, "-m", "better, honestly")
    path = run.session / "cycles/002/decision.json"
    path.write_text(json.dumps({**decision(run, 2), "end_commit": elsewhere}))
    return f"sessions/s/cycles/002/decision.json: end commit {elsewhere[:12]} is not on {BRANCH}"


def amend(run):
    """The refactor commit amended after the session: same message, another tree."""
    (run.worktree / "calc.py").write_text(CALC + "# tidied later\n")
    git(run.worktree, "commit", "-q", "-a", "--amend", "--no-edit")
    amended = git(run.worktree, "rev-parse", "HEAD")
    return f"the branch has {amended[:12]} with its message: amended after the fact?"


def force_back(run):
    """The branch moved back to before the refactor."""
    git(run.worktree, "reset", "-q", "--hard", decision(run, 1)["fixed"][0]["commit"])
    return "was moved back behind it"


@pytest.mark.parametrize(
    "tamper",
    [rewrite_row, better_page, better_done, drop_rows, end_off_the_branch, amend, force_back],
    ids=lambda f: f.__name__,
)
def test_a_session_made_to_look_better_afterwards_fails_verify_naming_the_file(sweep, tamper):
    with restored(sweep):
        expected = tamper(sweep)
        proc = cli(sweep.wf, "verify", "s")
        lines = proc.stdout.splitlines()
        assert proc.returncode == 1
        assert any(expected in line for line in lines), lines
        assert all(
            line.split(": ", 1)[0].startswith(("sessions/s/", "results.tsv")) for line in lines
        )
        assert [ln for ln in cli(sweep.wf, "status", "s").stdout.splitlines() if "verify" in ln]
    assert cli(sweep.wf, "verify", "s").stdout == VERIFIED  # restored: the next test's session


def snapshot(*folders: Path) -> dict[str, str]:
    return {
        str(p): f"{hashlib.sha256(p.read_bytes()).hexdigest()} {p.stat().st_mtime_ns}"
        for folder in folders
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_verify_writes_nothing_in_the_session_the_target_or_its_worktree(sweep):
    with restored(sweep):
        (sweep.session / "cycles/decisions.jsonl").write_text("")  # a reader would rebuild it
        rewrite_row(sweep)
        folders = (sweep.wf.workdir, sweep.target, sweep.worktree.resolve())
        before = snapshot(*folders)
        assert cli(sweep.wf, "verify", "s").returncode == 1
        assert snapshot(*folders) == before


# --- the resume rule -------------------------------------------------------------------------


def test_a_deleted_eval_results_is_reported_and_the_redo_it_names_makes_the_session_whole(
    tmp_path,
):
    run = sweep_session(tmp_path)
    (run.session / "cycles/001/eval-results.md").unlink()
    proc = cli(run.wf, "verify", "s")
    assert proc.returncode == 1
    first = proc.stdout.splitlines()[0]
    assert first.startswith("sessions/s/cycles/001/eval-results.md: missing, though cycle 1")
    command = first.split("`")[1]
    assert command == "autoresearch redo s --cycle 1 --stage red"
    (status_line,) = [ln for ln in cli(run.wf, "status", "s").stdout.splitlines() if "Verify" in ln]
    assert "cycles/001/eval-results.md: missing" in status_line
    assert cli(run.wf, *command.split()[1:]).returncode == 0
    assert cli(run.wf, "verify", "s").stdout == VERIFIED


# --- the spec's teams ----------------------------------------------------------------------------


def test_a_session_whose_teams_leave_out_refactor_verifies(tmp_path):
    target = make_repo(tmp_path / "target", {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS})
    wf = Workflow(tmp_path / "work")
    spec = script_spec(target, wf.script(SCRIPT), wf.workdir / "t.jsonl", max_cycles=1)
    wf.run("s", spec | {"teams": ["red", "green"]})
    assert not (wf.session("s") / "cycles/001/refactor.json").exists()
    proc = cli(wf, "verify", "s")
    assert (proc.returncode, proc.stdout) == (
        0,
        "verified: 1 cycle, 1 commit, 1 test runs matched to their trees\n",
    )


# --- another mode's stage files ----------------------------------------------------------------


def test_an_experiment_iteration_without_its_patch_is_reported_with_its_own_redo(tmp_path):
    target = make_target(tmp_path / "target")
    wf = Workflow(tmp_path / "work")
    # Two of test_experiment's iterations: one kept, one discarded (its patch kept too).
    script = {"experiment": {n: MAIN_SCRIPT["experiment"][n] for n in (1, 2)}}
    wf.run("e", spec_for(target, wf, script, program="program.md", max_iterations=2))
    ok = cli(wf, "verify", "e")
    assert ok.returncode == 0, ok.stdout
    assert ok.stdout.startswith("verified: 2 iterations, 1 commit"), ok.stdout
    assert "not checked: the test runs of 2 iterations" in ok.stdout  # it records guard runs only
    (wf.session("e") / "iterations/001/proposal.patch").unlink()
    proc = cli(wf, "verify", "e")
    (line,) = proc.stdout.splitlines()
    assert proc.returncode == 1
    assert line.startswith("sessions/e/iterations/001/proposal.patch: missing, though iteration 1")
    assert "`autoresearch redo e --iteration 1 --stage propose`" in line


def test_each_broad_track_is_held_to_its_own_branch_and_named_in_the_redo(tmp_path):
    target = make_repo(tmp_path / "target", BROAD_FILES)
    wf = Workflow(tmp_path / "work")
    (tmp_path / "breaks").mkdir()
    wf.extra_env["BREAK_DIR"] = str(tmp_path / "breaks")
    commands = {"sandbox": "none", "pass_env": ["BREAK_DIR"]}
    wf.run("b", broad_spec(target, wf.workdir, commands=commands), cores=2)
    ok = cli(wf, "verify", "b")
    assert ok.returncode == 0 and ok.stdout.startswith("verified: 5 cycles, 3 commits"), ok.stdout
    session = wf.session("b")
    h1 = session / "tracks/h1/worktree"
    first = json.loads((session / "cycles/h1/001/decision.json").read_text())
    git(h1, "reset", "-q", "--hard", first["end_commit"])  # h1's second cycle, gone
    (session / "cycles/h2/001/eval-results.md").unlink()
    lines = cli(wf, "verify", "b").stdout.splitlines()
    assert any(
        ln.startswith("sessions/b/cycles/h1/002/decision.json: end commit")
        and "autoresearch/broad/b/h1" in ln
        for ln in lines
    ), lines
    assert any(
        ln.startswith("sessions/b/cycles/h2/001/eval-results.md: missing")
        and "`autoresearch redo b --cycle 1 --track h2 --stage red`" in ln
        for ln in lines
    ), lines
    assert not any("/h3/" in ln for ln in lines)  # the other tracks are as they were

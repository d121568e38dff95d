"""Git calls touch only the repository they name: worktree helpers, locks, branches, stash."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import git, make_repo, wait_for

from autoresearch.safety import git as ar_git

USER_EDIT = "the user's uncommitted edit\n"


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "target", {"calc.py": "x = 1\n", "README.md": "hi\n"})


@pytest.fixture
def enclosing(tmp_path: Path) -> Path:
    """A checkout with an uncommitted edit that holds the session directory (as the
    autoresearch checkout holds sessions/<name>/worktree)."""
    outer = make_repo(tmp_path / "outer", {"tool.py": "original\n"})
    (outer / "tool.py").write_text(USER_EDIT)
    (outer / "notes.txt").write_text("untracked notes\n")
    return outer


def session_worktree(target: Path, enclosing: Path, name: str = "s") -> Path:
    worktree = enclosing / "sessions" / name / "worktree"
    ar_git.open_worktree(target, worktree, f"autoresearch/narrow/{name}", ar_git.head(target))
    return worktree


def user_state(repo: Path) -> tuple[str, str, str, str]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        git(repo, "ls-files", "--stage"),
        (repo / "tool.py").read_text() if (repo / "tool.py").exists() else "",
    )


# -- bound to the worktree -----------------------------------------------------------------

HELPERS = {
    "reset_to": lambda wt: ar_git.reset_to(wt, "HEAD"),
    "restore": ar_git.restore,
    "commit_all": lambda wt: ar_git.commit_all(wt, "sneaky"),
    "revert": lambda wt: ar_git.revert(wt, "HEAD"),
}


@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_a_worktree_without_its_git_file_is_refused_and_the_enclosing_repo_survives(
    target, enclosing, helper
):
    worktree = session_worktree(target, enclosing)
    (worktree / "calc.py").write_text("changed by an agent\n")
    (worktree / ".git").unlink()
    before = user_state(enclosing)
    with pytest.raises(ar_git.GitError, match="not a live git worktree"):
        HELPERS[helper](worktree)
    assert user_state(enclosing) == before
    assert (enclosing / "tool.py").read_text() == USER_EDIT
    assert (enclosing / "notes.txt").exists()


def test_plain_git_calls_never_look_above_the_named_directory(enclosing):
    inner = enclosing / "not_a_repo"
    inner.mkdir()
    with pytest.raises(ar_git.GitError, match="not a git repository"):
        ar_git.git(inner, "add", "-A")
    assert git(enclosing, "ls-files", "--stage") == user_state(enclosing)[2]


def test_an_inherited_git_dir_does_not_redirect_the_worktree_helpers(
    target, enclosing, monkeypatch
):
    worktree = session_worktree(target, enclosing)
    # As inside a git hook of the enclosing checkout.
    monkeypatch.setenv("GIT_DIR", str(enclosing / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(enclosing))
    before = user_state(enclosing)
    (worktree / "new.py").write_text("y = 2\n")
    sha = ar_git.commit_all(worktree, "add new.py")
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert git(worktree, "log", "-1", "--format=%H") == sha
    assert user_state(enclosing) == before


def test_a_worktree_autoresearch_did_not_make_is_refused(target, tmp_path):
    theirs = tmp_path / "theirs"
    git(target, "worktree", "add", "-q", "-b", "mine", str(theirs))
    (theirs / "calc.py").write_text("their work\n")
    with pytest.raises(ar_git.GitError, match="did not create"):
        ar_git.restore(theirs)
    assert (theirs / "calc.py").read_text() == "their work\n"
    with pytest.raises(ar_git.GitError, match="did not create"):
        ar_git.remove_worktree(target, theirs)
    assert theirs.is_dir()


def test_reads_in_the_users_checkout_do_not_rewrite_its_index(target):
    # A tracked file whose timestamp changed makes `git status` refresh and rewrite the
    # index under index.lock, unless optional locks are off.
    os.utime(target / "calc.py", (1_600_000_000, 1_600_000_000))
    index = target / ".git" / "index"
    before = (os.stat(index).st_ino, index.read_bytes())
    ar_git.is_dirty(target)
    ar_git.snapshot(target)
    assert (os.stat(index).st_ino, index.read_bytes()) == before


# -- worktrees and branches ------------------------------------------------------------------


def test_creating_a_worktree_leaves_the_users_missing_worktree_registered(target, tmp_path):
    drive = tmp_path / "usb" / "feature"
    git(target, "worktree", "add", "-q", "-b", "feature", str(drive))
    (drive / "calc.py").write_text("staged work\n")
    git(drive, "add", "calc.py")
    unplugged = tmp_path / "unplugged"
    (tmp_path / "usb").rename(unplugged)
    ar_git.open_worktree(target, tmp_path / "s" / "worktree", "autoresearch/s", "HEAD")
    (unplugged).rename(tmp_path / "usb")
    assert "feature" in git(target, "worktree", "list")
    assert git(drive, "diff", "--cached", "--name-only") == "calc.py"


def test_a_rerun_gets_the_same_worktree_and_branch_back(target, tmp_path):
    worktree = tmp_path / "s" / "worktree"
    first = ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD")
    (worktree / "calc.py").write_text("work in progress\n")
    again = ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD")
    assert first == again == "autoresearch/s"
    assert (worktree / "calc.py").read_text() == "work in progress\n"


def test_a_second_session_with_the_same_name_gets_a_numbered_branch(target, tmp_path):
    one = ar_git.open_worktree(target, tmp_path / "a" / "wt", "autoresearch/s", "HEAD")
    two = ar_git.open_worktree(target, tmp_path / "b" / "wt", "autoresearch/s", "HEAD")
    assert (one, two) == ("autoresearch/s", "autoresearch/s-2")


def test_our_worktree_whose_directory_vanished_is_made_again(target, tmp_path):
    worktree = tmp_path / "s" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD")
    subprocess.run(["rm", "-rf", str(worktree)], check=True)
    assert ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD") == "autoresearch/s"
    assert ar_git.is_our_worktree(worktree)


def test_a_directory_that_lost_its_git_file_is_not_reused(target, tmp_path):
    worktree = tmp_path / "s" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD")
    (worktree / ".git").unlink()
    with pytest.raises(ar_git.GitError, match="missing or no longer points"):
        ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD")


def test_concurrent_sessions_never_share_a_branch(target, tmp_path):
    results: list[str] = []
    errors: list[BaseException] = []

    def open_one(n: int) -> None:
        try:
            wt = tmp_path / f"s{n}" / "worktree"
            results.append(ar_git.open_worktree(target, wt, "autoresearch/s", "HEAD"))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=open_one, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors
    assert sorted(results) == [
        "autoresearch/s",
        "autoresearch/s-2",
        "autoresearch/s-3",
        "autoresearch/s-4",
    ]


def test_the_branch_name_is_chosen_while_holding_the_repo_lock(target, tmp_path):
    done: list[str] = []
    with ar_git.repo_lock(target):
        worker = threading.Thread(
            target=lambda: done.append(
                ar_git.open_worktree(target, tmp_path / "wt", "autoresearch/s", "HEAD")
            )
        )
        worker.start()
        # Another session takes the name while this one waits for the lock.
        git(target, "branch", "autoresearch/s")
    worker.join(timeout=300)
    assert done == ["autoresearch/s-2"]


def test_remove_worktree_removes_ours_only(target, tmp_path):
    ours = tmp_path / "s" / "worktree"
    ar_git.open_worktree(target, ours, "autoresearch/s", "HEAD")
    assert ar_git.remove_worktree(target, ours)
    assert not ours.exists()
    assert str(ours) not in git(target, "worktree", "list")
    assert not ar_git.remove_worktree(target, ours)


# -- stale locks -----------------------------------------------------------------------------


def index_lock(worktree: Path) -> Path:
    return ar_git.worktree_admin(worktree) / "index.lock"


def living_members(group: int) -> list[int]:
    """The processes of process group `group` that have not ended (a zombie has)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def test_a_lock_left_by_a_killed_git_is_cleared_and_the_reset_works(target, tmp_path):
    worktree = tmp_path / "s" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD")
    (worktree / "calc.py").write_text("half a fix\n")
    # `git commit -a` holds index.lock while its editor runs; kill it there with -9.
    proc = subprocess.Popen(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-a"],
        cwd=worktree,
        env={**os.environ, "GIT_EDITOR": "sleep 600;:"},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: index_lock(worktree).exists())
    assert ar_git.clear_stale_lock(worktree) == []  # a live git holds it
    assert index_lock(worktree).exists()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    # The kill reaches the group's other processes in their own time (a child git forked
    # for the editor): until then a live git does hold the lock.
    wait_for(lambda: not living_members(proc.pid))
    assert index_lock(worktree).exists()
    with pytest.raises(subprocess.CalledProcessError):
        git(worktree, "reset", "--hard")  # what every rerun used to hit
    for _ in range(3):
        ar_git.reset_to(worktree, "HEAD")
    assert not index_lock(worktree).exists()
    assert (worktree / "calc.py").read_text() == "x = 1\n"


def test_clear_stale_lock_does_nothing_in_a_worktree_that_is_not_ours(target, tmp_path):
    theirs = tmp_path / "theirs"
    git(target, "worktree", "add", "-q", "-b", "mine", str(theirs))
    lock = ar_git.worktree_admin(theirs) / "index.lock"
    lock.write_text("")
    assert ar_git.clear_stale_lock(theirs) == []
    assert lock.exists()


# -- on_dirty: stash -------------------------------------------------------------------------


@pytest.fixture
def dirty(target: Path) -> Path:
    (target / "calc.py").write_text("x = 2  # staged\n")
    git(target, "add", "calc.py")
    (target / "calc.py").write_text("x = 3  # not staged\n")
    (target / "README.md").unlink()
    (target / "todo.txt").write_text("untracked\n")
    (target / "sub").mkdir()
    (target / "sub" / "deep.txt").write_text("untracked too\n")
    (target / ".gitignore").write_text("*.log\n")
    (target / "run.log").write_text("ignored\n")
    return target


def files_of(repo: Path) -> dict[str, str]:
    return {
        p.relative_to(repo).as_posix(): p.read_text()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def test_recording_dirty_state_changes_nothing_in_the_users_checkout(dirty):
    before = (ar_git.snapshot(dirty), files_of(dirty), (dirty / ".git" / "index").read_bytes())
    assert ar_git.record_dirty_state(dirty, "autoresearch s")
    after = (ar_git.snapshot(dirty), files_of(dirty), (dirty / ".git" / "index").read_bytes())
    assert after == before
    assert not (dirty / ".git" / "index.lock").exists()


def test_the_recorded_entry_gives_back_index_changes_and_untracked_files(dirty):
    before = (ar_git.snapshot(dirty), files_of(dirty))
    ar_git.record_dirty_state(dirty, "autoresearch s")
    # The user loses everything that was not committed...
    git(dirty, "reset", "-q", "--hard")
    git(dirty, "clean", "-qfd")
    assert files_of(dirty) != before[1]
    # ...and git's own stash command brings it back, untracked files included.
    git(dirty, "stash", "apply", "--index")
    assert (ar_git.snapshot(dirty), files_of(dirty)) == before
    assert "run.log" not in git(dirty, "show", "--name-only", "--format=", "stash@{0}^3")


def test_a_rerun_of_setup_stores_no_second_stash_entry(dirty):
    first = ar_git.record_dirty_state(dirty, "autoresearch s")
    second = ar_git.record_dirty_state(dirty, "autoresearch s")
    assert first == second
    assert git(dirty, "stash", "list").count("autoresearch s") == 1


def test_new_changes_under_the_same_name_are_recorded_again(dirty):
    first = ar_git.record_dirty_state(dirty, "autoresearch s")
    (dirty / "todo.txt").write_text("changed since\n")
    assert ar_git.record_dirty_state(dirty, "autoresearch s") != first
    assert len(git(dirty, "stash", "list").splitlines()) == 2


def test_a_clean_checkout_records_nothing(target):
    assert ar_git.record_dirty_state(target, "autoresearch s") is None
    assert git(target, "stash", "list") == ""


# -- resetting a worktree --------------------------------------------------------------------


@pytest.fixture
def worktree(target: Path, tmp_path: Path) -> Path:
    wt = tmp_path / "s" / "worktree"
    ar_git.open_worktree(target, wt, "autoresearch/s", "HEAD")
    (wt / ".gitignore").write_text("build/\n")
    ar_git.commit_all(wt, "ignore build")
    return wt


@pytest.mark.parametrize(
    "leftover",
    [
        lambda wt: (wt / "calc.py").write_text("edited\n"),
        lambda wt: ((wt / "calc.py").write_text("staged\n"), git(wt, "add", "calc.py")),
        lambda wt: (wt / "new.py").write_text("untracked\n"),
        lambda wt: (wt / "calc.py").unlink(),
    ],
    ids=["edited", "staged", "untracked", "deleted"],
)
def test_a_reset_to_the_commit_already_checked_out_still_undoes_every_change(worktree, leftover):
    head = ar_git.head(worktree)
    leftover(worktree)
    ar_git.reset_to(worktree, head)
    assert git(worktree, "status", "--porcelain", "--untracked-files=all") == ""
    assert (worktree / "calc.py").read_text() == "x = 1\n"


@pytest.mark.parametrize("ignored", [True, False])
def test_every_reset_removes_ignored_files_and_nested_repositories(worktree, ignored):
    """Whatever a caller asks: an attempt ends on the commit alone. A nested repository a
    test made would otherwise be committed as a gitlink by a later `add -A`."""
    head = ar_git.head(worktree)
    (worktree / "build").mkdir()
    (worktree / "build" / "out.txt").write_text("cache\n")
    (worktree / "sub").mkdir()
    git(worktree / "sub", "init", "-q")
    ar_git.reset_to(worktree, head, ignored=ignored)
    assert not (worktree / "build").exists() and not (worktree / "sub").exists()


def test_a_reset_moves_head_to_another_commit_of_a_clean_worktree(worktree):
    first = git(worktree, "rev-list", "--max-parents=0", "HEAD")
    ar_git.reset_to(worktree, first)
    assert ar_git.head(worktree) == first
    assert not (worktree / ".gitignore").exists()

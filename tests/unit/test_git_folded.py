"""The harness's git asks each thing once: a few calls in one jail, one status shared by a
reset and the exact-tree check, the staged diff read once per commit, answers about fixed
commits kept. Each fold must answer exactly what the calls it replaced did, and confine
what they confined: these tests hold it to that, attacks first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch.gate import tested
from autoresearch.safety import git as ar_git
from autoresearch.safety import jail
from autoresearch.safety.protect import ProtectedChange, Protection

PROBE = jail.probe()
needs_bwrap = pytest.mark.skipif(not PROBE.works, reason=f"no bwrap jail here: {PROBE.reason}")


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "target", {"calc.py": "X = 1\n", "README.md": "hi\n"})


@pytest.fixture
def worktree(target: Path, tmp_path: Path) -> Path:
    place = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, place, "autoresearch/s", ar_git.head(target))
    return place


def nested_repo(where: Path) -> None:
    """A repository inside the worktree, as a test run could make one."""
    make_repo(where, {"inner.txt": "inner\n"})


# -- several calls in one jail ---------------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("confined", [True, False])
def test_a_batch_of_calls_runs_confined_as_each_call_would(
    tmp_path, worktree, monkeypatch, confined
):
    """A filter in the repository's own config runs when `add` stages a file: inside a batch
    it still runs in the jail and writes nothing outside the worktree (unconfined it does:
    the attack is real)."""
    monkeypatch.setattr(ar_git, "CONFINED", confined)
    outside = tmp_path / "outside"
    outside.mkdir()
    common = ar_git.common_dir(worktree)
    git(common.parent, "config", "filter.x.clean", f"touch '{outside}/ran'; cat")
    (worktree / ".gitattributes").write_text("*.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")

    out = ar_git.worktree_batch_git(
        worktree, ("add", "-A"), ("diff", "--cached", "--name-only", "--", "calc.py")
    )

    assert out == "calc.py\n"  # the last call's output, as git wrote it
    assert (outside / "ran").exists() is not confined


def test_a_batch_stops_at_the_first_call_that_fails(worktree):
    (worktree / "calc.py").write_text("X = 2\n")
    with pytest.raises(ar_git.GitError, match="no-such-branch"):
        ar_git.worktree_batch_git(worktree, ("checkout", "no-such-branch"), ("add", "-A"))
    assert git(worktree, "diff", "--cached", "--name-only") == ""  # `add` never ran


def test_a_call_that_may_fail_does_not_stop_the_batch(worktree):
    (worktree / "calc.py").write_text("X = 2\n")
    ar_git.worktree_batch_git(
        worktree, ("checkout", "no-such-branch"), ("add", "-A"), may_fail=frozenset({0})
    )
    assert git(worktree, "diff", "--cached", "--name-only") == "calc.py"


def test_a_reset_and_its_clean_leave_only_the_commit(worktree):
    """`reset_to` runs `reset --hard` and `clean -ffdx` in one jail: every change, ignored
    file and nested repository goes, and it says it had to reset (no status of an exact
    worktree to hand on)."""
    (worktree / ".gitignore").write_text("*.log\n")
    (worktree / "calc.py").write_text("X = 2\n")
    (worktree / "run.log").write_text("ignored\n")
    nested_repo(worktree / "made_by_a_test")

    assert ar_git.reset_to(worktree, "HEAD") is None

    assert git(worktree, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
    state = ar_git.reset_to(worktree, "HEAD")
    assert state is not None and state.clean and state.head == git(worktree, "rev-parse", "HEAD")


# -- the exact tree ----------------------------------------------------------------------------


def test_a_staged_gitlink_is_part_of_the_exact_tree_though_status_cannot_see_it(worktree):
    """Attack: a nested repository staged as a gitlink is invisible to the harness's status
    (--ignore-submodules=all), so the worktree looks exactly at HEAD. Its tree is not
    HEAD's: a run of it must never be filed as a run of HEAD's tree."""
    head_tree = git(worktree, "rev-parse", "HEAD^{tree}")
    assert tested.exact_tree(worktree, Protection(ar_git.head(worktree))) == head_tree
    nested_repo(worktree / "sub")
    git(worktree, "add", "sub")
    (worktree / "sub" / "inner.txt").unlink()  # status would not look inside anyway
    git(worktree, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub")
    os.rename(worktree / "sub", worktree.parent / "sub-away")  # no untracked folder left

    state = ar_git.tree_state(worktree)
    assert state is not None and state.clean  # what status says

    tree = tested.exact_tree(worktree, Protection(ar_git.head(worktree)), state)
    assert tree == git(worktree, "write-tree") != head_tree


def test_a_file_marked_assume_unchanged_keeps_the_tree_from_being_exact(worktree):
    (worktree / "calc.py").write_text("X = 99\n")
    git(worktree, "update-index", "--assume-unchanged", "calc.py")
    state = ar_git.tree_state(worktree)
    assert state is not None and state.clean  # status does not see the change
    assert tested.exact_tree(worktree, Protection(ar_git.head(worktree)), state) is None


def test_a_staged_change_is_the_exact_tree_of_the_index(worktree):
    (worktree / "calc.py").write_text("X = 2\n")
    git(worktree, "add", "calc.py")
    assert tested.exact_tree(worktree, Protection(ar_git.head(worktree))) == git(
        worktree, "write-tree"
    )
    (worktree / "README.md").write_text("changed, not staged\n")
    assert tested.exact_tree(worktree, Protection(ar_git.head(worktree))) is None


# -- the agent's writes, staged once ----------------------------------------------------------


def test_a_clean_worktree_has_nothing_to_take(worktree):
    assert Protection(ar_git.head(worktree)).take_written(worktree, {}) is None


def test_only_the_agents_writes_are_staged_and_their_diff_is_what_git_says(worktree):
    import hashlib

    (worktree / "calc.py").write_text("X = 2\n")
    (worktree / "left_by_a_test.txt").write_text("stray\n")
    written = {"calc.py": hashlib.sha256(b"X = 2\n").hexdigest()}

    kept = Protection(ar_git.head(worktree)).take_written(worktree, written)

    assert kept is not None and kept.files == ["calc.py"]
    assert not (worktree / "left_by_a_test.txt").exists()
    raw = git(worktree, "diff", "--cached", "--raw", "--abbrev=40", "HEAD")
    old, new = raw.split()[2:4]
    assert kept.changes == (ar_git.Staged("calc.py", old, new),)


def test_a_commit_handed_the_changes_take_written_read_still_refuses_a_protected_change(
    worktree,
):
    """Handing the commit the staged changes spares a read, never the protected-path
    check: a protected file the agent changed is put back and nothing is committed."""
    import hashlib

    base = ar_git.head(worktree)
    (worktree / "README.md").write_text("protected, changed\n")
    (worktree / "calc.py").write_text("X = 2\n")
    written = {
        "calc.py": hashlib.sha256(b"X = 2\n").hexdigest(),
        "README.md": hashlib.sha256(b"protected, changed\n").hexdigest(),
    }
    protection = Protection(base, ("README.md",))
    kept = protection.take_written(worktree, written)
    assert kept is not None and {c.path for c in kept.changes} == {"README.md", "calc.py"}
    with pytest.raises(ProtectedChange, match="README.md"):
        protection.commit(worktree, "m", staged=True, changes=kept.changes)
    assert git(worktree, "show", "HEAD:README.md") == "hi"  # nothing committed


# -- answers the harness knows -----------------------------------------------------------------


def test_files_changed_between_commits_are_what_git_diff_says(worktree):
    """Between two commits the plumbing answers as `git diff --name-only` does: a rename
    by its new name, and no gitlink."""
    start = ar_git.head(worktree)
    git(worktree, "mv", "calc.py", "renamed.py")
    (worktree / "new.txt").write_text("new\n")
    git(worktree, "add", "-A")
    git(worktree, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub")
    git(worktree, "commit", "-q", "-m", "c")
    end = ar_git.head(worktree)
    expected = git(worktree, "diff", "--name-only", "--ignore-submodules=all", start, end)

    assert ar_git.changed_files(worktree, start, end) == sorted(expected.splitlines())
    assert ar_git.changed_files(worktree, start, end) == ["new.txt", "renamed.py"]


class EmptiedOnAsking(dict):
    """A cache another job's thread empties (it kept the 4096th answer) right after this
    one asked whether it holds a key: jobs are threads of one Snakemake process."""

    def __contains__(self, key: object) -> bool:
        held = super().__contains__(key)
        self.clear()
        return held


def test_answers_about_fixed_commits_survive_a_cache_emptied_by_another_thread(
    worktree, monkeypatch
):
    start = ar_git.head(worktree)
    (worktree / "calc.py").write_text("X = 2\n")
    git(worktree, "commit", "-q", "-am", "c")
    end = ar_git.head(worktree)
    tree = git(worktree, "rev-parse", f"{end}^{{tree}}")
    between, trees = EmptiedOnAsking(), EmptiedOnAsking()
    between[("count", start, end)], between[("files", start, end)] = 1, ("calc.py",)
    trees[end] = tree
    monkeypatch.setattr(ar_git, "_BETWEEN", between)
    monkeypatch.setattr(ar_git, "_TREES", trees)
    assert ar_git.count_commits(worktree, start, end) == 1
    assert ar_git.changed_files(worktree, start, end) == ["calc.py"]
    assert ar_git.tree_of(worktree, end) == tree


def test_the_branch_is_read_from_the_worktrees_own_head(worktree, target, tmp_path):
    # (A HEAD moved to another branch than the worktree's own is refused: test_gitbox_refs.)
    assert ar_git.current_branch(worktree) == "autoresearch/s"
    lane = tmp_path / "store" / "lane"
    ar_git.add_detached_worktree(target, lane, ar_git.head(target))
    assert ar_git.current_branch(lane) == "HEAD"


def test_a_worktree_of_a_branch_left_detached_holds_its_branch_again(worktree):
    # As a confined call killed midway leaves it (the box's git runs on a detached HEAD):
    # the next look at the worktree puts its branch back, which only the harness moves.
    tip = ar_git.head(worktree)
    git(worktree, "checkout", "-q", "--detach")
    assert ar_git.current_branch(worktree) == "autoresearch/s"
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None and (admin / "HEAD").read_text() == "ref: refs/heads/autoresearch/s\n"
    assert ar_git.head(worktree) == tip


def test_a_forged_git_file_is_refused_when_the_branch_is_asked(worktree, tmp_path):
    elsewhere = make_repo(tmp_path / "elsewhere", {"x": "1\n"})
    (worktree / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    with pytest.raises(ar_git.ForgedGitLink):
        ar_git.current_branch(worktree)


def test_has_branch_answers_for_a_repository_only(target, tmp_path):
    assert ar_git.has_branch(target, "main") or ar_git.has_branch(target, "master")
    assert not ar_git.has_branch(target, "no-such-branch")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not ar_git.has_branch(plain, "main")
    assert not ar_git.has_branch(tmp_path / "gone", "main")


@needs_bwrap
def test_what_a_confined_git_call_runs_in_its_jail_is_counted_as_jailed_cpu(worktree, monkeypatch):
    """rusage never sees a jail's processes: the jail's shell reports them, and the CPU
    goes to the figure timings.tsv reads (a filter that computes a while stands for it)."""
    from autoresearch.safety import commands

    monkeypatch.setattr(ar_git, "LANDLOCK", False)  # the bwrap jail, the fallback
    common = ar_git.common_dir(worktree)
    burn = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; cat"
    git(common.parent, "config", "filter.x.clean", burn)
    (worktree / ".gitattributes").write_text("*.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")
    before = commands.jailed_cpu.total

    ar_git.worktree_batch_git(worktree, ("add", "-A"), ("status", "--porcelain"))

    assert commands.jailed_cpu.total - before > 0.05


def test_what_git_runs_in_the_landlock_box_is_counted_by_rusage_and_only_there(worktree):
    """The box's git is a child of ours, as an unconfined one: rusage sees its CPU, and it
    is not counted again as jailed CPU."""
    import resource

    from autoresearch.safety import commands, gitbox

    if gitbox.usable() is None:
        pytest.skip("no Landlock ABI 6, or no C compiler to build gitbox")
    common = ar_git.common_dir(worktree)
    burn = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; cat"
    git(common.parent, "config", "filter.x.clean", burn)
    (worktree / ".gitattributes").write_text("*.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")
    before, jailed = resource.getrusage(resource.RUSAGE_CHILDREN), commands.jailed_cpu.total

    ar_git.worktree_batch_git(worktree, ("add", "-A"), ("status", "--porcelain"))

    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime > 0.05
    assert commands.jailed_cpu.total == jailed

"""A nested repository or a submodule a test run made never makes the harness's git run
anything, and never reaches a commit.

A test run (even the target's own tests at setup) can turn a folder of the worktree into a
git repository, or populate a submodule the worktree left empty, with a `filter.x.clean`
in that repository's config and a `.gitattributes` selecting it. Git looking inside it
(`status`, `diff` of the superproject) would run the filter on the host, outside the jail.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import git, make_repo
from test_batch_gate import Env, run_of, stage  # the gate's fake stage

from autoresearch.gate.keep import BatchGate
from autoresearch.safety import git as ar_git
from autoresearch.safety.protect import NestedRepository, Protection


def with_submodule(tmp_path: Path) -> tuple[Path, Path]:
    """A target whose base has a submodule `vendor/lib` (a gitlink and .gitmodules), and
    our worktree of it, where the submodule is an empty folder as git leaves it."""
    target = make_repo(tmp_path / "target", {"calc.py": "X = 1\n"})
    sha = ar_git.head(target)
    git(target, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    (target / ".gitmodules").write_text(
        '[submodule "vendor/lib"]\n\tpath = vendor/lib\n\turl = ./nowhere\n'
    )
    git(target, "add", ".gitmodules")
    git(target, "commit", "-q", "-m", "a submodule")
    worktree = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", ar_git.head(target))
    return target, worktree


SAFE = ("-c", "safe.directory=*")


def plant_filter(repo: Path, marker: Path) -> None:
    """What the attacking test run does: a repository at `repo` whose config names a clean
    filter that leaves `marker`, selected by its .gitattributes for a file whose content
    git must hash again (same size, another mtime)."""
    repo.mkdir(parents=True, exist_ok=True)
    # The folder may be the jail user's already (root's git as nobody, git.py): the attacker
    # is that user, so its git trusts the folder.
    git(repo, *SAFE, "init", "-q")
    (repo / "f.txt").write_text("hello\n")
    (repo / ".gitattributes").write_text("* filter=x\n")
    git(repo, *SAFE, "add", ".")
    git(repo, *SAFE, "commit", "-q", "-m", "planted")
    git(repo, *SAFE, "config", "filter.x.clean", f"touch '{marker}'; cat")
    (repo / "f.txt").write_text("HELLO\n")
    os.utime(repo / "f.txt", (978307200, 978307200))


def test_a_populated_submodule_runs_no_filter_in_any_harness_read(tmp_path):
    _, worktree = with_submodule(tmp_path)
    marker = tmp_path / "filter-ran"
    plant_filter(worktree / "vendor" / "lib", marker)
    head = ar_git.head(worktree)

    ar_git.worktree_git(worktree, "status", "--porcelain", "--untracked-files=all")
    ar_git.worktree_git(worktree, "diff", "HEAD")
    ar_git.worktree_git(worktree, "diff-index", "HEAD")
    Protection(head, ("vendor/**",)).changed(worktree)
    ar_git.is_dirty(worktree)
    ar_git.reset_to(worktree, head)

    assert not marker.exists()


def test_the_attack_works_on_git_left_to_itself(tmp_path):
    """The same planted filter does run for a plain `git status`: the test above is real."""
    _, worktree = with_submodule(tmp_path)
    marker = tmp_path / "filter-ran"
    plant_filter(worktree / "vendor" / "lib", marker)
    subprocess.run(["git", "status", "--porcelain"], cwd=worktree, capture_output=True)
    assert marker.exists()


def test_a_reset_leaves_the_submodule_as_the_base_has_it(tmp_path):
    _, worktree = with_submodule(tmp_path)
    plant_filter(worktree / "vendor" / "lib", tmp_path / "filter-ran")
    ar_git.reset_to(worktree, ar_git.head(worktree))
    assert (worktree / "vendor" / "lib").is_dir()
    assert list((worktree / "vendor" / "lib").iterdir()) == []
    # So the next change commits without dragging the submodule to another commit.
    (worktree / "calc.py").write_text("X = 2\n")
    assert ar_git.commit_all(worktree, "fix: X") is not None


def test_a_nested_repository_a_test_made_is_never_committed(tmp_path):
    target = make_repo(tmp_path / "target", {"calc.py": "X = 1\n"})
    worktree = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", ar_git.head(target))
    head = ar_git.head(worktree)
    plant_filter(worktree / "sub", tmp_path / "filter-ran")
    (worktree / "calc.py").write_text("X = 2\n")

    with pytest.raises(NestedRepository) as refused:
        Protection(head).commit(worktree, "fix: X")

    assert "sub" in refused.value.reason and "gitlink" in refused.value.reason
    assert ar_git.head(worktree) == head
    assert "160000" not in git(worktree, "ls-tree", "-r", "HEAD")
    assert not (tmp_path / "filter-ran").exists()


def test_a_submodule_moved_to_another_commit_is_refused(tmp_path):
    _, worktree = with_submodule(tmp_path)
    head = ar_git.head(worktree)
    other = head  # any commit but the one the base's gitlink names
    git(worktree, "update-index", "--cacheinfo", f"160000,{other},vendor/lib")
    with pytest.raises(ar_git.GitlinkRefused, match="vendor/lib"):
        ar_git.commit_index(worktree, "fix: move it")
    assert ar_git.head(worktree) == head


class NestingEnv(Env):
    """A stage whose test runs each leave a nested repository and an ignored file behind."""

    def measure_tests(self, **kw):
        nest = self.worktree / "made-by-tests"
        if not (nest / ".git").exists():
            nest.mkdir(exist_ok=True)
            git(nest, "init", "-q")
            (nest / "x.txt").write_text("x\n")
            git(nest, "add", ".")
            git(nest, "commit", "-q", "-m", "nested")
        return super().measure_tests(**kw)


def test_a_bisection_replay_commits_no_nested_repository_a_test_run_made(tmp_path):
    changes = [("f1.txt", "a\n"), ("f2.txt", "BROKEN\n"), ("f3.txt", "c\n")]
    env, start, commits = stage(tmp_path, changes)
    env = NestingEnv(env.worktree, env.protection)
    settled = BatchGate(env, run_of(True)).settle(start, commits)
    assert commits[1].sha in settled.dropped and len(settled.kept) == 2
    tree = git(env.worktree, "ls-tree", "-r", "HEAD")
    assert "160000" not in tree and "made-by-tests" not in tree
    # Each replayed commit holds exactly the path of the commit it replays.
    for kept in settled.kept.values():
        shown = git(env.worktree, "show", "--name-only", "--format=", kept).splitlines()
        assert len(shown) == 1 and shown[0] in ("f1.txt", "f3.txt")


@pytest.mark.parametrize("kind", ["repository", "plain folder", "file"])
def test_a_git_entry_in_a_tracked_folder_is_gone_after_every_reset_and_pristine_tree(
    tmp_path, kind
):
    # git never touches an entry named .git: clean -ffdx leaves one in a folder that holds
    # tracked files, and status --ignored does not show it, so a run could keep state there.
    from autoresearch.measure import metrics

    target = make_repo(tmp_path / "target", {"src/calc.py": "X = 1\n"})
    worktree = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", ar_git.head(target))
    for clear in (
        lambda: ar_git.reset_to(worktree, ar_git.head(worktree)),
        lambda: metrics.pristine(worktree),
    ):
        nested = worktree / "src" / ".git"
        if kind == "repository":
            plant_filter(worktree / "src", tmp_path / "filter-ran")
        elif kind == "plain folder":
            nested.mkdir()
            (nested / "steps-cache").write_text("1\n")
        else:
            nested.write_text("gitdir: /somewhere\n")
        ar_git.worktree_git(worktree, "clean", "-ffdxq")
        assert os.path.lexists(nested)  # what clean leaves: the attack is real
        clear()
        assert not os.path.lexists(nested)
        assert (worktree / "src" / "calc.py").read_text() == "X = 1\n"
    assert not (tmp_path / "filter-ran").exists()

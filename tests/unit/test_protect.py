"""Protected files stay as the session's base has them: the commit guard and the pristine
tree every measurement runs in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch.modes.narrow.protect import TEST_GLOBS
from autoresearch.safety import git as ar_git
from autoresearch.safety.protect import ProtectedChange, Protection

PACKAGE = Path(__file__).resolve().parents[2] / "autoresearch"
BENCH = "print(3)\n"


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    repo = make_repo(
        tmp_path / "target",
        {
            "bench.py": BENCH,
            "src.py": "x = 1\n",
            "tests/test_src.py": "def test_x():\n    pass\n",
            ".gitignore": "build/\n",
        },
    )
    wt = tmp_path / "wt"
    ar_git.open_worktree(repo, wt, "autoresearch/improve", ar_git.head(repo))
    return wt


def guard(wt: Path) -> Protection:
    return Protection(ar_git.head(wt), ("bench.py", "tests"))


def test_a_changed_protected_file_is_restored_and_nothing_is_committed(worktree):
    protection, head = guard(worktree), ar_git.head(worktree)
    (worktree / "bench.py").write_text("print(0)\n")
    (worktree / "src.py").write_text("x = 2\n")
    with pytest.raises(ProtectedChange) as err:
        protection.commit(worktree, "fix: sneaky")
    assert err.value.reason == "protected file bench.py changed: restored, change rejected"
    assert (worktree / "bench.py").read_text() == BENCH
    assert ar_git.head(worktree) == head


def test_a_new_untracked_file_under_a_protected_folder_is_removed_not_committed(worktree):
    """A test run's cache in tests/ is no reason to reject the change; it is never kept."""
    (worktree / "tests" / "__pycache__").mkdir()
    (worktree / "tests" / "__pycache__" / "test_src.pyc").write_bytes(b"\0")
    (worktree / "src.py").write_text("x = 2\n")
    guard(worktree).commit(worktree, "fix: fine")
    assert ar_git.changed_files(worktree, "HEAD~1") == ["src.py"]
    assert not (worktree / "tests" / "__pycache__" / "test_src.pyc").exists()


def test_a_staged_protected_change_is_caught_when_only_the_index_is_committed(worktree):
    protection, head = guard(worktree), ar_git.head(worktree)
    (worktree / "bench.py").write_text("print(0)\n")
    ar_git.worktree_git(worktree, "add", "bench.py")
    with pytest.raises(ProtectedChange):
        protection.commit(worktree, "fix: staged", staged=True)
    assert ar_git.worktree_git(worktree, "diff", "--cached", "--name-only") == ""
    assert ar_git.head(worktree) == head


def test_a_change_to_unprotected_files_only_is_committed(worktree):
    (worktree / "src.py").write_text("x = 2\n")
    sha = guard(worktree).commit(worktree, "fix: fine")
    assert sha == ar_git.head(worktree)
    assert ar_git.changed_files(worktree, "HEAD~1") == ["src.py"]


def test_protected_files_are_held_to_the_base_not_to_head(worktree):
    """A protected file the base has, changed in some commit since, is still a change."""
    protection = guard(worktree)
    (worktree / "bench.py").write_text("print(0)\n")
    ar_git.worktree_git(worktree, "commit", "-qam", "slipped through")
    assert protection.changed(worktree) == ["bench.py"]


def test_the_pristine_tree_holds_the_commit_alone(worktree):
    protection = guard(worktree)
    (worktree / "build").mkdir()
    (worktree / "build" / "helpers.py").write_text("def h():\n    pass\n")  # ignored
    (worktree / "leftover.txt").write_text("untracked\n")
    (worktree / "src.py").write_text("x = 2\n")
    assert protection.pristine(worktree, ar_git.head(worktree)) == []
    assert not (worktree / "build").exists() and not (worktree / "leftover.txt").exists()
    assert ar_git.worktree_git(worktree, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_pristine_tree_takes_protected_files_from_the_base(worktree):
    protection = guard(worktree)
    (worktree / "bench.py").write_text("print(0)\n")
    ar_git.worktree_git(worktree, "commit", "-qam", "slipped through")
    assert protection.pristine(worktree, ar_git.head(worktree)) == ["bench.py"]
    assert (worktree / "bench.py").read_text() == BENCH


def test_without_protected_paths_nothing_is_checked(worktree):
    (worktree / "bench.py").write_text("print(0)\n")
    assert Protection(ar_git.head(worktree)).changed(worktree) == []


def test_a_protected_file_name_with_glob_characters_restores_only_itself(tmp_path):
    repo = make_repo(tmp_path / "t", {"b[1].py": "one\n", "b1.py": "other\n"})
    wt = tmp_path / "wt"
    ar_git.open_worktree(repo, wt, "autoresearch/improve", ar_git.head(repo))
    (wt / "b[1].py").write_text("changed\n")
    (wt / "b1.py").write_text("changed too\n")
    protection = Protection(ar_git.head(wt), ("b[[]1].py",))
    with pytest.raises(ProtectedChange):
        protection.enforce(wt)
    assert (wt / "b[1].py").read_text() == "one\n"
    assert (wt / "b1.py").read_text() == "changed too\n"
    assert git(wt, "status", "--porcelain") == "M b1.py"


COMMITS = re.compile(r"commit_all\(|\"commit\",\s*\"-q\"")


def test_the_harnesss_own_new_test_is_committed_alone_under_a_protected_folder(worktree):
    (worktree / "tests" / "test_regression_b_001.py").write_text("def test_b():\n    pass\n")
    (worktree / "tests" / "__pycache__").mkdir()
    (worktree / "tests" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    guard(worktree).commit_added(worktree, ["tests/test_regression_b_001.py"], "test: b")
    assert ar_git.changed_files(worktree, "HEAD~1") == ["tests/test_regression_b_001.py"]
    assert not (worktree / "tests" / "__pycache__" / "x.pyc").exists()


def test_the_harnesss_own_commit_is_refused_when_another_protected_file_changed(worktree):
    head = ar_git.head(worktree)
    (worktree / "tests" / "test_regression_b_001.py").write_text("def test_b():\n    pass\n")
    (worktree / "bench.py").write_text("print(0)\n")
    with pytest.raises(ProtectedChange) as err:
        guard(worktree).commit_added(worktree, ["tests/test_regression_b_001.py"], "test: b")
    assert "bench.py" in err.value.reason
    assert (worktree / "bench.py").read_text() == BENCH
    assert ar_git.head(worktree) == head


def test_the_harness_commits_agent_work_only_through_the_guard():
    """Every commit of agent work goes through Protection.commit: no other module calls
    git's commit helper or runs `git commit` itself."""
    # review.py (finalize) commits no new agent work: it replays the changes of commits the
    # session already made through the guard, onto review branches of their own.
    allowed = {
        PACKAGE / "git.py",
        PACKAGE / "protect.py",
        PACKAGE / "examples.py",
        PACKAGE / "review.py",
    }
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in allowed and COMMITS.search(path.read_text())
    ]
    assert offenders == []


# --- what decides which tests run is protected with the tests ---

PROJECT = "[project]\nname = 'x'\n"
RUNNER_FILES = [
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    "conftest.py",
    "src/pkg/conftest.py",
    "jest.config.js",
    "vitest.config.ts",
    "package.json",
    "go.mod",
    "Cargo.toml",
    ".cargo/config.toml",
]


@pytest.mark.parametrize("path", RUNNER_FILES)
def test_the_files_that_decide_which_tests_run_are_protected_with_the_tests(path):
    assert Protection("base", tuple(TEST_GLOBS)).covers(path)


def test_a_pytest_ini_that_deselects_a_test_never_reaches_a_commit(worktree):
    """A new one is dropped as any new file under a protected path is; an edit is refused."""
    protection = Protection(ar_git.head(worktree), tuple(TEST_GLOBS))
    (worktree / "pytest.ini").write_text('[pytest]\naddopts = -k "not test_x"\n')
    (worktree / "src.py").write_text("x = 2\n")
    protection.commit(worktree, "fix: with a new pytest.ini")
    assert ar_git.changed_files(worktree, "HEAD~1") == ["src.py"]
    assert not (worktree / "pytest.ini").exists()


def test_an_edit_to_pyproject_toml_is_refused_when_tests_are_protected(tmp_path):
    repo = make_repo(tmp_path / "target", {"pyproject.toml": PROJECT})
    wt = tmp_path / "wt"
    ar_git.open_worktree(repo, wt, "autoresearch/improve", ar_git.head(repo))
    protection = Protection(ar_git.head(wt), tuple(TEST_GLOBS))
    deselect = '[tool.pytest.ini_options]\naddopts = "--deselect tests/test_x.py::test_x"\n'
    (wt / "pyproject.toml").write_text(PROJECT + deselect)
    with pytest.raises(ProtectedChange) as err:
        protection.commit(wt, "fix: sneaky")
    assert err.value.paths == ["pyproject.toml"]
    assert (wt / "pyproject.toml").read_text() == PROJECT

"""The checks before every harness git call on a session worktree read the disk as it is at
that call: the record beside the worktree, its `.git` file, the administrative directory's
`gitdir`, `commondir` and HEAD, the branch's file and `config.worktree`. Nothing a check
read for an earlier call is taken for the next one: a program run in the box between two
calls may have changed any of them.

Each test changes one of those files between two calls, as such a program could, and
expects the second call refused before git starts."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from conftest import make_repo

from autoresearch.safety import child_env
from autoresearch.safety import git as ar_git


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, Path]:
    """A target repository and our worktree of it."""
    target = make_repo(tmp_path / "target", {"calc.py": "X = 1\n"})
    worktree = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", ar_git.head(target))
    return target, worktree


def refused(worktree: Path, match: str) -> None:
    """The next harness call on `worktree` is refused, with `match` in its one line."""
    with pytest.raises(ar_git.ForgedGitLink, match=match):
        ar_git.worktree_git(worktree, "status")


def test_the_record_is_read_again_on_every_call(session, tmp_path):
    # A record that came to name another worktree's git directory (of the same repository,
    # so of the right shape) is no longer the one the `.git` file names.
    target, worktree = session
    other = tmp_path / "store" / "other"
    ar_git.open_worktree(target, other, "autoresearch/o", ar_git.head(target))
    ar_git.worktree_git(worktree, "status")
    record = ar_git.record_of(worktree)
    record.write_text(ar_git.record_of(other).read_text())
    refused(worktree, "recorded for it")


def test_a_gitdir_file_naming_another_place_stops_the_next_call(session, tmp_path):
    # The administrative directory is writable in the box: its `gitdir` rewritten, the
    # `.git` file no longer names a worktree that names it back.
    _, worktree = session
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    ar_git.worktree_git(worktree, "status")
    (admin / "gitdir").write_text(f"{tmp_path / 'elsewhere' / '.git'}\n")
    refused(worktree, "no\\s+longer points")


def test_a_git_file_turned_into_a_link_is_refused(session, tmp_path):
    # Same text, but a link: what it names can change under the harness at any time.
    _, worktree = session
    dot_git = worktree / ".git"
    copy = tmp_path / "copy-of-git-file"
    copy.write_text(dot_git.read_text())
    dot_git.unlink()
    dot_git.symlink_to(copy)
    refused(worktree, "\\.git file")


def test_a_git_file_turned_into_a_fifo_is_refused_at_once(session):
    # A FIFO has no writer: opening it to read would wait for ever.
    _, worktree = session
    dot_git = worktree / ".git"
    dot_git.unlink()
    os.mkfifo(dot_git)
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            ar_git.worktree_git(worktree, "status")
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            outcome.append(error)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=60)
    if caller.is_alive():
        os.close(os.open(dot_git, os.O_WRONLY | os.O_NONBLOCK))  # let it go, then fail
        pytest.fail("the check waited on the FIFO")
    assert isinstance(outcome[0], ar_git.ForgedGitLink)


def test_a_head_changed_between_two_calls_stops_the_second(session):
    target, worktree = session
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    ar_git.worktree_git(worktree, "status")
    (admin / "HEAD").write_text("ref: refs/heads/main\n")
    refused(worktree, "HEAD")


def test_a_dangling_config_worktree_link_stops_the_next_call(session, tmp_path):
    # A link, even to nothing yet: what it would name can be made later.
    _, worktree = session
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    ar_git.worktree_git(worktree, "status")
    (admin / "config.worktree").symlink_to(tmp_path / "made-later")
    refused(worktree, "config.worktree")


def test_a_commondir_naming_the_same_place_another_way_is_resolved(session):
    # `commondir` is read and resolved on every call: another spelling of the repository's
    # own git directory is still it; one step off is not.
    _, worktree = session
    admin = ar_git.worktree_admin(worktree)
    assert admin is not None
    (admin / "commondir").write_text(f"{admin.parent.parent}\n")
    ar_git.worktree_git(worktree, "status")
    (admin / "commondir").write_text("..\n")
    refused(worktree, "commondir")


def test_a_worktree_named_through_a_link_binds_git_to_its_real_path(session, tmp_path):
    # GIT_WORK_TREE and the ceiling are the worktree's own path, links resolved, as git
    # would find it; GIT_DIR the directory its `.git` file names.
    _, worktree = session
    alias = tmp_path / "alias" / "worktree"
    alias.parent.mkdir()
    alias.symlink_to(worktree)
    env = ar_git._bound(alias)
    real = os.path.realpath(worktree)
    assert env["GIT_WORK_TREE"] == real
    assert env["GIT_CEILING_DIRECTORIES"] == os.path.dirname(real)
    assert env["GIT_DIR"] == str(ar_git.worktree_admin(worktree))


def test_without_proc_the_checks_give_the_same_verdicts(session, monkeypatch, tmp_path):
    # Where /proc cannot name an open folder, paths are resolved the long way.
    _, worktree = session
    alias = tmp_path / "alias" / "worktree"
    alias.parent.mkdir()
    alias.symlink_to(worktree)
    live, through_link = ar_git._bound(worktree), ar_git._bound(alias)

    readlink = os.readlink

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise OSError("no /proc here")
        return readlink(path, *args, **kwargs)  # realpath reads links with it

    monkeypatch.setattr(ar_git.os, "readlink", no_proc)
    assert ar_git._bound(worktree) == live
    assert ar_git._bound(alias) == through_link
    (worktree / ".git").write_text(f"gitdir: {tmp_path}\n")
    refused(worktree, "recorded for it")


def test_the_tool_environment_follows_changes_to_ours(monkeypatch):
    # Filtered again whenever our environment changed, from what it holds at the call.
    monkeypatch.setenv("LC_PAPER", "a4-first")
    assert child_env.for_tool()["LC_PAPER"] == "a4-first"
    monkeypatch.setenv("LC_PAPER", "letter-now")
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-never")
    env = child_env.for_tool()
    assert env["LC_PAPER"] == "letter-now"
    assert "GIT_DIR" not in env and "ANTHROPIC_API_KEY" not in env
    monkeypatch.delenv("LC_PAPER")
    assert "LC_PAPER" not in child_env.for_tool()
    env["PATH"] = "/changed/by/a/caller"
    assert child_env.for_tool()["PATH"] == os.environ["PATH"]  # a copy each call


def test_ignored_paths_passes_over_a_submodules_folder(tmp_path):
    # wcwidth has a submodule (ucs-detect): Python looks for ucs-detect/pyvenv.cfg, and
    # check-ignore failed on the whole batch for it, which stopped the experiment's setup.
    from conftest import git

    target = make_repo(tmp_path / "t", {"lib.py": "x = 1\n", ".gitignore": "build/\n"})
    sha = ar_git.head(target)
    git(target, "update-index", "--add", "--cacheinfo", f"160000,{sha},ucs-detect")
    git(target, "commit", "-qm", "a submodule")
    place = tmp_path / "wt"
    ar_git.open_worktree(target, place, "autoresearch/s", ar_git.head(target))
    asked = ["ucs-detect/pyvenv.cfg", "ucs-detect", "build/x.py", "lib.py", "ucs-detectx.py"]
    assert ar_git.ignored_paths(place, asked) == {"build/x.py"}

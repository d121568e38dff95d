"""The repository never runs code in the harness's git.

A test Green wrote can build a git directory of its own inside the worktree (hooks, an
fsmonitor, `alternates` pointing at the real objects, our worktree marker) and point the
worktree's `.git` file at it. The harness's next git call must neither run what it planted
nor act on it: the stage refuses with one line. And even in the real git directory, no
hook, fsmonitor, external diff or textconv runs for a harness call.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from autoresearch.errors import UserError
from autoresearch.safety import commands
from autoresearch.safety import git as ar_git
from autoresearch.safety.jail import build_jail, probe

CANARY = "planted-code-ran"


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A target repository, our worktree of it, and a folder where planted code would write."""
    target = tmp_path / "target"
    target.mkdir()
    sh(target, "init", "-q", "-b", "main")
    (target / "calc.py").write_text("def mean(xs):\n    return sum(xs) / len(xs)\n")
    sh(target, "add", ".")
    sh(target, "commit", "-q", "-m", "init")
    worktree = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, worktree, "autoresearch/s", ar_git.head(target))
    loot = tmp_path / "loot"
    loot.mkdir()
    return target, worktree, loot


def program(path: Path, loot: Path, name: str) -> None:
    """A script that leaves proof it ran, with the environment it ran with."""
    path.write_text(f"#!/bin/sh\nenv > '{loot}/{CANARY}-{name}'\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


HOOKS = ("pre-commit", "post-commit", "post-checkout", "reference-transaction", "commit-msg")


def forge(worktree: Path, loot: Path) -> Path:
    """What the attacking test does: a git directory of its own, and `.git` pointed at it."""
    real_admin = ar_git.worktree_admin(worktree)
    assert real_admin is not None
    common = (real_admin / (real_admin / "commondir").read_text().strip()).resolve()
    fake = worktree / ".cache" / "g"
    admin = fake / "worktrees" / "worktree"
    (fake / "objects" / "info").mkdir(parents=True)
    (fake / "refs" / "heads" / "autoresearch").mkdir(parents=True)
    (fake / "hooks").mkdir()
    admin.mkdir(parents=True)
    (fake / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    (fake / "HEAD").write_text("ref: refs/heads/main\n")
    head = sh(worktree, "rev-parse", "HEAD")
    (fake / "refs" / "heads" / "autoresearch" / "s").write_text(head + "\n")
    for hook in HOOKS:
        program(fake / "hooks" / hook, loot, hook)
    program(fake / "fsmonitor", loot, "fsmonitor")
    (fake / "config").write_text(
        f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {fake / 'fsmonitor'}\n"
    )
    (admin / "commondir").write_text("../..\n")
    (admin / "HEAD").write_text("ref: refs/heads/autoresearch/s\n")
    (admin / "gitdir").write_text(f"{worktree / '.git'}\n")
    (admin / ar_git.MARKER).write_text("forged\n")
    (worktree / ".git").write_text(f"gitdir: {admin}\n")
    return admin


def planted_ran(loot: Path) -> list[str]:
    return sorted(p.name for p in loot.iterdir())


HARNESS_CALLS = {
    "commit_all": lambda wt: ar_git.commit_all(wt, "fix: something"),
    "reset_to": lambda wt: ar_git.reset_to(wt, "HEAD"),
    "git status": lambda wt: ar_git.git(wt, "status", "--porcelain"),
    "commits_between": lambda wt: ar_git.commits_between(wt, "HEAD~0"),
    "changed_files": lambda wt: ar_git.changed_files(wt, "HEAD"),
    "clear_stale_lock": lambda wt: ar_git.clear_stale_lock(wt),
}


@pytest.mark.parametrize("call", sorted(HARNESS_CALLS))
def test_a_forged_git_directory_is_refused_and_runs_nothing(session, call):
    target, worktree, loot = session
    forge(worktree, loot)
    (worktree / "calc.py").write_text("def mean(xs):\n    return 0\n")
    before = sh(target, "rev-parse", "autoresearch/s")
    with pytest.raises(ar_git.ForgedGitLink, match="not a live git worktree") as refused:
        HARNESS_CALLS[call](worktree)
    assert isinstance(refused.value, UserError)  # one line on the terminal, no traceback
    assert "\n" not in str(refused.value)
    assert planted_ran(loot) == []
    assert sh(target, "rev-parse", "autoresearch/s") == before


def test_the_refusal_says_how_to_put_the_file_back(session):
    _, worktree, loot = session
    real = ar_git.worktree_admin(worktree)
    forge(worktree, loot)
    with pytest.raises(ar_git.ForgedGitLink) as refused:
        ar_git.commit_all(worktree, "x")
    (worktree / ".git").write_text(f"gitdir: {real}\n")  # what the message says to do
    assert f"gitdir: {real}" in str(refused.value)
    assert ar_git.worktree_admin(worktree) == real
    ar_git.reset_to(worktree, "HEAD", ignored=True)
    assert planted_ran(loot) == []


def test_setup_run_again_refuses_a_forged_worktree(session):
    target, worktree, loot = session
    forge(worktree, loot)
    with pytest.raises(ar_git.ForgedGitLink):
        ar_git.open_worktree(target, worktree, "autoresearch/s", "HEAD")
    assert planted_ran(loot) == []


def test_a_worktree_without_a_record_is_not_taken_on_its_git_files_word(session):
    """Made before the record existed: a `.git` naming a directory inside the worktree is
    no live worktree of ours."""
    _, worktree, loot = session
    ar_git.record_of(worktree).unlink()
    forge(worktree, loot)
    assert ar_git.worktree_admin(worktree) is None
    with pytest.raises(ar_git.GitError, match="not a live git worktree"):
        ar_git.worktree_git(worktree, "status")
    assert planted_ran(loot) == []


def test_the_record_lies_outside_the_worktree(session):
    _, worktree, _ = session
    record = ar_git.record_of(worktree)
    assert record.is_file() and worktree not in record.parents
    assert Path(ar_git.json.loads(record.read_text())["admin"]) == ar_git.worktree_admin(worktree)


def test_removing_the_worktree_removes_its_record(session):
    target, worktree, _ = session
    assert ar_git.remove_worktree(target, worktree)
    assert not ar_git.record_of(worktree).exists()


def test_hooks_and_fsmonitor_of_the_real_repository_never_run_for_the_harness(session):
    """Even the recorded git directory's own hooks and fsmonitor stay off."""
    target, worktree, loot = session
    common = ar_git.common_dir(target)
    for hook in HOOKS:
        program(common / "hooks" / hook, loot, hook)
    program(common / "fsmonitor", loot, "fsmonitor")
    sh(target, "config", "core.fsmonitor", str(common / "fsmonitor"))
    (worktree / "calc.py").write_text("def mean(xs):\n    return 1\n")
    assert ar_git.commit_all(worktree, "fix: mean") is not None
    ar_git.reset_to(worktree, "HEAD~1", ignored=True)
    ar_git.git(worktree, "status")
    assert planted_ran(loot) == []


def test_no_external_diff_or_textconv_runs_for_the_harness(session, monkeypatch):
    """A `.gitattributes` the agent wrote may pick a diff driver: none runs."""
    target, worktree, loot = session
    program(loot.parent / "conv", loot, "textconv")
    program(loot.parent / "ext", loot, "external-diff")
    sh(target, "config", "diff.x.textconv", str(loot.parent / "conv"))
    sh(target, "config", "diff.external", str(loot.parent / "ext"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(loot.parent / "ext"))
    (worktree / ".gitattributes").write_text("*.py diff=x\n")
    (worktree / "calc.py").write_text("def mean(xs):\n    return 2\n")
    ar_git.commit_all(worktree, "fix: mean")
    ar_git.git(worktree, "diff", "HEAD~1", "HEAD")
    ar_git.git(worktree, "log", "-p", "-1")
    ar_git.git(worktree, "show", "HEAD")
    assert planted_ran(loot) == []


def test_configuration_passed_in_the_environment_is_dropped(session, monkeypatch):
    _, worktree, loot = session
    program(loot.parent / "mon", loot, "env-fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(loot.parent / "mon"))
    env = ar_git.environment(worktree)
    assert not any(
        k.startswith(("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY", "GIT_CONFIG_VALUE")) for k in env
    )
    # Nor is the user's global or the system's configuration read.
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    (worktree / "calc.py").write_text("x = 1\n")
    ar_git.commit_all(worktree, "fix: x")
    assert planted_ran(loot) == []


@pytest.mark.skipif(not probe().works, reason=f"no bwrap jail here: {probe().reason}")
def test_a_command_in_the_jail_cannot_rewrite_the_git_file(session, tmp_path):
    target, worktree, loot = session
    jail = build_jail({"sandbox": "bwrap"}, worktree)
    before = (worktree / ".git").read_text()
    attempt = (
        "echo 'gitdir: /tmp/elsewhere' > .git; rm -f .git; mv .git moved; echo written > proof.txt"
    )
    result = commands.run(attempt, worktree, timeout_s=120, jail=jail)
    assert (worktree / "proof.txt").read_text() == "written\n"  # the rest of it did run
    assert (worktree / ".git").read_text() == before, result.output
    assert ar_git.worktree_admin(worktree) is not None
    assert os.listdir(loot) == []

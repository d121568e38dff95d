"""No process the harness starts holds the API key, a `secrets` value or a credential nobody
listed: git, ruff, bandit and the target's commands (in the jail or not) get an allowlisted
environment, and the key itself leaves `os.environ` where the model client is made.

Each test is an attack: a program planted where the harness will start it, which writes
out the environment it was given.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch.agents.backends import api_key
from autoresearch.safety import commands, jail
from autoresearch.safety import git as ar_git

KEY = "sk-ant-never-in-a-child"
LEAKS = {
    "ANTHROPIC_API_KEY": KEY,
    "ANTHROPIC_AUTH_TOKEN": "auth-never-in-a-child",
    "DEPLOY_TOKEN": "secret-listed-in-spec",
    "GITHUB_TOKEN": "ghp-unlisted-credential",
    "AWS_SECRET_ACCESS_KEY": "aws-unlisted-credential",
    "PYTHONPATH": "/nowhere/else",
}
PROBE = jail.probe()
needs_bwrap = pytest.mark.skipif(not PROBE.works, reason=f"no bwrap jail here: {PROBE.reason}")


@pytest.fixture
def leaky(monkeypatch):
    """Our process holds the key, a spec secret and credentials nobody listed."""
    for name, value in LEAKS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DATABASE_URL", "postgres://db/test")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")


@pytest.fixture
def worktree(tmp_path) -> Path:
    target = make_repo(tmp_path / "target", {"calc.py": "X = 1\n"})
    place = tmp_path / "store" / "worktree"
    ar_git.open_worktree(target, place, "autoresearch/s", ar_git.head(target))
    return place


def dumper(folder: Path, name: str, then: str = "exit 0") -> Path:
    """A program called `name` in `folder` that writes its environment to `folder/name.env`."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text(f"#!/bin/sh\nenv > '{folder / name}.env'\n{then}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return program


def environment_of(dump: Path) -> dict[str, str]:
    assert dump.is_file(), f"{dump.name} never ran"
    pairs = [line.partition("=") for line in dump.read_text().splitlines() if "=" in line]
    return {key: value for key, _, value in pairs}


def assert_clean(env: dict[str, str], *, own_home: bool = True) -> None:
    """No value of LEAKS anywhere; `own_home`: HOME is not ours (the jail instead covers
    our HOME's path with an empty folder of its own, so tools find it where they look)."""
    leaked = sorted(name for name, value in LEAKS.items() if env.get(name) == value)
    assert leaked == []
    assert not any(value in "\n".join(env.values()) for value in LEAKS.values())
    if own_home:
        assert env.get("HOME") != os.environ.get("HOME")


def test_the_harness_git_gets_no_key_secret_or_credential(tmp_path, worktree, leaky, monkeypatch):
    real = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    fake = tmp_path / "bin"
    dumper(fake, "git", then=f'exec {real} "$@"')
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")

    ar_git.worktree_git(worktree, "rev-parse", "HEAD")  # a call that touches no file

    env = environment_of(fake / "git.env")
    assert_clean(env)
    # Neither the user's global nor the system's git configuration is read.
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["LC_ALL"] == "C.UTF-8"  # what a program needs to run is still there


def test_ruff_gets_no_key_and_never_imports_a_ruff_the_agent_planted(
    tmp_path, worktree, leaky, monkeypatch
):
    from autoresearch.agents.backends import ruff as ruff_backend

    # `python -m ruff` in the worktree imports ./ruff/ first: code the agent wrote, on the host.
    planted = worktree / "ruff"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    loot = tmp_path / "planted.env"
    (planted / "__main__.py").write_text(
        f"import os\nopen({str(loot)!r}, 'w').write(repr(dict(os.environ)))\n"
    )
    ruff_backend.ruff("check", "--no-cache", "--output-format", "json", ".", cwd=worktree)
    assert not loot.exists()

    # And the ruff that does run is given the allowlist.
    fake = dumper(tmp_path / "bin", "ruff")
    monkeypatch.setattr(ruff_backend, "RUFF", (str(fake),))
    ruff_backend.ruff("check", ".", cwd=worktree)
    assert_clean(environment_of(tmp_path / "bin" / "ruff.env"))


def test_bandit_gets_no_key_secret_or_credential(tmp_path, worktree, leaky, monkeypatch):
    from autoresearch.modes.security import recon

    fake = tmp_path / "bin"
    dumper(fake, "bandit", then="echo '{}'")
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    recon.baseline_scanners(worktree)
    assert_clean(environment_of(fake / "bandit.env"))


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=needs_bwrap), "none"])
def test_a_command_gets_only_the_allowlist_and_the_names_the_spec_passes(worktree, leaky, mode):
    box = jail.build_jail(
        {"sandbox": mode, "pass_env": ["DATABASE_URL"]}, worktree, hide=[worktree.parent]
    )
    result = commands.run("env", worktree, timeout_s=120, extra_secrets=["DEPLOY_TOKEN"], jail=box)
    env = dict(line.partition("=")[::2] for line in result.output.splitlines() if "=" in line)
    assert_clean(env, own_home=mode == "none")
    assert env["DATABASE_URL"] == "postgres://db/test"
    assert env["LC_ALL"] == "C.UTF-8" and "PATH" in env


def test_an_unlisted_credential_never_reaches_a_command_without_a_jail_object(worktree, leaky):
    result = commands.run("env", worktree, timeout_s=60)
    env = dict(line.partition("=")[::2] for line in result.output.splitlines() if "=" in line)
    assert_clean(env)
    assert "DATABASE_URL" not in env  # only a spec that lists it passes it


def test_the_key_leaves_the_environment_where_the_client_is_made(leaky):
    from autoresearch.agents.backends.claude import ClaudeBackend

    backend = ClaudeBackend({"model": "claude-test"}, {})
    assert "ANTHROPIC_API_KEY" not in os.environ and "ANTHROPIC_AUTH_TOKEN" not in os.environ
    assert backend.client.api_key == KEY
    # The process still knows it has one (a later job in the same process makes a client).
    assert api_key.read().present
    assert ClaudeBackend({"model": "claude-test"}, {}).client.api_key == KEY


def test_a_process_that_submits_cluster_jobs_keeps_the_key_for_them(leaky):
    from autoresearch.agents.backends.claude import ClaudeBackend

    api_key.keep_in_environment(True)
    ClaudeBackend({"model": "claude-test"}, {})
    assert os.environ["ANTHROPIC_API_KEY"] == KEY


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (["ANTHROPIC_API_KEY"], "the model API's"),
        (["DEPLOY_TOKEN"], "also listed in `secrets`"),
        (["NOT A NAME"], "not an environment variable name"),
    ],
)
def test_pass_env_refuses_the_key_a_secret_and_a_non_name(names, said):
    from autoresearch.safety import child_env

    assert said in (child_env.problem(names, ["DEPLOY_TOKEN"]) or "")


def test_a_spec_passing_a_secret_fails_naming_the_key(tmp_path):
    from autoresearch.errors import SpecError
    from autoresearch.session import spec

    values = {"secrets": ["DEPLOY_TOKEN"], "commands": {"pass_env": ["DEPLOY_TOKEN"]}}
    with pytest.raises(SpecError, match=r"commands\.pass_env.*secrets"):
        spec.check_values(spec.Spec(values))


def test_a_targets_own_git_config_is_what_the_harness_reads(tmp_path, worktree, leaky, monkeypatch):
    """The user's global config (here: a filter the worktree's attributes select) is not
    read: only the repository's own, which the jail keeps read-only."""
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "global-filter-ran"
    (home / ".gitconfig").write_text(f"[filter \"x\"]\n\tclean = touch '{marker}'; cat\n")
    monkeypatch.setenv("HOME", str(home))
    (worktree / ".gitattributes").write_text("*.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")
    ar_git.worktree_git(worktree, "add", "-A")
    assert not marker.exists()
    assert git(worktree, "diff", "--cached", "--name-only")  # the change itself is staged


@pytest.mark.skipif(not PROBE.works, reason=f"no bwrap jail here: {PROBE.reason}")
@pytest.mark.parametrize("confined", [True, False])
def test_a_filter_the_harness_git_runs_runs_in_the_jail(
    tmp_path, worktree, leaky, monkeypatch, confined
):
    """Defence in depth: a filter in the repository's own config (the one git still reads)
    runs confined: no key, no credential, and nothing written outside the worktree.
    (Unconfined, the same filter does write outside: the attack is real.)"""
    monkeypatch.setattr(ar_git, "CONFINED", confined)
    outside = tmp_path / "outside"
    outside.mkdir()
    common = ar_git.common_dir(worktree)
    script = f"env > filter-env.txt; touch '{outside}/ran'; cat"
    git(common.parent if common.name == ".git" else common, "config", "filter.x.clean", script)
    (worktree / ".gitattributes").write_text("*.py filter=x\n")
    (worktree / "calc.py").write_text("X = 2\n")

    ar_git.worktree_git(worktree, "add", "-A")

    seen = environment_of(worktree / "filter-env.txt")  # it ran, in the worktree
    assert_clean(seen)
    assert (outside / "ran").exists() is not confined


def test_a_targets_command_writes_no_bytecode_into_the_tree_it_tests(monkeypatch):
    """A file rewritten at the same size within the second a run compiled it would run its
    old bytecode: the target's commands write none, whatever our own environment says."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    assert commands.environment()["PYTHONDONTWRITEBYTECODE"] == "1"

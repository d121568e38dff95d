"""Who a jailed command is, and how much it may write: root-only host files stay unreadable,
and a private folder filled to its bound fails the run, naming the bound and its key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autoresearch.safety import commands, jail

PROBE = jail.probe()
pytestmark = pytest.mark.skipif(not PROBE.works, reason=f"no bwrap jail here: {PROBE.reason}")


def jailed(dirs, **settings) -> jail.Jail:
    return jail.build_jail({"sandbox": "bwrap", **settings}, dirs.worktree, hide=[dirs.sessions])


def run_in(dirs, command: str, box: jail.Jail | None = None) -> commands.CommandResult:
    return commands.run(command, dirs.worktree, timeout_s=120, jail=box or jailed(dirs))


@pytest.mark.skipif(not Path("/etc/shadow").exists(), reason="no /etc/shadow here")
def test_a_jailed_command_cannot_read_what_only_root_may(session_dirs):
    result = run_in(session_dirs, "id -u; cat /etc/shadow; echo done")
    lines = result.output.splitlines()
    assert lines[0] != "0"
    assert "root:" not in result.output and "Permission denied" in result.output
    assert lines[-1] == "done"


def test_as_nobody_the_command_still_changes_the_worktree_and_what_the_harness_wrote(
    session_dirs,
):
    box = jailed(session_dirs)
    assert run_in(session_dirs, "echo one > made.txt", box).ok
    # The harness writes a file after the run (a reset, an agent's edit): root's, 0644.
    written = session_dirs.worktree / "calc.py"
    written.write_text("X = 1\n")
    assert run_in(session_dirs, "echo two >> calc.py && rm made.txt", box).ok
    assert written.read_text() == "X = 1\ntwo\n"
    assert not (session_dirs.worktree / "made.txt").exists()


def test_git_in_the_jail_reads_the_repository_as_nobody(session_dirs):
    result = run_in(session_dirs, "git status --porcelain && git log -1 --format=%s && echo ok")
    assert result.ok, result.output
    assert result.output.splitlines()[-1] == "ok"


def test_setup_records_who_the_commands_run_as(session_dirs):
    described = jailed(session_dirs).describe()
    if os.geteuid() == 0:
        assert described["user"].startswith("uid 65534 (nobody)")
    else:
        assert "unprivileged" in described["user"]


def test_a_command_that_fills_its_private_tmp_fails_naming_the_bound_and_its_key(session_dirs):
    box = jailed(session_dirs, tmp_size_mb=1)
    result = run_in(session_dirs, "head -c 3000000 /dev/zero > /tmp/big", box)
    assert not result.ok
    assert "No space left on device" in result.output
    assert "limited to 1 MiB" in result.output and jail.TMP_SIZE_KEY in result.output
    # It was a tmpfs of the jail's: nothing is left on the host.
    assert not Path("/tmp/big").exists()


def test_a_run_within_the_bound_is_untouched(session_dirs):
    box = jailed(session_dirs, tmp_size_mb=4)
    result = run_in(session_dirs, "head -c 1000000 /dev/zero > /tmp/big && echo fine", box)
    assert result.ok and result.output == "fine\n"


def test_a_bound_in_the_spec_must_be_a_positive_whole_number(tmp_path):
    import jsonschema
    import yaml
    from conftest import ROOT

    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema["properties"]["commands"])
    assert list(validator.iter_errors({"tmp_size_mb": 0}))
    assert list(validator.iter_errors({"pass_env": ["NOT A NAME"]}))
    assert not list(validator.iter_errors({"tmp_size_mb": 64, "pass_env": ["DATABASE_URL"]}))


def test_a_command_that_grows_the_worktree_past_its_bound_is_stopped_and_fails(session_dirs):
    box = jailed(session_dirs, worktree_growth_mb=2)
    # It would write forever: only the bound ends it (the timeout is far away).
    forever = "while :; do head -c 1000000 /dev/zero >> big.bin; done"
    result = commands.run(forever, session_dirs.worktree, timeout_s=120, jail=box)
    assert not result.ok and not result.timed_out
    assert result.over_bound and result.output.splitlines()[-1] == result.over_bound
    assert (
        "bound of 2 MiB" in result.over_bound and "commands.worktree_growth_mb" in result.over_bound
    )


def test_growth_past_the_bound_at_the_runs_end_fails_too_and_the_reset_leaves_nothing(
    session_dirs,
):
    from conftest import git

    box = jailed(session_dirs, worktree_growth_mb=1)
    result = run_in(session_dirs, "mkdir -p out && head -c 3000000 /dev/urandom > out/big", box)
    assert not result.ok and "commands.worktree_growth_mb" in result.output
    git(session_dirs.worktree, "clean", "-ffdxq")  # the reset that ends an attempt
    assert not (session_dirs.worktree / "out").exists()


def test_a_run_within_the_worktree_bound_is_untouched(session_dirs):
    box = jailed(session_dirs, worktree_growth_mb=1)
    result = run_in(session_dirs, "head -c 300000 /dev/urandom > small.bin && echo fine", box)
    assert result.ok and result.output == "fine\n" and result.over_bound is None


def test_a_test_run_past_the_worktree_bound_is_a_failed_run_naming_the_key(session_dirs):
    import sys

    from autoresearch.gate import testrun

    (session_dirs.worktree / "test_big.py").write_text(
        "def test_writes():\n    open('big.bin', 'wb').write(b'x' * 3_000_000)\n"
    )
    box = jailed(session_dirs, worktree_growth_mb=1)
    run = testrun.run_tests(
        f"{sys.executable} -m pytest -q test_big.py",
        session_dirs.worktree,
        stack="Python",
        timeout_s=120,
        jail=box,
    )
    assert run.outcome == testrun.FAILED
    assert "commands.worktree_growth_mb" in run.cause


def test_the_worktree_bound_is_a_whole_number_in_the_spec():
    import jsonschema
    import yaml
    from conftest import ROOT

    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema["properties"]["commands"])
    assert list(validator.iter_errors({"worktree_growth_mb": -1}))
    assert list(validator.iter_errors({"worktree_growth_mb": "big"}))
    assert not list(validator.iter_errors({"worktree_growth_mb": 0}))

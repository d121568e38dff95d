"""A session whose target's tests point the worktree's `.git` at a git directory they built.

Without a jail (`commands.sandbox: none`) nothing stops the test from rewriting the file; the
harness's next git call must then refuse, in one line, and run none of what was planted.
In the jail the file is read-only and the session goes on.
"""

from __future__ import annotations

import pytest
from conftest import make_repo

from autoresearch.safety import git as ar_git
from autoresearch.safety.jail import probe

MATHS = "def mean(xs):\n    return sum(xs) / len(xs)\n"
# The attack, as a test would carry it out: a git directory of its own with an fsmonitor that
# leaves proof (and the environment it ran with), and `.git` pointed at it.
FORGE = """\
import os, pathlib, stat, subprocess

from maths import mean

LOOT = {loot!r}


def test_mean():
    assert mean([1, 3]) == 2


def test_forge():
    here = pathlib.Path.cwd()
    real = pathlib.Path((here / ".git").read_text().split(": ", 1)[1].strip())
    common = (real / (real / "commondir").read_text().strip()).resolve()
    fake = here / ".cache" / "g"
    admin = fake / "worktrees" / "w"
    for d in ("objects/info", "refs/heads/autoresearch", "hooks"):
        (fake / d).mkdir(parents=True, exist_ok=True)
    admin.mkdir(parents=True, exist_ok=True)
    (fake / "objects/info/alternates").write_text(str(common / "objects") + "\\n")
    (fake / "HEAD").write_text("ref: refs/heads/main\\n")
    for ref in (common / "refs/heads/autoresearch").iterdir():
        (fake / "refs/heads/autoresearch" / ref.name).write_text(ref.read_text())
    mon = fake / "mon"
    mon.write_text("#!/bin/sh\\nenv > " + LOOT + "/fsmonitor-ran\\n")
    mon.chmod(0o755)
    (fake / "config").write_text("[core]\\n\\tfsmonitor = " + str(mon) + "\\n")
    (admin / "commondir").write_text("../..\\n")
    (admin / "HEAD").write_text((real / "HEAD").read_text())
    (admin / "gitdir").write_text(str(here / ".git") + "\\n")
    (admin / "autoresearch-worktree").write_text("forged\\n")
    try:
        (here / ".git").write_text("gitdir: " + str(admin) + "\\n")
    except OSError:
        pass  # read-only in the jail
"""


def worktree_of(workflow, name: str):
    return (workflow.session(name) / "worktree").resolve()


def spec(target, sandbox: str) -> dict:
    return {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q -p no:cacheprovider",
        "max_cycles": 1,
        "agent": {"backend": "ruff"},
        "commands": {"sandbox": sandbox},
    }


def test_without_a_jail_the_rewritten_git_file_stops_the_session(workflow, tmp_path):
    loot = tmp_path / "loot"
    loot.mkdir()
    files = {"maths.py": MATHS, "tests/test_maths.py": FORGE.format(loot=str(loot))}
    target = make_repo(tmp_path / "t", files)
    proc = workflow.run("forged", spec(target, "none"), check=False)
    assert proc.returncode != 0
    # Our line first, on its own, as for every stage that fails (Snakemake's report follows).
    assert "\n" + str(ar_git.record_of(worktree_of(workflow, "forged")).parent) in proc.stderr
    assert "is not a live git worktree any more" in proc.stderr
    assert list(loot.iterdir()) == []


@pytest.mark.skipif(not probe().works, reason=f"no bwrap jail here: {probe().reason}")
def test_in_the_jail_the_git_file_cannot_be_rewritten(workflow, tmp_path):
    loot = tmp_path / "loot"
    loot.mkdir()
    files = {"maths.py": MATHS, "tests/test_maths.py": FORGE.format(loot=str(loot))}
    target = make_repo(tmp_path / "t", files)
    workflow.run("jailed", spec(target, "bwrap"))
    assert (workflow.session("jailed") / "done").exists()
    assert list(loot.iterdir()) == []

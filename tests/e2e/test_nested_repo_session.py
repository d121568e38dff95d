"""A session whose target's tests turn folders into git repositories, with a clean filter in
their config, under both gates: the filter never runs on the host and no gitlink nobody
wrote reaches the branch. (The unit tests, tests/unit/test_nested_repos.py, take each
harness path apart; this is the whole session through Snakemake.)"""

from __future__ import annotations

import pytest
from conftest import (
    CALC,
    CALC_TESTS,
    git,
    make_repo,
    one_fix,
)

from autoresearch.safety import git as ar_git

# Each run of the suite fills the empty submodule folder and makes a new nested repository,
# each with a clean filter that would leave MARKER if any git looked inside.
NESTING_TEST = """
import os
import subprocess
from pathlib import Path

MARKER = {marker!r}


def plant(folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / ".git").exists():
        return
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    (folder / "f.txt").write_text("hello\\n")
    (folder / ".gitattributes").write_text("* filter=x\\n")
    subprocess.run([*git, "add", "."], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "planted"], cwd=folder, check=True)
    subprocess.run([*git, "config", "filter.x.clean", f"touch {{MARKER}}; cat"], cwd=folder)
    (folder / "f.txt").write_text("HELLO\\n")
    os.utime(folder / "f.txt", (978307200, 978307200))


def test_plants_nested_repositories():
    plant("vendor/lib")
    plant("made-by-tests")
"""


@pytest.mark.parametrize("gate", ["per_fix", "batch"])
def test_nested_repositories_a_suite_makes_run_nothing_and_reach_no_commit(
    workflow, tmp_path, gate
):
    marker = tmp_path / "filter-ran"
    repo = make_repo(
        tmp_path / "target",
        {
            "calc.py": CALC,
            "tests/test_calc.py": CALC_TESTS,
            "tests/test_nest.py": NESTING_TEST.format(marker=str(marker)),
        },
    )
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    (repo / ".gitmodules").write_text(
        '[submodule "vendor/lib"]\n\tpath = vendor/lib\n\turl = ./nowhere\n'
    )
    git(repo, "add", ".gitmodules")
    git(repo, "commit", "-q", "-m", "a submodule")
    (repo / "vendor" / "lib").mkdir(parents=True)  # as a clone leaves an uninitialised one
    script = one_fix(run_tests=True)
    workflow.run_script(repo, script, max_cycles=1, teams=["red", "green"], test_gate=gate)

    assert not marker.exists()
    worktree = (workflow.session("s") / "worktree").resolve()
    base = git(repo, "rev-parse", "main")
    assert ar_git.git(worktree, "log", "--format=%s", f"{base}..HEAD").splitlines() == [
        "fix: [F-001] guard"
    ]
    assert ar_git.git(worktree, "diff", "--name-only", base, "HEAD").splitlines() == ["calc.py"]
    links = [e for e in ar_git.git(worktree, "ls-tree", "-r", "HEAD").splitlines() if "160000" in e]
    assert links == [f"160000 commit {sha}\tvendor/lib"]

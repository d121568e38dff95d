"""A commit holds only what the agent changed through its tools: what the target's tests
leave in the worktree (a link, a new file, an edit) is removed before anything is committed."""

from __future__ import annotations

import pytest
from conftest import (
    CALC,
    CALC_TESTS,
    GUARDED_CALC,
    git,
    make_repo,
    one_fix,
)

from autoresearch.safety import git as ar_git

# A test that leaves things behind in the worktree each time the suite runs.
LITTERING_TEST = """
import os
from pathlib import Path


def test_leaves_things_behind():
    Path("made-by-a-test.txt").write_text("left behind\\n")
    Path("README.md").write_text("rewritten by a test\\n")
    if not os.path.lexists("leak"):
        os.symlink("/etc/passwd", "leak")
"""


@pytest.mark.parametrize("gate", ["per_fix", "batch"])
def test_a_commit_holds_only_what_the_agent_wrote(workflow, tmp_path, gate):
    repo = make_repo(
        tmp_path / "target",
        {
            "calc.py": CALC,
            "README.md": "# calc\n",
            "tests/test_calc.py": CALC_TESTS,
            "tests/test_litter.py": LITTERING_TEST,
        },
    )
    script = one_fix(run_tests=True)
    workflow.run_script(repo, script, max_cycles=1, teams=["red", "green"], test_gate=gate)
    worktree = (workflow.session("s") / "worktree").resolve()
    base = git(repo, "rev-parse", "main")
    log = ar_git.git(worktree, "log", "--format=%s", f"{base}..HEAD").splitlines()
    assert log == ["fix: [F-001] guard"]
    changed = ar_git.git(worktree, "diff", "--name-only", base, "HEAD").splitlines()
    assert changed == ["calc.py"]
    assert ar_git.git(worktree, "show", "HEAD:calc.py") + "\n" == GUARDED_CALC


def test_a_file_the_tests_rewrite_after_the_agent_wrote_it_is_not_kept(workflow, tmp_path):
    rewriting = (
        "from pathlib import Path\n\n\ndef test_rewrites():\n"
        '    Path("calc.py").write_text(Path("calc.py").read_text() + "# by a test\\n")\n'
    )
    repo = make_repo(
        tmp_path / "target",
        {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "tests/test_w.py": rewriting},
    )
    script = one_fix()
    workflow.run_script(repo, script, max_cycles=1, teams=["red", "green"], test_gate="per_fix")
    green = (workflow.session("s") / "cycles/001/green-patch.md").read_text()
    assert "calc.py changed by a command after the agent wrote it" in green
    worktree = (workflow.session("s") / "worktree").resolve()
    assert ar_git.head(worktree) == git(repo, "rev-parse", "main")

"""A sweep with the model-free ruff backend keeps only what ruff's own fix would change."""

from __future__ import annotations

import subprocess

import pytest
from conftest import Workflow, git, make_repo

# CRLF line endings and no final newline; line 2 has the one diagnostic (F541).
CRLF = "def greet():\r\n    return f'hello'\r\n\r\n\r\nNAME = 'x'"
SMOKE = "import crlf\nimport noqa\nimport twins\n\n\ndef test_smoke():\n    assert crlf.greet()\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    base = tmp_path_factory.mktemp("ruff")
    repo = make_repo(
        base / "target",
        {
            "crlf.py": CRLF,
            "noqa.py": "X = 1  # noqa: E501\n",  # E501 is flake8's here: ruff does not enable it
            "twins.py": "X = f'a' + f'a'\n",
            "tests/test_smoke.py": SMOKE,
            "pyproject.toml": '[project]\nname = "t"\nversion = "0.1"\n\n'
            '[tool.ruff.lint]\nselect = ["F", "RUF100"]\n',
        },
    )
    workflow = Workflow(base / "work")
    spec = {
        "mode": "sweep",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        "max_cycles": 2,
        "teams": ["red", "green"],
        "agent": {"backend": "ruff"},
    }
    workflow.run("s", spec)
    return workflow.session("s") / "worktree"


def blob(worktree, rev: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=worktree, capture_output=True, check=True
    ).stdout


def commits_touching(worktree, path: str) -> list[str]:
    return git(worktree, "log", "--format=%H", "main..HEAD", "--", path).split()


def test_a_fix_to_a_crlf_file_without_final_newline_changes_only_the_fixed_line(sweep):
    [sha] = commits_touching(sweep, "crlf.py")
    assert blob(sweep, f"{sha}~1", "crlf.py") == CRLF.encode()
    assert blob(sweep, sha, "crlf.py") == CRLF.replace("f'hello'", "'hello'").encode()


def test_a_noqa_for_a_rule_the_target_ruff_does_not_enable_stays(sweep):
    assert commits_touching(sweep, "noqa.py") == []
    assert (sweep / "noqa.py").read_text() == "X = 1  # noqa: E501\n"


def test_two_diagnostics_of_one_rule_on_one_line_are_both_fixed(sweep):
    assert len(commits_touching(sweep, "twins.py")) == 2
    assert (sweep / "twins.py").read_text() == "X = 'a' + 'a'\n"

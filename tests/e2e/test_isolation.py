"""The target's tools see the target's settings, never the workflow's own.

Session worktrees once lived under sessions/, inside the workflow's checkout, so a target
without a pytest or ruff config of its own picked up ours. Here the folder Snakemake runs
in has a pyproject.toml whose pytest options would break any run and whose ruff rules
would report everything: neither may reach the session.
"""

from __future__ import annotations

import json

from conftest import make_repo

from autoresearch.safety import git as ar_git

WORKFLOW_CONFIG = """\
[tool.pytest.ini_options]
addopts = "--an-option-only-the-workflow-has"

[tool.ruff.lint]
select = ["ALL"]
"""

MATHS = "def double(x):\n    return 2 * x\n"
TESTS = "from maths import double\n\n\ndef test_double():\n    assert double(2) == 4\n"


def test_a_target_without_config_is_measured_with_its_own_settings(workflow, tmp_path):
    (workflow.workdir / "pyproject.toml").write_text(WORKFLOW_CONFIG)
    target = make_repo(tmp_path / "plain", {"maths.py": MATHS, "tests/test_maths.py": TESTS})
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "agent": {"backend": "ruff"},
    }
    workflow.run("iso", spec)
    session = workflow.session("iso")
    setup = (session / "setup.json").read_text()
    assert '"outcome": "passed"' in setup  # our addopts would have made pytest refuse to run
    # Which confinement the harness's git ran in here is said (Landlock's box, else bwrap).
    assert json.loads(setup)["sandbox"]["harness_git"] == ar_git.confinement()
    worktree = (session / "worktree").resolve()
    assert workflow.workdir not in worktree.parents
    findings = (session / "cycles/001/red-findings.md").read_text()
    # ruff's defaults find nothing in this code; our select = ["ALL"] would (D103, ANN201...).
    assert "D103" not in findings and "ANN" not in findings

"""The agent's own `run_tests` counts (tested.py, StageEnv.agent_tests): it is made as the
gate makes its run of the tree the agent's change would be committed as, and filed in the
same log under the same key, so the gate does not run that tree again. A tree that changed
since, a run that cannot be trusted, a run made some other way is run again by the gate."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import PATCH_REPORTS, git, make_repo

from autoresearch import modes
from autoresearch.agents.tools import Toolbox
from autoresearch.engine.stage import StageEnv
from autoresearch.gate import keep as gates
from autoresearch.gate.testrun import PASSED, TAMPERED
from autoresearch.safety import git as ar_git
from autoresearch.session import spec
from autoresearch.session.record import SetupRecord

# The suite passes when value.py says "ok"; test_local needs an ignored file to pass.
FILES = {
    ".gitignore": "local.cfg\n__pycache__/\n.pytest_cache/\n",
    "value.py": 'VALUE = "ok"\n',
    "README.md": "# value\n",
    "tests/test_value.py": (
        "from value import VALUE\n\n\ndef test_value():\n    assert VALUE == 'ok'\n"
    ),
}
BASELINE = {"outcome": "passed", "passed": 1, "failed": 0, "passing_ids": []}


class Session:
    def __init__(self, tmp_path: Path):
        repo = make_repo(tmp_path / "target", FILES)
        self.layout = modes.get("sweep").layout(tmp_path / "sessions" / "s")
        self.layout.root.mkdir(parents=True)
        self.wt = tmp_path / "wt"
        ar_git.open_worktree(repo, self.wt, "autoresearch/s", ar_git.head(repo))
        self.layout.worktree().symlink_to(self.wt)
        values = {"mode": "sweep", "test_timeout_s": 120, "commands": {"sandbox": "none"}}
        record = SetupRecord(
            "s", "sweep", "0", str(repo), "Python", "python -m pytest -q", None,
            "autoresearch/s", ar_git.head(self.wt), BASELINE, "", None, "",
        )  # fmt: skip
        self.env = StageEnv(self.layout, spec.SessionSpec(values), record, 1)
        self.runs: list[str] = []  # who made each real run of the suite
        real = self.env.run_tests

        def counted(**options):
            self.runs.append("agent" if "on_result" in options else "gate")
            return real(**options)

        self.env.run_tests = counted
        self.toolbox = Toolbox("green", self.wt, **self.env.toolbox_options())

    def agent(self, tool: str, **args) -> str:
        result = self.toolbox.call(tool, args)
        return result.content

    def fix(self, value: str) -> None:
        self.agent("write_file", path="value.py", content=f'VALUE = "{value}"  # fixed\n')

    def gate_check(self) -> bool:
        """finish_fix's gate: the agent's writes alone, staged, then the per-fix gate."""
        self.env.protection.keep_written(self.wt, self.toolbox.written)
        return gates.TestGate(self.env, self.env.reference_tests()).check().ok

    def filed(self) -> list[dict]:
        path = self.layout.test_runs
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return Session(tmp_path)


def test_the_gate_does_not_run_again_the_tree_the_agent_ran_its_tests_on(session):
    session.fix("ok")
    (session.wt / "docs.md").write_text("# docs\n")
    assert "exit code: 0" in session.agent("run_tests")
    assert session.gate_check()
    session.env.protection.commit(session.wt, "fix", staged=True)
    sha = ar_git.head(session.wt)
    assert session.env.measure_tests(uncached=True, reuse=True).ok  # Green's final run
    assert session.runs == ["agent"]
    [entry] = session.filed()
    assert entry["by"] == "agent" and entry["run"]["outcome"] == PASSED
    assert entry["head"] == git(session.wt, "rev-parse", f"{sha}~1")
    assert entry["tree"] == git(session.wt, "rev-parse", f"{sha}^{{tree}}")
    assert entry["selection"] == "" and entry["overlay"] == "" and entry["uncached"]


def test_the_agents_change_is_left_unstaged_and_what_commands_left_is_gone(session):
    session.fix("ok")
    (session.wt / "local.cfg").write_text("left by a command\n")
    session.agent("run_tests")
    assert git(session.wt, "diff", "--cached", "--name-only") == ""
    assert git(session.wt, "diff", "--name-only") == "value.py"
    assert not (session.wt / "local.cfg").exists()


def test_a_broken_tree_the_agent_ran_is_refused_without_a_second_run(session):
    session.fix("broken")
    assert "1 failed" in session.agent("run_tests")
    assert not session.gate_check()
    assert session.runs == ["agent"]


def test_a_pass_the_agent_saw_after_a_failure_of_its_own_is_checked_by_the_gates_run(session):
    # A suite that passes only some of the time: the agent could rerun it on a trivially
    # different tree until it passes, and hand in then. That pick is not the gate's run.
    session.fix("broken")
    assert "1 failed" in session.agent("run_tests")
    session.fix("ok")
    assert "exit code: 0" in session.agent("run_tests")
    assert session.gate_check()
    assert session.runs == ["agent", "agent", "gate"]


def test_a_failure_while_making_an_earlier_change_does_not_hold_a_later_pass(session):
    session.fix("broken")
    session.agent("run_tests")
    session.fix("ok")
    assert session.gate_check()
    session.env.protection.commit(session.wt, "fix", staged=True)
    session.agent("write_file", path="README.md", content="# value, documented\n")
    session.agent("run_tests")
    assert session.gate_check()
    assert session.runs == ["agent", "gate", "agent"]


def test_a_tree_edited_after_the_agents_run_is_run_again(session):
    session.fix("broken")
    session.agent("run_tests")
    session.fix("ok")
    assert session.gate_check()
    assert session.runs == ["agent", "gate"]
    assert [e.get("by") for e in session.filed()] == ["agent", None]


def test_a_pass_that_needs_a_file_a_command_left_is_no_pass_for_the_agent_either(session):
    session.agent(
        "write_file",
        path="tests/test_local.py",
        content="from pathlib import Path\n\n\ndef test_local():\n"
        "    assert Path('local.cfg').exists()\n",
    )
    (session.wt / "local.cfg").write_text("present\n")
    assert "1 failed" in session.agent("run_tests")
    assert not session.gate_check()
    assert session.runs == ["agent"]


def test_a_change_the_agent_did_not_write_keeps_its_run_out_of_the_log(session):
    session.fix("ok")
    (session.wt / "README.md").write_text("# rewritten by a command\n")
    session.agent("run_tests")
    assert session.filed() == []
    assert (session.wt / "README.md").read_text() == "# rewritten by a command\n"
    assert session.gate_check()  # keep_written restores README.md: the gate runs its tree
    assert session.runs == ["agent", "gate"]


@pytest.mark.parametrize("folder", ["build", "nested"])
def test_a_file_the_agent_wrote_in_a_folder_git_shows_whole_is_never_removed(session, folder):
    # An ignored folder, or a nested repository: git status names the folder, not the file.
    (session.wt / ".gitignore").write_text(FILES[".gitignore"] + "build/\n")
    git(session.wt, "commit", "-qam", "ignore build")
    if folder == "nested":
        (session.wt / "nested").mkdir()
        git(session.wt / "nested", "init", "-q")
    options = session.env.toolbox_options() | {"allow_ignored_writes": True}
    box = Toolbox("green", session.wt, **options)
    assert not box.call("write_file", {"path": f"{folder}/notes.txt", "content": "mine\n"}).is_error
    box.call("run_tests", {})
    assert (session.wt / folder / "notes.txt").read_text() == "mine\n"
    assert session.filed() == []


def test_a_file_the_agent_wrote_and_a_command_changed_since_keeps_its_run_out(session):
    session.fix("ok")
    (session.wt / "value.py").write_text('VALUE = "ok"  # changed by a command\n')
    session.agent("run_tests")
    assert session.filed() == []


@pytest.mark.parametrize(
    "other",
    [
        {"test_command": "python -m pytest -q -k value"},  # a selection
        {"test_command": "python -m pytest -q tests/test_value.py"},  # a path
        {"test_timeout_s": 5},
        {"secrets": ["EXTRA_TOKEN"]},
    ],
)
def test_a_run_made_any_other_way_is_not_filed_for_the_gate(session, other):
    options = session.env.toolbox_options() | other
    box = Toolbox("green", session.wt, **options)
    box.call("write_file", {"path": "value.py", "content": 'VALUE = "ok"\n'})
    assert "exit code: 0" in box.call("run_tests", {}).content
    assert session.filed() == []


def test_an_experiments_blinded_jail_is_not_the_gates_so_its_run_is_not_filed(session):
    options = session.env.toolbox_options()
    options["jail"] = replace(options["jail"], hide=(session.wt / "holdout",))
    box = Toolbox("green", session.wt, **options)
    box.call("run_tests", {})
    assert session.filed() == []


def test_run_tests_takes_no_selection(session):
    result = session.toolbox.call("run_tests", {"k": "value"})
    assert result.is_error
    assert session.runs == [] and session.filed() == []


def test_a_tampered_run_of_the_agent_never_stands_for_the_tree(session):
    session.agent("write_file", path="value.py", content='VALUE = "broken"\n' + PATCH_REPORTS)
    out = session.agent("run_tests")
    assert "cannot trust this run" in out
    assert [e["run"]["outcome"] for e in session.filed()] == [TAMPERED]
    git(session.wt, "add", "value.py")  # past the tamper screen, as if it let it through
    verdict = gates.TestGate(session.env, session.env.reference_tests()).check()
    assert not verdict.ok
    assert session.runs == ["agent", "gate"]


def test_a_tree_the_agent_ran_twice_runs_once(session):
    session.fix("ok")
    session.agent("run_tests")
    again = session.agent("run_tests")
    assert "tested before in this session" in again and "exit code: 0" in again
    assert session.runs == ["agent"]

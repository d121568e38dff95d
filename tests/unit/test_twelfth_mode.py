"""docs/architecture.md's twelfth mode is one file of hooks on the one loop: its block,
loaded as a module of the modes package (never written into it) and registered for the
test, runs real steps through the one job every deciding rule runs (scripts/step.py): a
commit through the protection check, decision.json last, the stop rule, session.md through
its views. Its rules file is found from the registry and names only input functions every
loop shares: adding it touches its file, its rules file and one registry line."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import git, make_repo

from autoresearch import modes
from autoresearch.engine import loop
from autoresearch.engine.stage import StageEnv
from autoresearch.modes.base import Mode
from autoresearch.safety.protect import ProtectedChange
from autoresearch.session import spec
from autoresearch.session.record import SetupRecord
from scripts import step as step_job

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- twelfth-mode:"


def example_source() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    after = text.split(MARKER, 1)[1]
    return after.split("```python\n", 1)[1].split("\n```", 1)[0]


def rules_block() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    after = text.split("<!-- twelfth-mode-rules:", 1)[1]
    return after.split("```\n", 1)[1].split("\n```", 1)[0]


MODULE = "_twelfth_example"
# The frozen spec's keys a step reads (setup writes the whole spec; a step needs these).
SPEC = {"agent": {"backend": "ruff"}, "protected": ["keep.py"], "test_timeout_s": 60}


@pytest.fixture
def tidy(tmp_path, monkeypatch) -> Mode:
    """The block as `autoresearch.modes._twelfth_example` (its relative imports are the
    package's), in the registry for this test only."""
    path = tmp_path / "pkg" / "tidy.py"
    path.parent.mkdir()
    path.write_text(example_source())
    name = f"autoresearch.modes.{MODULE}"
    found = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(found)
    monkeypatch.setitem(sys.modules, name, module)
    found.loader.exec_module(module)
    monkeypatch.setitem(modes.MODES, "tidy", f"{MODULE}:Tidy")
    monkeypatch.chdir(tmp_path)  # sessions/ is the workflow's working directory's
    return modes.get("tidy")


def session(tmp_path: Path, mode: Mode, files: dict[str, str]):
    """A set-up session of the mode on a target repo: its frozen spec, its setup record."""
    target = make_repo(tmp_path / "target", files)
    base = git(target, "rev-parse", "HEAD")
    repo = tmp_path / "wt"  # the session's worktree, on the mode's branch
    git(target, "worktree", "add", "-q", "-b", mode.setup.branch_name("t"), str(repo))
    layout = mode.layout(tmp_path / "sessions" / "t")
    layout.root.mkdir(parents=True)
    (layout.root / "worktree").symlink_to(repo)
    record = SetupRecord(
        "t", mode.name, "0.1.0", str(target), None, "true", None, mode.setup.branch_name("t"), base,
        {}, "", None, "",
    )  # fmt: skip
    layout.setup.write_text(json.dumps(asdict(record)))
    layout.spec.write_text(yaml.safe_dump(SPEC | {"mode": mode.name}))
    return repo, base, lambda cycle: StageEnv(layout, spec.load_frozen(layout.spec), record, cycle)


class Named(list):
    """As Snakemake hands a job its files: a list whose items are also attributes."""

    def __init__(self, **files):
        super().__init__(files.values())
        self.__dict__.update(files)


def step(env: StageEnv) -> loop.Decision:
    """One step, as its checkpoint's `run:` runs it: scripts.step.decide."""
    folder = env.layout.cycle(env.cycle)
    folder.mkdir(parents=True, exist_ok=True)
    output = Named(results=folder / "tidy.txt", decision=folder / "decision.json")
    wildcards = {"name": env.layout.name, "cycle": f"{env.cycle:03d}"}
    log = [f"sessions/{env.layout.name}/logs/tidy_step/{env.cycle:03d}.log"]
    step_job.decide(SimpleNamespace(items=wildcards.items), Named(), output, log)
    return loop.read_decision(output.decision)


def test_the_twelfth_mode_of_the_docs_runs_its_steps_on_the_one_loop(tmp_path, tidy):
    assert tidy.decide_checkpoint == "tidy_step"
    repo, base, env_at = session(tmp_path, tidy, {"a.py": "x = 1   \n", "b.py": "y = 2\n"})

    first = step(env_at(1))
    assert first.status is loop.Status.KEPT and not first.stop
    assert first.end_commit == git(repo, "rev-parse", "HEAD") != base
    assert git(repo, "log", "-1", "--format=%s") == "tidy: trailing whitespace"
    assert (repo / "a.py").read_text() == "x = 1\n"
    on_disk = json.loads(env_at(1).layout.decision(1).read_text())
    assert on_disk["status"] == "kept" and on_disk["end_commit"] == first.end_commit
    assert (env_at(1).layout.cycle(1) / "tidy.txt").read_text() == "kept\n"
    assert "## Tidy" in env_at(1).layout.summary.read_text()  # session.md, its views'

    second = step(env_at(2))  # starts where the first ended: nothing left
    assert second.status is loop.Status.NO_CHANGE and second.start_commit == first.end_commit
    assert second.stop and second.reason == "nothing left to tidy"
    assert git(repo, "rev-list", "--count", f"{base}..HEAD") == "1"


def test_the_twelfth_modes_commit_goes_through_the_protection_check(tmp_path, tidy):
    # Its one commit path is the harness's: a protected file it changed is restored and the
    # step is refused, the decision never written.
    repo, base, env_at = session(tmp_path, tidy, {"keep.py": "z = 3  \n"})
    with pytest.raises(ProtectedChange, match="keep.py"):
        step(env_at(1))
    assert git(repo, "rev-parse", "HEAD") == base
    assert (repo / "keep.py").read_text() == "z = 3  \n"
    assert not env_at(1).layout.decision(1).exists()


def test_the_twelfth_modes_rules_file_is_included_from_its_registry_line(tmp_path, tidy):
    # The Snakefile includes rules/<mode>.smk for each registered mode that has one: the new
    # file is found once its registry line is there, and not before.
    from scripts import common

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "tidy.smk").write_text(rules_block())
    (rules / "orphan.smk").write_text(rules_block())  # no registry line: not included
    assert common.mode_rules(str(tmp_path)) == [str(rules / "tidy.smk")]
    assert "rules/tidy.smk" not in (ROOT / "Snakefile").read_text()


def test_the_twelfth_modes_rule_names_only_input_functions_every_loop_shares():
    # Nothing to add to rules/common.smk: each input function the block calls is defined
    # there, and its job is the one deciding job.
    block = rules_block()
    common = (ROOT / "rules" / "common.smk").read_text()
    called = set(re.findall(r"^\s+(?:unpack\()?(\w+)\(", block.split("output:")[0], re.M))
    assert called == {"previous_step", "state"}
    for name in called:
        assert f"\ndef {name}(" in common, name
    assert "run: scripts.step.decide(wildcards, input, output, log)" in block

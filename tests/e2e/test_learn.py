"""The learn lens through Snakemake: docs checked against the code, a person's docs untouched."""

from __future__ import annotations

import json

from conftest import CALC, CALC_TESTS, git, make_repo

from autoresearch.safety import git as gitops

PERSON = "# Overview\n\nWritten by hand: see `calc.add`.\n"
GUIDE = "# Guide\n\nCall `calc.divide` from `src/main.py`; see [setup](setup.md).\n"


def target(tmp_path):
    return make_repo(
        tmp_path / "target",
        {
            "calc.py": CALC,
            "tests/test_calc.py": CALC_TESTS,
            "README.md": "# calc\n\nAdds numbers with `calc.add`.\n",
            "docs/overview.md": PERSON,
            "docs/guide.md": GUIDE,
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
        },
    )


def learn_spec(repo, workflow, mode, script=None):
    agent = {"backend": "ruff"}
    if script is not None:
        agent = {
            "backend": "script",
            "script": str(workflow.script(script)),
            "transcript": str(workflow.workdir / "t.jsonl"),
        }
    return {
        "mode": "learn",
        "target": str(repo),
        "test_command": "python -m pytest -q",
        "learn": {"mode": mode},
        "agent": agent,
    }


def files_of(repo):
    """Every file of the checkout, byte for byte (git's own records aside)."""
    return {
        p.relative_to(repo): p.read_bytes()
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def test_check_reports_each_doc_and_leaves_the_target_byte_identical(workflow, tmp_path):
    repo = target(tmp_path)
    before, snapshot = files_of(repo), gitops.snapshot(repo)
    workflow.run("c", learn_spec(repo, workflow, "check"))
    assert files_of(repo) == before and gitops.snapshot(repo) == snapshot
    session = workflow.session("c")
    health = (session / "docs-health.md").read_text()
    assert "| docs/overview.md | a person |" in health
    assert "symbol `calc.divide`: no divide in calc" in health
    assert "path `src/main.py`: no file src/main.py in the worktree" in health
    assert "link `setup.md`" in health
    done = (session / "done").read_text()
    assert "target unchanged" in done and "doc problems: 3" in done
    assert git(session / "worktree", "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")


ARCH_BAD = "# Architecture\n\nEverything is in `calc.missing`.\n"
ARCH_GOOD = (
    "# Architecture\n\n`calc.add` and `calc.mean` live in `calc.py`.\n\n"
    "```mermaid\nflowchart LR\n    caller --> add\n    caller --> mean\n```\n"
)


def write(path, content):
    return {"tool": "write_file", "args": {"path": path, "content": content}}


FINISH = {"tool": "finish_docs", "args": {"summary": "architecture"}}


def test_init_checks_each_doc_sends_failures_back_and_never_edits_a_persons_doc(workflow, tmp_path):
    repo = target(tmp_path)
    script = {
        "learn": {
            1: [
                write("docs/overview.md", "# mine now\n"),  # refused: a person wrote it
                write("docs/architecture.md", ARCH_BAD),
                FINISH,  # fails: calc.missing does not exist
                write("docs/architecture.md", ARCH_GOOD),
                FINISH,
            ]
        }
    }
    workflow.run("i", learn_spec(repo, workflow, "init", script))
    session = workflow.session("i")
    setup = json.loads((session / "lens-setup.json").read_text())
    assert "docs/overview.md" not in [t["doc"] for t in setup["targets"]]
    first = json.loads((session / "learn/001/decision.json").read_text())
    assert first["status"] == "kept" and first["after"] == 1.0
    assert len(first["rounds"]) == 2
    assert any("symbol calc.missing" in f for f in first["rounds"][0]) and first["rounds"][1] == []
    worktree = session / "worktree"
    assert (worktree / "docs/overview.md").read_text() == PERSON
    assert (worktree / "docs/architecture.md").read_text().startswith("---\ngenerated-by: ")
    assert git(worktree, "log", "--format=%s").splitlines()[0] == (
        "docs: docs/architecture.md — score 0.00 → 1.00"
    )
    briefs = [b for b in workflow.transcript(workflow.workdir / "t.jsonl") if b["team"] == "learn"]
    assert len(briefs) == 3  # architecture, code standards, codebase summary
    assert "docs kept: 1 (docs/architecture.md)" in (session / "done").read_text()

"""Every harness reader of a target's files refuses a committed link out of the worktree:
the linked file's content shows up in none of its outputs, and the refusal is said plainly
where it matters."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import git, make_repo

SECRET = "SECRETKEYdeadbeef"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A key file outside any worktree; every line of it carries SECRET."""
    path = tmp_path / "outside" / "secret.key"
    path.parent.mkdir()
    path.write_text(
        f"{SECRET}==1.0\n"
        f'[project]\nname = "{SECRET}"\nversion = "{SECRET}"\n'
        f'dependencies = ["{SECRET}"]\n'
        f"password = {SECRET}\n"
        f"# {SECRET}\n"
    )
    return path


def repo_with_links(tmp_path: Path, files: dict[str, str], links: dict[str, Path]) -> Path:
    """A git repo with `files` and committed symlinks `name -> target` (the user's report)."""
    repo = make_repo(tmp_path / "repo", files)
    for name, target in links.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).symlink_to(target)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links")
    return repo


# --- the security lens's recon ---------------------------------------------------------------


def test_recon_reads_no_linked_file_and_notes_each_one(tmp_path, secret):
    from autoresearch.modes.security import recon

    repo = repo_with_links(
        tmp_path,
        {"app.py": "import os\nTOKEN = os.environ['T']\n"},
        {"requirements.txt": secret, "pyproject.toml": secret, "settings.py": secret},
    )
    found = recon.scan(repo)
    surface = recon.attack_surface_md(found)
    setup = json.dumps(found.to_dict())
    assert SECRET not in surface and SECRET not in setup
    assert SECRET not in " ".join(found.dependencies + found.entry_points)
    notes = "\n".join(found.unread)
    for name in ("requirements.txt", "pyproject.toml", "settings.py"):
        assert f"{name}: not read: '{name}' leads outside the repository" in notes
    assert "Files not read" in surface and "requirements.txt: not read" in surface
    assert "app.py:2" in found.secret_handling  # the repository's own files are still read


def test_the_auditors_brief_names_the_files_recon_did_not_read(tmp_path, secret):
    from autoresearch.modes.lens.loop import Focus
    from autoresearch.modes.security import Security, recon

    repo = repo_with_links(tmp_path, {"app.py": "x = 1\n"}, {"requirements.txt": secret})
    setup = {"recon": recon.scan(repo).to_dict(), "critical_assets": ["credentials"]}
    env = SimpleNamespace(cycle=1, layout=SimpleNamespace(completed_cycles=lambda: []))
    brief = json.dumps(Security().brief(env, Focus("S", "spoofing", {}), setup))
    assert SECRET not in brief
    assert "requirements.txt: not read: 'requirements.txt' leads outside" in brief


def test_recon_notes_a_fifo_named_like_a_dependency_file_without_blocking(tmp_path):
    from autoresearch.modes.security import recon

    repo = make_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    os.mkfifo(repo / "requirements.txt")
    found = recon.scan(repo)
    assert found.dependencies == []
    assert any("requirements.txt: not read" in n and "FIFO" in n for n in found.unread)


# --- the ship gates ---------------------------------------------------------------------------


def _ship_context(repo: Path):
    from autoresearch.modes.ship.gates import Context

    return Context(repo, git(repo, "rev-parse", "HEAD~1"), 60, [], ())


def test_the_version_gate_fails_on_a_linked_pyproject_without_reading_it(tmp_path, secret):
    from autoresearch.modes.ship import gates

    repo = repo_with_links(tmp_path, {"a.py": "x = 1\n"}, {"pyproject.toml": secret})
    result = gates.run_one(gates.Gate("version", "builtin", ""), _ship_context(repo))
    assert result.status == gates.FAIL
    assert "pyproject.toml: not read" in result.detail and "leads outside" in result.detail
    assert SECRET not in result.detail
    assert gates.version_of(repo) is None


def test_the_changelog_gate_fails_on_a_linked_changelog_even_if_it_names_the_version(
    tmp_path, secret
):
    from autoresearch.modes.ship import gates

    # The secret names the version: read through the link, the gate would pass.
    repo = repo_with_links(
        tmp_path,
        {"pyproject.toml": f'[project]\nname = "x"\nversion = "{SECRET}"\n'},
        {"CHANGELOG.md": secret},
    )
    result = gates.run_one(gates.Gate("changelog", "builtin", ""), _ship_context(repo))
    assert result.status == gates.FAIL
    assert result.detail.startswith("CHANGELOG.md: not read: 'CHANGELOG.md' leads outside")


# --- the learn lens's docs reader -------------------------------------------------------------


def test_learn_config_keys_skip_and_note_a_linked_config(tmp_path, secret):
    from autoresearch.modes.learn import docs

    (tmp_path / "outside" / "conf.json").write_text(json.dumps({SECRET: 1}))
    repo = repo_with_links(
        tmp_path, {"own.json": '{"port": 1}'}, {"conf.json": tmp_path / "outside" / "conf.json"}
    )
    unread: list[str] = []
    keys = docs.config_keys(repo, ["own.json", "conf.json"], unread)
    assert keys == {"port"}
    assert unread and unread[0].startswith("conf.json: not read")


def test_learn_health_of_a_linked_doc_is_a_failed_read_check(tmp_path, secret):
    from autoresearch.modes.learn import docs

    repo = repo_with_links(tmp_path, {"a.py": "x = 1\n"}, {"README.md": secret})
    health = docs.health("README.md", repo, docs.Rules())
    assert health.lines == 0 and health.score == 0.0
    assert [(c.kind, c.ok) for c in health.report.checks] == [("read", False)]
    assert "leads outside" in health.report.checks[0].reason
    assert SECRET not in json.dumps([c.reason + c.subject for c in health.report.checks])


def test_learn_stage_sees_a_linked_doc_as_absent(tmp_path, secret):
    from autoresearch.modes.learn import stages

    repo = repo_with_links(tmp_path, {"a.py": "x = 1\n"}, {"docs/overview.md": secret})
    assert stages.read_if_any(repo, "docs/overview.md") is None
    assert stages.read_if_any(repo, "a.py") == "x = 1\n"


def test_doc_checks_do_not_read_a_hard_link_to_a_file_outside(tmp_path):
    from autoresearch.modes.learn import doc_checks

    outside = tmp_path / "outside.md"
    outside.write_text(f"# {SECRET}\nline 2\nline 3\n")
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    os.link(outside, repo / "notes.md")  # what a target's command could leave behind
    doc = f"See [notes](notes.md#{SECRET.lower()}) and `notes.md:3`.\n"
    report = doc_checks.check_doc("README.md", doc, repo, None)
    failed = {c.kind: c.reason for c in report.failures}
    # Read through the link, the anchor and the line number would both check out.
    assert "not read" in failed["link"] and "hard link" in failed["link"]
    assert "not read" in failed["path"]


# --- the ruff backend -------------------------------------------------------------------------


def test_ruff_diagnostics_say_nothing_about_a_linked_file(tmp_path):
    from autoresearch.agents.backends.ruff import diagnostics

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keys.py").write_text(f"import {SECRET}\n")
    repo = repo_with_links(
        tmp_path, {"own.py": "import os\n"}, {"linked.py": tmp_path / "outside" / "keys.py"}
    )
    found = diagnostics(repo, extend=["F401"])
    assert [Path(d["filename"]).name for d in found] == ["own.py"]
    assert SECRET not in json.dumps(found)


def test_ruff_refactor_does_not_read_a_linked_file(tmp_path):
    from autoresearch.agents.backends.ruff import RuffBackend

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keys.py").write_text(f"x=  '{SECRET}'\n")
    repo = repo_with_links(
        tmp_path, {"own.py": "x = 1\n"}, {"linked.py": tmp_path / "outside" / "keys.py"}
    )
    calls, notes = [], []
    toolbox = SimpleNamespace(call=lambda name, args: calls.append((name, args)))
    brief = SimpleNamespace(data={"changed_files": ["linked.py"]})
    backend = RuffBackend()
    files = backend._formattable(repo, brief, notes.append)
    assert files == []
    assert backend._refactor(repo, files, toolbox, notes.append) == 0
    assert calls == []
    assert notes == [
        "linked.py: not read: 'linked.py' leads outside the repository (through a symlink)"
    ]


# --- the agents' conventions, the spec and stack detection ------------------------------------


def test_conventions_for_the_agents_leave_out_a_linked_claude_md(tmp_path, secret):
    from autoresearch.session.start import read_conventions

    repo = repo_with_links(tmp_path, {"README.md": "# Calc\n"}, {"CLAUDE.md": secret})
    notes: list[str] = []
    text = read_conventions(repo, notes.append)
    assert SECRET not in text
    assert text == "--- README.md ---\n# Calc"
    assert notes == [
        "conventions: CLAUDE.md: not read: 'CLAUDE.md' leads outside the repository "
        "(through a symlink)"
    ]


def test_a_linked_target_config_is_a_spec_error_naming_the_file(tmp_path, secret):
    from autoresearch.errors import SpecError
    from autoresearch.session import spec

    (tmp_path / "outside" / "conf.yml").write_text(f"{SECRET}: 1\ntest_command: x\n")
    repo = repo_with_links(
        tmp_path, {"a.py": "x = 1\n"}, {".autoresearch.yml": tmp_path / "outside" / "conf.yml"}
    )
    found = spec.Spec(values={})
    with pytest.raises(SpecError) as err:
        spec._target_layer(repo, found)
    assert str(err.value) == (
        f"{repo / '.autoresearch.yml'}: the target's config is not read: '.autoresearch.yml' "
        "leads outside the repository (through a symlink)"
    )
    assert SECRET not in " ".join(found.warnings)


def test_stack_detection_reads_no_linked_pytest_or_package_config(tmp_path):
    from autoresearch.session import stack

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n'
    )
    (outside / "package.json").write_text('{"scripts": {"test": "jest"}}')
    repo = repo_with_links(
        tmp_path,
        {"a.py": "x = 1\n"},
        {"pyproject.toml": outside / "pyproject.toml", "package.json": outside / "package.json"},
    )
    # Read through the links, both answers would come from the files outside.
    assert stack.pytest_addopts(repo) == ""
    assert stack.package_test_script_is_jest(repo) is False


def test_plan_reads_no_linked_package_json(tmp_path):
    from autoresearch.session import plan

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "package.json").write_text('{"scripts": {"bench": "x"}}')
    repo = repo_with_links(
        tmp_path, {"a.py": "x = 1\n"}, {"package.json": tmp_path / "outside" / "package.json"}
    )
    assert plan._npm_script(repo, "bench") is False


# --- metrics, findings' locations, test reports -----------------------------------------------


def test_a_json_file_metric_linked_out_is_not_read(tmp_path):
    from autoresearch.measure import metrics

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "score.json").write_text('{"score": 42}')
    repo = repo_with_links(
        tmp_path, {"a.py": "x = 1\n"}, {"out.json": tmp_path / "outside" / "score.json"}
    )
    with pytest.raises(metrics.MetricError, match="json_file out.json: not read: .* leads outside"):
        metrics.parse_value("", "json_file:out.json", "score", repo)


def test_a_finding_location_in_a_hard_link_out_is_not_counted(tmp_path):
    from autoresearch.checks.finding_schema import _Places
    from autoresearch.engine import findings

    outside = tmp_path / "outside.py"
    outside.write_text("1\n2\n3\n4\n5\n")
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    os.link(outside, repo / "b.py")
    # Counted through the link, line 5 would exist: an oracle on the file outside.
    assert "not read" in findings.location_problem("b.py:5", repo)
    assert "not read" in (_Places(repo).resolve("b.py:5")[2] or "")
    assert findings.location_problem("a.py:1", repo) is None
    assert _Places(repo).resolve("a.py:1") == ("a.py", 1, None)


JEST = (
    '{"testResults": [{"name": "a.test.js", "status": "passed", "assertionResults": '
    f'[{{"title": "test_{SECRET}", "status": "passed", "ancestorTitles": []}}]}}]}}'
)


def test_test_reports_left_as_links_out_are_not_read(tmp_path, monkeypatch):
    from autoresearch.gate import testrun

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "report.json").write_text(JEST)
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n", "package.json": "{}\n"})
    # A stand-in jest that leaves, where its report goes, a link to a file outside. The
    # report is a named pipe the harness reads as the run goes, never the file at that path
    # afterwards, so a link put there is not read.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "jest").write_text(
        "#!/bin/sh\nfor a; do case $a in --outputFile=*) out=${a#--outputFile=};; esac; done\n"
        f'rm -f "$out"; ln -s {tmp_path}/outside/report.json "$out"; exit 1\n'
    )
    (fake / "jest").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    result = testrun.run_tests("jest", repo, stack="Node/TS", timeout_s=60)
    assert "/autoresearch-report-" in result.ran.partition("--outputFile=")[2]
    assert result.passing_ids is None and result.source != "jest-json"
    assert (tmp_path / "outside" / "report.json").read_text() == JEST


# --- experiment and fix -----------------------------------------------------------------------


def test_a_linked_program_md_is_neither_config_nor_research(tmp_path, secret):
    from autoresearch.errors import SpecError
    from autoresearch.modes.experiment import program

    repo = repo_with_links(tmp_path, {"a.py": "x = 1\n"}, {"program.md": secret})
    values = {"experiment": {"program": "program.md"}}
    with pytest.raises(SpecError, match="'experiment.program': not read: .* leads outside"):
        program.resolve(values, repo, "session.yaml")
    assert program.research_text(repo / "program.md", "fallback", repo) == "fallback"


def test_syntax_check_names_a_linked_file_as_not_read(tmp_path):
    from autoresearch.modes.experiment.policy import syntax_problems

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "ok.py").write_text("x = 1\n")
    repo = repo_with_links(tmp_path, {"a.py": "x = 1\n"}, {"b.py": tmp_path / "outside" / "ok.py"})
    # Parsed through the link, b.py would pass as good Python.
    assert syntax_problems(repo, ["a.py", "b.py"]) == [
        "b.py: not read: 'b.py' leads outside the repository (through a symlink)"
    ]


def test_a_bug_whose_file_became_a_link_out_is_still_present(tmp_path):
    from autoresearch.modes.fix.count import HandedBug, count_handed

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "clean.py").write_text("x = 1\n")
    repo = repo_with_links(
        tmp_path, {"a.py": "x = 1\n"}, {"b.py": tmp_path / "outside" / "clean.py"}
    )
    bug = HandedBug("F-1", "eval on input", "high", "b.py", 1, evidence="eval(data)")
    # Read through the link, the quoted code is gone and the bug would count as fixed.
    assert [e.file for e in count_handed([bug], repo, "true", None).errors] == ["b.py"]


def test_fix_reproductions_never_write_or_delete_through_a_linked_scratch_folder(tmp_path):
    from autoresearch.modes.fix.count import SCRATCH, HandedBug, count_handed

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("a file of the user's\n")
    repo = repo_with_links(tmp_path, {"a.py": "x = 1\n"}, {SCRATCH: outside})
    bug = HandedBug("F-1", "t", "high", "a.py", 1, reproduction="def test_x():\n    pass\n")
    count_handed([bug], repo, "true {file}", None)
    # Through the link, the reproduction went outside and the clean-up emptied the folder.
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert not (repo / SCRATCH).exists() and not (repo / SCRATCH).is_symlink()


def test_learn_writes_no_doc_through_a_linked_docs_folder(tmp_path):
    from autoresearch.modes.learn import stages

    outside = tmp_path / "outside"
    outside.mkdir()
    repo = repo_with_links(tmp_path, {"a.py": "x = 1\n"}, {"docs": outside})
    refusal = stages.write_doc(repo, "docs/overview.md", "# Overview\n")
    assert refusal == "'docs/overview.md' leads outside the repository (through a symlink)"
    assert list(outside.iterdir()) == []
    assert stages.write_doc(repo, "README.md", "# Calc\n") is None
    assert (repo / "README.md").read_text() == "# Calc\n"

"""The spec's layers and provenance, the `autoresearch` command, the resume version rule."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, make_repo

from autoresearch.cli import main as cli_main
from autoresearch.session import spec as specs


def write_layers(tmp_path, target_cfg: dict, session_cfg: dict):
    root = tmp_path / "wf"
    (root / "config" / "sessions").mkdir(parents=True)
    (root / "config" / "config.yaml").write_text((ROOT / "config/config.yaml").read_text())
    (root / "config" / "schema.yaml").write_text((ROOT / "config/schema.yaml").read_text())
    (root / "config" / "sessions" / "x.yaml").write_text(yaml.safe_dump(session_cfg))
    repo = make_repo(tmp_path / "repo", {".autoresearch.yml": yaml.safe_dump(target_cfg)})
    return root, repo


def test_precedence_defaults_target_session_cli(tmp_path):
    root, repo = write_layers(
        tmp_path,
        {"max_cycles": 2, "test_command": "make check", "teams": ["red", "green"]},
        {"target": "PLACEHOLDER", "max_cycles": 3},
    )
    session = root / "config/sessions/x.yaml"
    session.write_text(session.read_text().replace("PLACEHOLDER", str(repo)))
    merged = specs.load("x", root, {"test_command": "pytest -x"})
    assert merged.values["max_cycles"] == 3  # session beats target
    assert merged.values["teams"] == ["red", "green"]  # target beats defaults
    assert merged.values["test_command"] == "pytest -x"  # --config beats all
    assert merged.values["max_findings"] == 15  # defaults fill the rest
    assert merged.source_of("teams").endswith(".autoresearch.yml")


def test_target_teams_without_green_warns_and_uses_defaults(tmp_path):
    root, repo = write_layers(tmp_path, {"teams": ["red", "refactor"]}, {"target": "P"})
    merged = specs.load("x", root, {"target": str(repo)})
    assert merged.values["teams"] == ["red", "green", "refactor"]
    assert any("red and green are required" in w for w in merged.warnings)


def test_invalid_value_names_the_file_that_set_it(tmp_path):
    root, repo = write_layers(tmp_path, {"max_cycles": "many"}, {"target": "P"})
    with pytest.raises(specs.SpecError, match=r"\.autoresearch\.yml: key 'max_cycles'"):
        specs.load("x", root, {"target": str(repo)})


def test_a_misspelt_mode_gets_a_did_you_mean_as_a_misspelt_key_does(tmp_path):
    root, repo = write_layers(tmp_path, {}, {"target": "P", "mode": "sweeep"})
    with pytest.raises(specs.SpecError) as caught:
        specs.load("x", root, {"target": str(repo)})
    message = str(caught.value)
    assert message.startswith("config/sessions/x.yaml: key 'mode': 'sweeep' is not one of")
    assert message.endswith("; did you mean 'sweep'?")


def test_a_key_written_a_section_too_high_is_pointed_to_its_section(tmp_path):
    """`experiment.command` is `experiment.metric.command`, not the closest spelling."""
    spec = {"target": "P", "mode": "experiment", "experiment": {"command": "python m.py"}}
    root, repo = write_layers(tmp_path, {}, spec)
    with pytest.raises(specs.SpecError) as caught:
        specs.load("x", root, {"target": str(repo)})
    assert str(caught.value) == (
        "config/sessions/x.yaml: unknown key 'experiment.command'; "
        "did you mean 'experiment.metric.command'?"
    )


def test_a_mode_asked_for_by_name_gets_a_did_you_mean():
    from autoresearch import modes

    with pytest.raises(ValueError, match=r"unknown mode 'narow'; did you mean 'narrow'\?"):
        modes.get("narow")


def checkout(tmp_path):
    """A workflow folder as `autoresearch new` finds it: a Snakefile and config/."""
    root = tmp_path / "wf"
    (root / "config").mkdir(parents=True)
    (root / "Snakefile").write_text("# the workflow\n")
    (root / "config" / "config.yaml").write_text((ROOT / "config/config.yaml").read_text())
    return root


def test_new_writes_a_commented_spec_that_runs_without_a_key(tmp_path, monkeypatch, target):
    root = checkout(tmp_path)
    monkeypatch.chdir(root)
    assert cli_main(["new", "foo", "--target", str(target), "--mode", "sweep"]) == 0
    text = (root / "config/sessions/foo.yaml").read_text()
    assert "# Session spec for 'foo'" in text and "export ANTHROPIC_API_KEY" in text
    values = yaml.safe_load(text)
    assert values["target"] == str(target) and values["agent"]["backend"] == "ruff"


def test_new_refuses_an_existing_name_unless_forced(tmp_path, monkeypatch, target, capsys):
    root = checkout(tmp_path)
    monkeypatch.chdir(root)
    assert cli_main(["new", "foo", "--target", str(target)]) == 0
    spec_file = root / "config/sessions/foo.yaml"
    spec_file.write_text(spec_file.read_text() + "# mine\n")
    assert cli_main(["new", "foo", "--target", str(target)]) == 2
    assert "config/sessions/foo.yaml already exists" in capsys.readouterr().err
    assert spec_file.read_text().endswith("# mine\n")
    assert not (root / "config/sessions/foo-2.yaml").exists()
    assert cli_main(["new", "foo", "--target", str(target), "--force"]) == 0
    assert not spec_file.read_text().endswith("# mine\n")


def test_new_finds_the_checkout_from_a_subfolder(tmp_path, monkeypatch, target):
    root = checkout(tmp_path)
    (root / "docs").mkdir()
    monkeypatch.chdir(root / "docs")
    assert cli_main(["new", "foo", "--target", str(target)]) == 0
    assert (root / "config/sessions/foo.yaml").is_file()
    assert not (root / "docs/config").exists()


def test_new_outside_a_checkout_is_refused(tmp_path, monkeypatch, target, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli_main(["new", "foo", "--target", str(target)]) == 2
    assert "no Snakefile in" in capsys.readouterr().err
    assert not (tmp_path / "config").exists()


@pytest.mark.parametrize("bad", ["..", "a/../../x", "café", ".hidden"])
def test_new_refuses_names_outside_the_naming_rule(tmp_path, monkeypatch, target, capsys, bad):
    monkeypatch.chdir(checkout(tmp_path))
    assert cli_main(["new", bad, "--target", str(target)]) == 2
    assert f"session name {bad!r} is not allowed" in capsys.readouterr().err


def test_new_refuses_a_target_that_is_not_a_repo(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(checkout(tmp_path))
    assert cli_main(["new", "foo", "--target", str(tmp_path)]) == 2
    assert "not a git repository" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["version"], ["--version"]])
def test_version_prints_package_version(args):
    out = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "autoresearch 0.1.0"


def test_help_shows_how_to_run_a_session():
    out = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "--help"], capture_output=True, text=True
    ).stdout
    assert "snakemake --cores 1 sessions/NAME/done" in out


def test_every_option_of_every_command_has_help_text():
    import argparse

    from autoresearch.cli import build_parser

    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    undocumented = [
        f"{name} {action.dest}"
        for name, sub in commands.choices.items()
        for action in sub._actions
        if not action.help
    ]
    assert undocumented == []


@pytest.mark.parametrize(
    ("stamp", "installed", "verdict"),
    [
        ("0.1.0", "0.1.0", "same"),
        ("0.1.0", "0.2.3", "upgrade"),
        ("1.4.0", "2.0.0", "major"),
        ("0.2.0", "0.1.9", "older"),
    ],
)
def test_version_verdict_follows_the_seed(stamp, installed, verdict):
    from autoresearch.session.start import version_verdict

    assert version_verdict(stamp, installed) == verdict


def test_a_key_to_set_is_blamed_on_the_session_spec_when_only_the_defaults_set_it():
    from autoresearch.session.spec import Spec
    from autoresearch.session.start import spec_file_of

    merged = Spec(values={}, sources={"test_command": "/t/.autoresearch.yml"})
    assert spec_file_of(merged, "test_command", "foo") == "/t/.autoresearch.yml"
    assert spec_file_of(merged, "allow_failing_baseline", "foo") == "config/sessions/foo.yaml"


# --- bounds and places ----------------------------------------------------------------------


def test_a_huge_command_in_the_targets_config_is_refused_naming_the_key(tmp_path):
    root, repo = write_layers(tmp_path, {"test_command": "a" * 5_000_000}, {"target": "P"})
    with pytest.raises(specs.SpecError) as err:
        specs.load("x", root, {"target": str(repo)})
    message = str(err.value)
    assert message.startswith(f"{repo / '.autoresearch.yml'}: key 'test_command' is 5000000")
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize("key", ["linter_command", "scope.include", "agent.model"])
def test_every_long_spec_string_is_refused_naming_its_key(tmp_path, key):
    value = "x" * (specs.MAX_STRING_CHARS + 1)
    section, _, leaf = key.rpartition(".")
    layer = {section: {leaf: [value] if leaf == "include" else value}} if section else {key: value}
    root, repo = write_layers(tmp_path, {}, {"target": "P"})
    with pytest.raises(specs.SpecError, match=rf"--config: key '{key}' is \d+ characters long"):
        specs.load("x", root, {"target": str(repo), **layer})


def test_a_huge_spec_file_is_refused_before_it_is_parsed(tmp_path):
    root, repo = write_layers(tmp_path, {}, {"target": "P"})
    (repo / ".autoresearch.yml").write_text("# padding\n" * (specs.MAX_SPEC_FILE_BYTES // 10 + 1))
    with pytest.raises(
        specs.SpecError, match=r"\.autoresearch\.yml: the target's config .* \d+ bytes"
    ):
        specs.load("x", root, {"target": str(repo)})


def test_splitting_a_huge_command_returns_at_once(tmp_path):
    from autoresearch.checks import command_checks
    from autoresearch.safety import jail, words
    from autoresearch.session import stack

    huge = "a" * 5_000_000
    with pytest.raises(words.TooLong):
        words.split(huge)
    assert stack.command_exists(huge, tmp_path)  # unreadable counts as existing: the spec refuses
    assert [d.kind for d in command_checks.dangers(huge)] == ["too long"]
    # Within the bound, the lens's checks stay linear too (these took minutes before).
    for long in ("a" * 60_000, "sh " * 20_000, "curl " * 12_000):
        assert command_checks.dangers(long) == []
    box = jail.Jail("bwrap", tmp_path)
    assert box._named(huge, {}, []) == []


@pytest.mark.parametrize("inside", ["target", "target/sub", "wf", "wf/sessions", "sessions"])
def test_worktree_root_inside_the_target_or_the_workflow_is_refused(tmp_path, monkeypatch, inside):
    root, repo = write_layers(tmp_path, {}, {"target": "P"})
    monkeypatch.chdir(tmp_path)
    place = {"target": repo, "wf": root, "sessions": tmp_path / "sessions"}[inside.split("/")[0]]
    setting = place.joinpath(*inside.split("/")[1:])
    with pytest.raises(specs.SpecError, match=r"--config: key 'worktree_root': .* is inside"):
        specs.load("x", root, {"target": str(repo), "worktree_root": str(setting)})


def test_worktree_root_beside_the_target_is_accepted(tmp_path, monkeypatch):
    root, repo = write_layers(tmp_path, {}, {"target": "P"})
    monkeypatch.chdir(tmp_path)
    merged = specs.load("x", root, {"target": str(repo), "worktree_root": str(tmp_path / "wt")})
    assert merged.values["worktree_root"] == str(tmp_path / "wt")


def stamped(tmp_path, version: str, name: str = "old"):
    from autoresearch.session.layout import SessionLayout

    layout = SessionLayout(tmp_path / "sessions" / name)
    layout.root.mkdir(parents=True)
    layout.setup.write_text(json.dumps({"version": version}))
    return layout


def test_a_resume_across_a_minor_upgrade_says_so_in_one_line_once(tmp_path, capsys):
    from autoresearch.session.start import check_version

    layout = stamped(tmp_path, "0.1.0")
    check_version(layout, {}, installed="0.2.0")
    check_version(layout, {}, installed="0.2.0")  # Snakemake asks again: said once
    assert capsys.readouterr().err == "autoresearch upgraded 0.1.0 → 0.2.0\n"


def test_two_sessions_of_one_name_resumed_in_one_process_each_say_their_upgrade(tmp_path, capsys):
    # Two workflow folders, each with a session `old`; one process asks of both.
    from autoresearch.session.start import check_version

    for folder, stamp in (("a", "0.1.0"), ("b", "0.1.1")):
        check_version(stamped(tmp_path / folder, stamp), {}, installed="0.2.0")
    assert capsys.readouterr().err == (
        "autoresearch upgraded 0.1.0 → 0.2.0\nautoresearch upgraded 0.1.1 → 0.2.0\n"
    )


def test_each_run_that_resumes_a_session_under_an_upgrade_says_so_and_the_session_keeps_it(
    tmp_path, capsys, monkeypatch
):
    from autoresearch.session import start as session

    layout = stamped(tmp_path, "0.1.0")
    for run in ("1-first", "2-second"):
        monkeypatch.setattr(session, "RUN", run)
        session.check_version(layout, {}, installed="0.2.0")
        session.check_version(layout, {}, installed="0.2.0")
    assert capsys.readouterr().err == "autoresearch upgraded 0.1.0 → 0.2.0\n" * 2
    logged = session.upgrades_log(layout).read_text().splitlines()
    assert [line.split("\t")[1:] for line in logged] == [
        ["autoresearch upgraded 0.1.0 → 0.2.0", f"run {run}"] for run in ("1-first", "2-second")
    ]


def test_a_resume_under_the_same_version_says_nothing(tmp_path, capsys):
    from autoresearch.session.start import check_version

    check_version(stamped(tmp_path, "0.2.0"), {}, installed="0.2.0")
    assert capsys.readouterr().err == ""


def test_a_major_upgrade_points_at_the_changelog_that_ships(tmp_path):
    from autoresearch import __version__
    from autoresearch.errors import SessionError
    from autoresearch.session.start import check_version

    with pytest.raises(SessionError, match="Read its entry in CHANGELOG.md"):
        check_version(stamped(tmp_path, "0.9.0"), {}, installed="1.0.0")
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"\n## {__version__} — " in changelog  # the installed version has its entry


@pytest.mark.parametrize("mode", ["experiment", "sweep"])
def test_new_writes_only_the_keys_the_mode_reads(tmp_path, monkeypatch, target, mode):
    root = checkout(tmp_path)
    monkeypatch.chdir(root)
    assert cli_main(["new", "foo", "--target", str(target), "--mode", mode]) == 0
    text = (root / "config/sessions/foo.yaml").read_text()
    sweep_only = ("# max_cycles:", "# teams:")
    if mode == "sweep":
        assert all(key in text for key in sweep_only)
    else:  # program.md bounds an experiment; it has one team of its own
        assert not any(key in text for key in sweep_only), text
        assert "program: program.md" in text

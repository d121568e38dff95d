"""A spec the setup rule refuses before anything runs: the message names the file and key.

Asked of the setup rule's input function without Snakemake (tests/refusals.py);
tests/e2e/test_bad_input.py runs each wiring once: the exit, the one line, nothing written.
"""

from __future__ import annotations

import logging

import pytest
from conftest import git, make_repo, no_key_sweep
from refusals import ask, refusal

import scripts.common
import scripts.session
from autoresearch.errors import SpecError
from autoresearch.safety import git as gitops
from autoresearch.session import start as session

# --- the spec's own keys ----------------------------------------------------------------


def test_a_missing_key_names_the_configfile_and_the_key(work, untouched):
    said = refusal(work, no_key_sweep(untouched, agent={"backend": "claude"}))
    assert f"--configfile {work / 'specs' / 's.yaml'}: key 'agent.backend'" in said
    assert "ANTHROPIC_API_KEY is not set" in said


def test_a_mistyped_key_is_blamed_on_the_file_that_set_it(work, untouched):
    said = refusal(work, no_key_sweep(untouched, agent={"backend": "ruff", "modle": "x"}))
    assert "--configfile" in said and "unknown key 'agent.modle'" in said
    assert "did you mean 'agent.model'" in said
    assert "config/config.yaml" not in said


def test_a_key_set_with_config_is_blamed_on_config(work, untouched):
    said = refusal(work, no_key_sweep(untouched), {"test_timeout_s": 1e10})
    assert "--config: key 'test_timeout_s'" in said and "maximum of 604800" in said


def test_a_schema_violation_names_key_and_file(work, untouched):
    said = refusal(work, no_key_sweep(untouched, max_cycles=0))
    assert "--configfile" in said and "specs/s.yaml: key 'max_cycles'" in said


def test_an_unknown_mode_is_refused(work, untouched):
    said = refusal(work, no_key_sweep(untouched, mode="turbo"))
    assert "key 'mode'" in said and "turbo" in said


def test_teams_without_red_are_refused(work, untouched):
    said = refusal(work, no_key_sweep(untouched, teams=["green"]))
    assert "key 'teams'" in said and "leaves out red" in said


def test_an_invalid_glob_in_protected_is_refused(work, untouched):
    said = refusal(work, no_key_sweep(untouched, protected=["[z-a].py"]))
    assert "key 'protected'" in said and "'[z-a].py' is not a valid glob" in said


def test_a_test_command_that_does_not_exist_is_refused(work, untouched):
    said = refusal(work, no_key_sweep(untouched, test_command="no-such-tool --run"))
    assert "key 'test_command'" in said and "no-such-tool" in said


def test_a_missing_prompt_override_file_is_named(work, untouched):
    values = no_key_sweep(untouched, agent={"backend": "ruff", "prompts": {"red": "/no/red.md"}})
    said = refusal(work, values)
    assert "agent.prompts.red" in said and "/no/red.md" in said


def test_a_backend_that_cannot_play_a_needed_team_is_refused(work, tmp_path):
    repo = make_repo(
        tmp_path / "t", {"a.py": "x = 1\n", "tests/test_a.py": "def test_a():\n    pass\n"}
    )
    experiment = {
        "goal": "smaller",
        "scope": ["a.py"],
        "max_iterations": 2,
        "metric": {"command": "echo 1", "format": "last_line", "direction": "minimize"},
    }
    said = refusal(work, no_key_sweep(repo, mode="experiment", experiment=experiment))
    assert "key 'agent.backend'" in said and "'ruff' cannot play the experiment team" in said


def test_an_experiment_whose_target_file_is_missing_is_refused(work, tmp_path):
    program = "# Faster\n\n```yaml\ntarget_file: nowhere.py\neval_command: echo 1\n"
    program += "metric_key: v\ndirection: minimize\nmax_experiments: 2\n```\n"
    repo = make_repo(tmp_path / "t", {"a.py": "x = 1\n", "program.md": program})
    script = tmp_path / "script.yaml"
    script.write_text("{}\n")
    values = no_key_sweep(repo, mode="experiment", experiment={"program": "program.md"})
    values["agent"] = {"backend": "script", "script": str(script)}
    said = refusal(work, values)
    assert "key 'target_file'" in said and "'nowhere.py' is not in" in said


# --- the target -------------------------------------------------------------------------


def test_a_missing_target_is_refused(work, tmp_path):
    said = refusal(work, no_key_sweep(tmp_path / "nowhere"))
    assert "key 'target'" in said and "does not exist" in said
    assert not (tmp_path / "nowhere").exists()


def test_a_target_that_is_not_a_git_repo_is_refused(work, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    said = refusal(work, no_key_sweep(plain))
    assert "key 'target'" in said and "not a git repository" in said
    assert list(plain.iterdir()) == []


def test_an_empty_repository_gets_its_own_message(work, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    said = refusal(work, no_key_sweep(empty))
    assert "key 'target'" in said and "has no commits yet" in said
    assert git(empty, "branch", "--list") == ""


def test_a_bare_repository_gets_its_own_message(work, tmp_path):
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    said = refusal(work, no_key_sweep(bare))
    assert "key 'target'" in said and "is a bare repository" in said


def test_a_repository_whose_refs_are_a_reftable_is_refused(work, target):
    # git 2.39 ignores the extension in a version-0 repository; newer gits make reftables.
    git(target, "config", "extensions.refStorage", "reftable")
    before = gitops.snapshot(target)
    said = refusal(work, no_key_sweep(target))
    assert "key 'target'" in said and "reftable" in said and "refs migrate" in said
    assert gitops.snapshot(target) == before
    assert "autoresearch" not in git(target, "branch", "--list")


def test_a_dirty_target_with_on_dirty_abort_is_refused(work, target):
    (target / "calc.py").write_text("# edited\n")
    before = gitops.snapshot(target)
    said = refusal(work, no_key_sweep(target))
    assert "uncommitted changes" in said and "on_dirty: stash" in said
    assert gitops.snapshot(target) == before
    assert "autoresearch" not in git(target, "branch", "--list")


def test_an_unparsable_target_config_is_refused(work, tmp_path):
    repo = make_repo(tmp_path / "t", {".autoresearch.yml": "teams: [red,\n", "a.py": "x = 1\n"})
    before = gitops.snapshot(repo)
    said = refusal(work, no_key_sweep(repo))
    assert ".autoresearch.yml" in said and "not valid YAML" in said
    assert gitops.snapshot(repo) == before


# --- the model, asked of the Models API once a key is set --------------------------------


@pytest.fixture
def models_unchecked(monkeypatch):
    # The check is made once per model and process; each test is a process of its own here.
    monkeypatch.setattr(session, "MODELS_CHECKED", set())


def test_an_unknown_model_is_refused_before_the_first_stage(work, untouched, models_unchecked):
    from fake_anthropic import FakeAnthropic

    values = no_key_sweep(untouched, agent={"backend": "claude", "model": "claude-sonnet-9-9"})
    with FakeAnthropic() as fake, pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_BASE_URL", fake.url)
        env.setenv("ANTHROPIC_API_KEY", "k")
        said = refusal(work, values)
        assert fake.model_requests and not fake.requests  # asked the Models API only
    assert "key 'agent.model'" in said and "no model 'claude-sonnet-9-9'" in said
    assert "claude-sonnet-5-5" in said  # the ones it does serve


def test_a_server_without_the_models_api_is_not_refused(work, target, models_unchecked):
    from fake_anthropic import FakeAnthropic

    values = no_key_sweep(target, agent={"backend": "claude", "model": "qwen3-coder"})
    with FakeAnthropic(models=None) as fake, pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_BASE_URL", fake.url)
        env.setenv("ANTHROPIC_API_KEY", "k")
        assert ask(work, values) == {}
        assert fake.model_requests  # it was asked, and its 404 is not a refusal


# --- session names ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["café", "a b", "a/b", "_hidden"])
def test_a_name_outside_the_naming_rule_gets_its_message(bad):
    # What the catch-all rule's wildcard holds for sessions/<bad>/done.
    with pytest.raises(SpecError, match=f"session name {bad!r} is not allowed"):
        scripts.session.invalid_session_name(bad)


@pytest.mark.parametrize(
    ("normalised", "said"), [("done", "'done' is not a session"), ("x/done", "'x/done' is not")]
)
def test_a_name_with_dotdot_is_said_to_be_no_session(normalised, said):
    # Snakemake normalises sessions/../done to `done` (sessions/a/../../x/done to `x/done`)
    # and finds no rule for it; the filter on its logger turns that into our line.
    text = f"MissingRuleException:\nNo rule to produce {normalised} (if you use input functions"
    record = logging.LogRecord("snakemake.logging", logging.ERROR, "", 0, text, (), None)
    assert scripts.common.UserErrorFilter().filter(record)
    assert record.getMessage().startswith(f"Error: {said}")
    assert "no '..'" in record.getMessage()

"""Checks made before anything runs: backends and teams, budgets and prices, the model id,
and the progress line every stage prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropic

from autoresearch import modes
from autoresearch.agents.backends import BACKEND_TEAMS
from autoresearch.engine.jobs import progress_label, stage_name
from autoresearch.engine.stage import StageEnv
from autoresearch.session import spec
from autoresearch.session import start as session
from autoresearch.session.record import SetupRecord


def values(**extra) -> dict:
    base = {
        "mode": "sweep",
        "teams": ["red", "green", "refactor"],
        "agent": {"backend": "claude", "model": "claude-sonnet-5-5"},
        "budget": {"max_cost_usd": None, "max_cost_usd_per_stage": None},
        "prices": {"claude-sonnet-5-5": {"input": 2.0, "output": 10.0}},
    }
    base.update(extra)
    return base


def merged(v: dict) -> spec.Spec:
    return spec.Spec(values=v, sources={"budget.max_cost_usd": "config/sessions/x.yaml"})


# --- which teams a backend can play ------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "extra", "needed"),
    [
        ("sweep", {}, {"red", "green", "refactor"}),
        ("sweep", {"teams": ["red", "green"]}, {"red", "green"}),
        ("broad", {}, {"red", "green", "refactor", "strategist"}),
        ("broad", {"hypotheses": [{"id": "h1"}]}, {"red", "green", "refactor"}),
        ("experiment", {}, {"experiment"}),
    ],
)
def test_each_mode_says_which_teams_its_spec_needs(mode, extra, needed):
    assert modes.get(mode).setup.teams_needed(values(mode=mode, **extra)) == needed


def test_ruff_cannot_play_an_experiment_and_the_error_names_the_key():
    v = values(mode="experiment", agent={"backend": "ruff"})
    with pytest.raises(spec.SpecError, match=r"key 'agent.backend': 'ruff' cannot play the exp"):
        session.check_backend_plays(v, {"experiment"}, merged(v))
    assert BACKEND_TEAMS["ruff"] >= {"red", "green", "refactor"}


# --- budgets and prices ------------------------------------------------------------------------


def test_a_budget_with_an_unpriced_model_is_refused_naming_prices():
    v = values(budget={"max_cost_usd": 5}, agent={"backend": "claude", "model": "claude-x-1"})
    with pytest.raises(spec.SpecError, match=r"x.yaml: key 'budget.max_cost_usd'.*key 'prices'"):
        session.check_prices(v, merged(v))


def test_a_budget_with_a_priced_or_dated_model_passes():
    session.check_prices(values(budget={"max_cost_usd": 5}), None)
    dated = values(budget={"max_cost_usd": 5})
    dated["agent"]["model"] = "claude-sonnet-5-5-20260928"
    session.check_prices(dated, None)


def test_without_a_budget_an_unpriced_model_is_allowed():
    session.check_prices(values(agent={"backend": "claude", "model": "qwen3-coder"}), None)


def test_a_max_tokens_above_the_models_output_limit_is_refused_naming_both_keys():
    v = values(models={"claude-sonnet-5-5": {"max_output_tokens": 128_000}})
    v["agent"]["max_tokens"] = 200_000
    spec_of = spec.Spec(values=v, sources={"agent.max_tokens": "config/sessions/x.yaml"})
    with pytest.raises(
        spec.SpecError,
        match=r"x.yaml: key 'agent.max_tokens' is 200000.*'models.claude-sonnet-5-5.max_output",
    ):
        session.check_agent(v, spec_of)
    v["agent"]["max_tokens"] = 128_000
    session.check_output_limit(v, spec_of)


def test_the_default_model_has_a_price():
    defaults = spec.read_yaml(Path(spec.workflow_root()) / "config/config.yaml", "defaults")
    assert defaults["agent"]["model"] in defaults["prices"]


# --- the model id, asked of the Models API -------------------------------------------------


@pytest.fixture
def api(monkeypatch):
    def serve(models):
        fake = FakeAnthropic(models=models).__enter__()
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        servers.append(fake)
        return fake

    servers: list[FakeAnthropic] = []
    yield serve
    for fake in servers:
        fake.__exit__(None)


def test_a_model_the_api_serves_passes(api):
    from autoresearch.agents.backends.claude import unknown_model

    fake = api(["claude-sonnet-5-5"])
    assert unknown_model("claude-sonnet-5-5") is None
    assert fake.model_requests == ["/v1/models/claude-sonnet-5-5"]


def test_an_unknown_model_is_named_with_the_ones_the_api_knows(api):
    from autoresearch.agents.backends.claude import unknown_model

    api(["claude-sonnet-5-5", "claude-opus-5-5"])
    problem = unknown_model("claude-sonet-5-5")
    assert "no model 'claude-sonet-5-5'" in problem and "claude-sonnet-5-5" in problem


def test_a_server_without_a_models_api_is_given_the_benefit_of_the_doubt(api):
    from autoresearch.agents.backends.claude import unknown_model

    api(None)
    assert unknown_model("qwen3-coder") is None


# --- the progress line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "log", "stage"),
    [
        ("sweep", "sessions/foo/logs/green/003.log", "green"),
        ("broad", "sessions/foo/logs/red/h2/001.log", "red"),
        ("experiment", "sessions/foo/logs/experiment_propose/004.log", "propose"),
        ("fix", "sessions/foo/logs/fix_attempt/004.log", "fix_attempt"),
        ("sweep", "sessions/foo/logs/done.log", "done"),
    ],
)
def test_the_stage_is_read_from_the_rules_log_path(mode, log, stage):
    # The mode names its rules' prefix: the engine strips no mode's name of its own.
    assert stage_name(log, modes.get(mode).setup.rule_prefix) == stage


def env_of(tmp_path, mode: str, cycle: int, track: str = "", **spec_values) -> StageEnv:
    layout = modes.get(mode).layout(tmp_path / "foo")
    record = SetupRecord(
        "foo", mode, "0.1.0", "/t", None, "pytest", None, "b", "c", {}, "", None, ""
    )
    return StageEnv(layout, spec.SessionSpec({"mode": mode, **spec_values}), record, cycle, track)


def test_the_progress_label_says_cycle_k_of_max(tmp_path):
    env = env_of(tmp_path, "sweep", 3, max_cycles=10)
    assert progress_label(env, modes.get("sweep"), "green") == "[foo] cycle 3/10 green"


def test_an_experiment_without_a_cap_says_the_iteration_alone(tmp_path):
    env = env_of(tmp_path, "experiment", 4)
    label = progress_label(env, modes.get("experiment"), "propose")
    assert label == "[foo] iteration 4 propose"


def test_a_broad_track_is_named_in_the_label(tmp_path):
    env = env_of(tmp_path, "broad", 2, track="h1")
    assert progress_label(env, modes.get("broad"), "red") == "[foo h1] cycle 2/5 red"


def test_a_stage_outside_the_loop_has_no_cycle(tmp_path):
    assert progress_label(env_of(tmp_path, "sweep", 0), modes.get("sweep"), "done") == "[foo] done"

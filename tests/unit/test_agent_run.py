"""run_agent: the limits a backend is given when a stage runs several conversations."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoresearch.agents import agent_run, prompts
from autoresearch.agents.backends.base import StageLimits, StageRun, Usage


class Recording:
    """A backend that does nothing but keep the limits it was given."""

    name = "script"

    def __init__(self) -> None:
        self.limits: list[StageLimits] = []

    def run(self, brief, toolbox, progress) -> StageRun:
        self.limits.append(brief.limits)
        return StageRun(Usage(), 0, "end_turn")


@dataclass
class Layout:
    root: Path


class Spec(dict):
    budget_usd = None
    allow_test_edits = False
    agent = {"backend": "script"}


class Env:
    cycle, track = 1, ""

    def __init__(self, root: Path) -> None:
        self.layout = Layout(root)
        self.spec = Spec()

    def limits(self) -> StageLimits:
        return StageLimits(max_turns=60, deadline_s=3600, max_cost_usd=1.0)

    def log(self, line: str) -> None:
        pass

    def progress(self, team: str):
        return lambda line: None


class Box:
    class sandbox:  # noqa: N801 - the toolbox's attribute
        root = "/nowhere"


def test_a_stages_later_conversation_gets_only_the_turns_and_money_the_earlier_left(
    tmp_path, monkeypatch
):
    backend = Recording()
    monkeypatch.setattr(agent_run, "get_backend", lambda spec: backend)
    env = Env(tmp_path)
    ctx = prompts.BriefContext(team="green")
    earlier = StageRun(Usage(cost_usd=0.75), 58, "finished")
    agent_run.run_agent(env, "green", ctx, Box(), earlier=earlier, deadline_s=100)
    agent_run.run_agent(env, "green", ctx, Box(), earlier=StageRun(Usage(cost_usd=2.0), 70, "x"))
    first, second = backend.limits
    assert (first.max_turns, first.max_cost_usd, first.deadline_s) == (2, 0.25, 100)
    # Past the stage's limits, nothing is left (never a negative limit, which means none).
    assert (second.max_turns, second.max_cost_usd) == (0, 0.0)


def test_a_conversation_with_turns_of_its_own_keeps_them_whatever_the_earlier_used(
    tmp_path, monkeypatch
):
    backend = Recording()
    monkeypatch.setattr(agent_run, "get_backend", lambda spec: backend)
    env = Env(tmp_path)
    ctx = prompts.BriefContext(team="green")
    earlier = StageRun(Usage(cost_usd=0.75), 58, "max_turns")
    agent_run.run_agent(env, "green", ctx, Box(), earlier=earlier, turns=15)
    (limits,) = backend.limits
    # The turns are its own (per finding); the money is still what the stage has left.
    assert (limits.max_turns, limits.max_cost_usd) == (15, 0.25)

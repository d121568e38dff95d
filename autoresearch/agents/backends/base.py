"""The backend interface: what a stage hands a backend, and what it gets back.

A stage builds a `StageBrief` (the team's prompt, already filtered for the clean
room) and a `Toolbox` (the only way to touch the worktree). A backend — the
Claude tool-use loop or the model-free `ruff` backend — drives the toolbox until
the team's work is done and returns a `StageRun`. The harness behind the toolbox,
not the backend, runs tests and makes every commit and revert.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from autoresearch.errors import UserError

# The cycle's teams and the strategist, the experiment agent, then the lenses' teams.
TEAMS = (
    "red",
    "green",
    "refactor",
    "strategist",
    "experiment",
    "auditor",
    "debugger",
    "explorer",
    "persona",
    "debate",
    "judge",
    "fix",
    "learn",
    "ship",
)


@dataclass
class ToolResult:
    """What one tool call returns to the agent."""

    content: str
    is_error: bool = False


@dataclass
class Usage:
    """Token usage and cost, summed over the calls of a stage (or a session)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    # The part of cache_creation_input_tokens written to the 1-hour cache (priced apart).
    cache_write_1h_tokens: int = 0
    cost_usd: float = 0.0
    requests: int = 0
    unpriced: int = 0  # requests to a model without a price: their cost is unknown

    def add(self, other: Usage) -> None:
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)

    def minus(self, other: Usage) -> Usage:
        """What of this usage is not in `other` (never below zero)."""
        return Usage(
            **{key: max(0, value - getattr(other, key)) for key, value in asdict(self).items()}
        )

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )


@dataclass
class StageLimits:
    """Per-stage limits from the spec (`agent.max_turns`, ...); None = unlimited."""

    max_turns: int | None = None
    deadline_s: float | None = None
    max_cost_usd: float | None = None


@dataclass
class StageBrief:
    """Everything an agent is told for one stage.

    `system` and `task` are the prompt text a model sees. `data` carries the same
    information in structured form for model-free backends (sanitized findings for
    Green, the changed-file list for Refactor) — never more than the text holds.
    """

    team: str
    system: str
    task: str
    limits: StageLimits = field(default_factory=StageLimits)
    data: dict[str, Any] = field(default_factory=dict)
    # The change is judged by a count of errors going down: what a fix leaves unused (an
    # import) must go with it, or the count does not fall.
    tidy: bool = False
    # Called with each model request's usage as its reply arrives (the ledger's row).
    on_request: Callable[[Usage], None] | None = None


@dataclass
class StageRun:
    """How a backend's run of one stage ended."""

    usage: Usage
    turns: int
    stop_reason: str  # end_turn | finished | max_turns | deadline | budget | refusal | error
    # | NOTHING_TO_TOUCH
    detail: str = ""


# A team that had nothing it may change (the ruff backend's Refactor, when no changed file
# is one the target keeps formatted): it did not look and find nothing.
NOTHING_TO_TOUCH = "nothing_to_touch"


class Toolbox(Protocol):
    """The tools one team may call (docs/agent-tools.md), bound to one worktree."""

    team: str

    def definitions(self) -> list[dict[str, Any]]:
        """Tool definitions in Messages API form: name, description, input_schema."""
        ...

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run one tool. Never raises for bad input: refusals are is_error results."""
        ...

    @property
    def finished(self) -> bool:
        """True once the team's work is over (e.g. finish_refactor committed)."""
        ...


class Backend(Protocol):
    """Something that can do a team's work through a toolbox."""

    name: str

    def run(
        self, brief: StageBrief, toolbox: Toolbox, progress: Callable[[str], None]
    ) -> StageRun: ...


class StageFailed(UserError):
    """A stage cannot complete; the message says why and what to do."""


class SessionStop(RuntimeError):
    """The session must stop at this stage boundary (budget, spend limit)."""

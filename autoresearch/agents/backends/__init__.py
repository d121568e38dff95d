"""Agent backends: `ruff` (no model, no key) and `claude` (the Messages API)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch.agents.backends.base import TEAMS, Backend

# Which teams each backend can play. ruff has no model: it can report and fix its own
# diagnostics and format code, but cannot propose hypotheses or experiments.
BACKEND_TEAMS: dict[str, frozenset[str]] = {
    "ruff": frozenset({"red", "green", "refactor"}),
    "claude": frozenset(TEAMS),
    "script": frozenset(TEAMS),
}

# Backends whose every answer follows from the tree alone (no model, no sampling): when one
# says it cannot fix something, asking again gives the same answer.
DETERMINISTIC: frozenset[str] = frozenset({"ruff"})

# Backends whose runs are model conversations, each turn resending all the earlier ones:
# Green gives each group of findings a conversation of its own there (docs/cost.md).
CONVERSATIONS: frozenset[str] = frozenset({"claude"})


def security_reach(backend: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The OWASP ids and STRIDE letters a backend's security auditor has a check for; None:
    every category (a model reads the code for any of them)."""
    if backend == "ruff":
        from autoresearch.agents.backends.ruff_security import reach

        return reach()
    return None


def rechecker(spec: dict[str, Any]) -> Callable[[Path, list[str]], set[str]] | None:
    """How the spec's backend looks at the tree again for findings it reported (`title
    (path:line)` keys -> those still there), or None: a model's findings stay as reported.
    Asked without building a backend (a model's client is not needed to say no)."""
    if spec["agent"]["backend"] != "ruff":
        return None
    from autoresearch.agents.backends.ruff import RuffBackend

    return RuffBackend(spec["agent"].get("ruff")).still_reported


def get_backend(spec: dict[str, Any]) -> Backend:
    name = spec["agent"]["backend"]
    if name == "ruff":
        from autoresearch.agents.backends.ruff import RuffBackend

        return RuffBackend(spec["agent"].get("ruff"))
    if name == "claude":
        from autoresearch.agents.backends.claude import ClaudeBackend

        return ClaudeBackend(
            spec["agent"], spec.get("prices") or {}, models=spec.get("models") or {}
        )
    if name == "script":
        from autoresearch.agents.backends.script import ScriptBackend

        return ScriptBackend(spec["agent"])
    raise ValueError(f"unknown agent.backend {name!r}: use 'ruff', 'claude' or 'script'")

"""The setup record: what a session's setup found, written once to setup.json."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autoresearch.errors import SessionError
from autoresearch.session.files import write_json
from autoresearch.session.layout import SessionLayout


@dataclass
class SetupRecord:
    name: str
    mode: str
    version: str
    target: str
    stack: str | None
    test_command: str
    linter_command: str | None
    branch: str
    base_commit: str
    baseline: dict[str, Any]
    date: str
    config_file: str | None
    conventions: str
    warnings: list[str] = field(default_factory=list)
    stashed: str | None = None
    worktrees: str | None = None  # the folder holding this session's worktrees
    sandbox: dict[str, Any] | None = None  # how the target's commands are confined
    measured: dict[str, Any] | None = None  # the protected files and where each came from
    started: str | None = None  # when setup began (UTC, ISO 8601): the progress lines' clock
    # Which of the target's lint configs were read (ruff's, flake8's) and flake8's settings.
    lint_config: dict[str, Any] | None = None

    def save(self, layout: SessionLayout) -> None:
        write_json(layout.setup, asdict(self))


def read_setup(path: Path) -> dict[str, Any]:
    """setup.json as written at setup; SessionError naming the file when it is not that."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SessionError(f"{path}: missing; the session was never set up") from None
    except (OSError, ValueError) as err:  # unreadable, not JSON, not text at all
        raise SessionError(f"{path}: not the setup record the harness wrote ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("mode"), str):
        raise SessionError(f"{path}: not the setup record the harness wrote (no 'mode')")
    return data


def load_record(layout: SessionLayout) -> SetupRecord:
    data = read_setup(layout.setup)
    try:
        return SetupRecord(**data)
    except TypeError as err:  # a key missing or one the record does not have
        why = f"not the setup record the harness wrote ({err})"
        raise SessionError(f"{layout.setup}: {why}") from None

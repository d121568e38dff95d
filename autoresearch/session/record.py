"""The setup record: what a session's setup found, written once to setup.json."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

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

    def save(self, layout: SessionLayout) -> None:
        write_json(layout.setup, asdict(self))


def load_record(layout: SessionLayout) -> SetupRecord:
    return SetupRecord(**json.loads(layout.setup.read_text()))

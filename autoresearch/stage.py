"""The context every stage job works in: session, cycle, track, worktree, log.

Also the rule that makes reruns safe: a stage first returns its worktree to the
commit it started from, so a rerun never stacks duplicate commits (docs/architecture.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import git, spec
from .backends.base import StageLimits
from .layout import SessionLayout
from .record import SetupRecord


@dataclass
class StageEnv:
    layout: SessionLayout
    spec: spec.SessionSpec
    record: SetupRecord
    cycle: int
    track: str = ""
    log_file: Path | None = None

    @property
    def worktree(self) -> Path:
        return self.layout.worktree(self.track)

    @property
    def cycle_dir(self) -> Path:
        return self.layout.cycle(self.cycle, self.track)

    @property
    def label(self) -> str:
        return f"{self.track + ' ' if self.track else ''}cycle {self.cycle:03d}"

    def log(self, line: str) -> None:
        """One line to the rule's log and to the terminal running Snakemake."""
        print(line, file=sys.stderr, flush=True)
        if self.log_file:
            with self.log_file.open("a") as handle:
                handle.write(line + "\n")

    def previous_decision(self) -> dict[str, Any] | None:
        if self.cycle <= 1:
            return None
        path = self.layout.decision(self.cycle - 1, self.track)
        return json.loads(path.read_text()) if path.exists() else None

    def decisions_before(self) -> list[dict[str, Any]]:
        """Every completed decision of this loop (this track) before the current cycle."""
        return [
            json.loads(self.layout.decision(n, self.track).read_text())
            for n in self.layout.completed_cycles(self.track)
            if n < self.cycle
        ]

    def track_base(self) -> str:
        """Where this loop's branch started (a broad track records its own)."""
        if self.track:
            meta = json.loads(self.layout.track_meta(self.track).read_text())
            return meta["base_commit"]
        return self.record.base_commit

    def cycle_start(self) -> str:
        prev = self.previous_decision()
        return prev["end_commit"] if prev else self.track_base()

    def cycle_start_tests_pass(self) -> bool:
        prev = self.previous_decision()
        return bool(prev["tests_pass"]) if prev else bool(self.record.baseline.get("ok"))

    def stage_record(self, stage: str) -> dict[str, Any]:
        return json.loads((self.cycle_dir / f"{stage}.json").read_text())

    def begin(self, start: str) -> None:
        """Reset the worktree to the stage's start commit (idempotent reruns)."""
        git.reset_to(self.worktree, start)

    def limits(self) -> StageLimits:
        return StageLimits(
            max_turns=self.spec.agent.get("max_turns"),
            deadline_s=self.spec.agent.get("stage_timeout_s"),
            max_cost_usd=self.spec.stage_budget_usd,
        )

    def toolbox_options(self) -> dict[str, Any]:
        return {
            "test_command": self.record.test_command,
            "linter_command": self.record.linter_command,
            "test_timeout_s": self.spec.test_timeout_s,
            "protected": self.spec.protected,
            "include": self.spec.scope_include,
            "exclude": self.spec.scope_exclude,
            "secrets": self.spec.secrets,
        }

    def progress(self, team: str) -> Callable[[str], None]:
        """A backend's progress lines, labelled with session, cycle and team."""
        return lambda line: self.log(f"[{self.layout.name} {self.label} {team}] {line}")

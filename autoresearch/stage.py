"""The context every stage job works in: session, cycle, track, worktree, log.

Also the rule that makes reruns safe: a stage first returns its worktree to the
commit it started from, so a rerun never stacks duplicate commits (DESIGN §6).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import git, spec
from .agents import StageLimits
from .layout import SessionLayout
from .session import SetupRecord, load_record


@dataclass
class StageEnv:
    layout: SessionLayout
    spec: dict[str, Any]
    record: SetupRecord
    cycle: int
    track: str = ""
    log_lines: list[str] = field(default_factory=list)
    log_file: Path | None = None

    @classmethod
    def open(cls, session_dir: str | Path, cycle: int | str = 0, track: str = "", log_file=None):
        layout = SessionLayout(Path(session_dir).absolute())
        return cls(
            layout=layout,
            spec=spec.load_frozen(layout.spec),
            record=load_record(layout),
            cycle=int(cycle),
            track=track or "",
            log_file=Path(log_file) if log_file else None,
        )

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

    def track_base(self) -> str:
        """Where this track's branch started (broad tracks record their own)."""
        if self.track:
            meta = self.layout.root / "tracks" / self.track / "track.json"
            return json.loads(meta.read_text())["base_commit"]
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
        agent = self.spec["agent"]
        return StageLimits(
            max_turns=agent.get("max_turns"),
            deadline_s=agent.get("stage_timeout_s"),
            max_cost_usd=(self.spec.get("budget") or {}).get("max_cost_usd_per_stage"),
        )

    def toolbox_options(self) -> dict[str, Any]:
        scope = self.spec.get("scope") or {}
        return {
            "test_command": self.record.test_command,
            "linter_command": self.record.linter_command,
            "test_timeout_s": self.spec["test_timeout_s"],
            "protected": list(self.spec.get("protected") or []),
            "include": list(scope.get("include") or []),
            "exclude": list(scope.get("exclude") or []),
            "secrets": list(self.spec.get("secrets") or []),
        }


def progress_printer(env: StageEnv, team: str) -> Callable[[str], None]:
    return lambda line: env.log(f"[{env.layout.name} {env.label} {team}] {line}")

"""Where a session's files live (DESIGN §3). One place, so rules and code agree."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CYCLE_DIR = re.compile(r"^\d{3}$")


@dataclass(frozen=True)
class SessionLayout:
    root: Path  # sessions/<name>

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def spec(self) -> Path:
        return self.root / "session.yaml"

    @property
    def setup(self) -> Path:
        return self.root / "setup.json"

    @property
    def summary(self) -> Path:
        return self.root / "session.md"

    @property
    def results(self) -> Path:
        return self.root / "results.tsv"

    @property
    def ideas(self) -> Path:
        return self.root / "ideas.md"

    @property
    def done(self) -> Path:
        return self.root / "done"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def worktree(self, track: str = "") -> Path:
        return self.root / "tracks" / track / "worktree" if track else self.root / "worktree"

    def cycles(self, track: str = "") -> Path:
        return self.root / "cycles" / track if track else self.root / "cycles"

    def cycle(self, number: int, track: str = "") -> Path:
        return self.cycles(track) / f"{number:03d}"

    def decision(self, number: int, track: str = "") -> Path:
        return self.cycle(number, track) / "decision.json"

    def completed_cycles(self, track: str = "") -> list[int]:
        """Cycle numbers whose decision.json exists, ascending."""
        base = self.cycles(track)
        if not base.is_dir():
            return []
        return sorted(
            int(p.name)
            for p in base.iterdir()
            if CYCLE_DIR.match(p.name) and (p / "decision.json").exists()
        )


def session_layout(sessions_dir: Path | str, name: str) -> SessionLayout:
    return SessionLayout(Path(sessions_dir).absolute() / name)

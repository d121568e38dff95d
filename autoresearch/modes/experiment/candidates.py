"""The candidates of an experiment batch (`experiment.parallel: k`): their stage context,
their worktrees, and the claims that keep a batch's hypotheses distinct.

Each candidate `cK` of iteration NNN works in `iterations/NNN/cK/` and in its own detached
worktree made from the incumbent commit (one per slot, reused by every iteration). Claims
are made when a hypothesis is handed in, not after the batch: the agent is told at once and
can still try another idea, where refusing afterwards would waste the candidate's slot.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git, worktrees
from autoresearch.session.files import locked, read_json, write_json

from .policy import find_duplicate


@dataclasses.dataclass
class CandidateEnv(StageEnv):
    """A stage of one candidate: its own worktree and folder; the loop's files (previous
    decision, incumbent) are the iteration's."""

    candidate: str = ""

    @property
    def worktree(self) -> Path:
        return self.layout.candidate_worktree(self.candidate).resolve()

    @property
    def cycle_dir(self) -> Path:
        return self.layout.candidate(self.cycle, self.candidate)

    @property
    def label(self) -> str:
        return f"iteration {self.cycle:03d} {self.candidate}"


def candidate_env(env: StageEnv, candidate: str) -> CandidateEnv:
    """`env` (the iteration's, or another candidate's) as the stage of `candidate`."""
    values = {
        f.name: getattr(env, f.name) for f in dataclasses.fields(env) if f.name != "candidate"
    }
    return CandidateEnv(**values, candidate=candidate)


def candidate_of(env: StageEnv) -> str:
    """`cK` for a candidate's stage, "" for the single proposal of an iteration."""
    return env.candidate if isinstance(env, CandidateEnv) else ""


def candidate_ids(k: int) -> list[str]:
    return [f"c{i}" for i in range(1, k + 1)]


def ensure_worktree(env: CandidateEnv, start: str) -> None:
    """The candidate's detached worktree at `start`, made on first use, where the session's
    other worktrees live (never under sessions/: docs/architecture.md)."""
    link = env.layout.candidate_worktree(env.candidate)
    if (link / ".git").exists():
        return
    store = Path(env.record.worktrees) if env.record.worktrees else env.layout.root
    real = worktrees.real_place(link, store, "tracks", env.candidate)
    git.add_detached_worktree(Path(env.record.target), real, start)
    worktrees.link(link, real)


# --- claims: the batch's hypotheses as they are handed in -----------------------------


def _claims_file(env: CandidateEnv) -> Path:
    return env.layout.cycle(env.cycle) / "claims.json"


def release_claim(env: CandidateEnv) -> None:
    """A rerun of a candidate starts without its earlier claim."""
    with locked(_claims_file(env).with_suffix(".lock")):
        claims = read_json(_claims_file(env)) or {}
        if claims.pop(env.candidate, None) is not None:
            write_json(_claims_file(env), claims)


def claim(env: CandidateEnv, hypothesis: str, threshold: float) -> dict[str, Any] | None:
    """Claim `hypothesis` for this candidate unless a sibling already claimed one like it;
    returns that sibling's claim ({iteration, candidate, hypothesis}) when refused."""
    with locked(_claims_file(env).with_suffix(".lock")):
        claims = read_json(_claims_file(env)) or {}
        siblings = [
            {"iteration": env.cycle, "candidate": other, "hypothesis": text}
            for other, text in sorted(claims.items())
            if other != env.candidate
        ]
        taken = find_duplicate(hypothesis, siblings, threshold)
        if taken is not None:
            return taken
        claims[env.candidate] = hypothesis
        write_json(_claims_file(env), claims)
        return None

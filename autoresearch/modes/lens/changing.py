"""The lenses whose iterations change the target (fix, learn, ship): each iteration starts
where the last one ended, a kept iteration is one commit on the session branch, and the
loop's end, its counts and its status line are read from the decisions the same way.
What each of them says on its own (what is still open, why nothing ran) is a hook here."""

from __future__ import annotations

from typing import Any

from autoresearch.engine import tally
from autoresearch.engine.loop import Status
from autoresearch.engine.stage import StageEnv
from autoresearch.session.layout import SessionLayout
from autoresearch.views import journal

from ..base import Progress, part
from . import Lens


def kept_steps(decisions: list[dict[str, Any]]) -> int:
    """The iterations kept (each one commit)."""
    return sum(1 for d in decisions if d["status"] == Status.KEPT)


class ChangingLensViews(Lens.views):
    def kept_count(self, layout: SessionLayout) -> int | str:
        """The iterations kept (each one commit), from the loop's running counts."""
        return tally.read(layout).kept

    def progress(self, layout: SessionLayout) -> Progress:
        decisions = journal.load_decisions(layout)
        kept = kept_steps(decisions)
        return Progress(
            started=bool(decisions),
            cycles=len(decisions),
            commits=kept,
            fixes=kept,
            tests=self.tests_now(decisions),
            open_issues=self.open_now(layout),
        )


class ChangingLens(Lens):
    views = part(ChangingLensViews)

    def end_commit(self, env: StageEnv) -> str:
        """Where the loop ended: the last decision's end, or the base when nothing ran."""
        decisions = journal.load_decisions(env.layout)
        return decisions[-1]["end_commit"] if decisions else env.record.base_commit

    # --- why it ended, for `done`, the handoff and `status` --------------------------------

    def stopped(self, env: StageEnv) -> str | None:
        decisions = journal.load_decisions(env.layout)
        reason = next((d.get("reason") for d in reversed(decisions) if d.get("stop")), None)
        return reason or self.idle_reason(env, decisions)

    def idle_reason(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str | None:
        """Why the loop had nothing to do, when no decision stopped it (default: none)."""
        return None

    # --- autoresearch status ---------------------------------------------------------------

    def tests_now(self, decisions: list[dict[str, Any]]) -> str:
        """The tests as `status` shows them (default: the lens runs none)."""
        return "n/a"

    def open_now(self, layout: SessionLayout) -> int:
        """What is still open, as `status` counts it."""
        return 0

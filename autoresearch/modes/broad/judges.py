"""Broad mode's optional judge panel: each track's diff weighed against the aspiration.

`aspiration_judge: {panel: N}`: N judges (team `judge`, read tools and cast_vote) vote
`met` or `not met` on each change, shown as "change A", "B", … with no track id, hypothesis
or branch, one run per judge and change. Counted with the predict lens's rule (checks/votes.py
`label`); the share of `met` ranks the tracks (docs/broad.md, "The judge panel").
"""

from __future__ import annotations

import string
from typing import Any

from autoresearch.agents.backends import BACKEND_TEAMS
from autoresearch.engine.stage import StageEnv
from autoresearch.measure.panel import one_vote
from autoresearch.safety import git

from ...checks.votes import label
from ...errors import SpecError

KEY = "aspiration_judge"
DIFF_CHARS = 40_000  # a judge reads the change, not a novel


def panel_of(values: dict[str, Any], name: str = "<name>") -> int | None:
    """The panel size (the schema has checked it), or None without a judge; a one-line
    SpecError naming the key when the panel cannot run."""
    raw = values.get(KEY)
    if raw is None:
        return None
    where = f"config/sessions/{name}.yaml"
    if not str(values.get("aspiration") or "").strip():
        raise SpecError(f"{where}: key '{KEY}' needs key 'aspiration': the judges weigh against it")
    backend = values["agent"]["backend"]
    if "judge" not in BACKEND_TEAMS[backend]:
        raise SpecError(
            f"{where}: key '{KEY}': agent.backend {backend!r} cannot judge; set key "
            "'agent.backend' to claude, or remove the judge"
        )
    return raw.get("panel", 3)


def change_labels(results: list[dict[str, Any]]) -> dict[str, str]:
    """Track id -> "A", "B", …: by diff size, then tree, never by id or category."""
    # At most MAX_HYPOTHESES tracks: one letter each.
    order = sorted(results, key=lambda r: (r["diff_lines"], r.get("tree") or "", r["id"]))
    return {r["id"]: string.ascii_uppercase[i] for i, r in enumerate(order)}


def diff_of(env: StageEnv, r: dict[str, Any]) -> str:
    out = git.git(env.layout.worktree(r["id"]), "diff", r["base_commit"], r["end_commit"])
    return out if len(out) <= DIFF_CHARS else out[:DIFF_CHARS] + "\n... (diff cut here)"


def ask(env: StageEnv, results: list[dict[str, Any]], aspiration: str, panel: int) -> dict:
    """Every track's votes: track id -> {change, votes, met, not_met, label, score}.
    `env` reads the base (the strategist's checkout), so no path names a track."""
    labels = change_labels(results)
    judged: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: labels[r["id"]]):
        change, diff = labels[r["id"]], diff_of(env, r)
        votes = [vote(env, aspiration, change, diff, judge, panel) for judge in range(1, panel + 1)]
        met = sum(1 for v in votes if v["vote"] == "met")
        # A judge that cast no vote disputes nothing and confirms nothing: it abstained.
        not_met = sum(1 for v in votes if v["vote"] == "not met")
        judged[r["id"]] = {
            "change": change,
            "votes": votes,
            "met": met,
            "not_met": not_met,
            "panel": panel,
            "label": label(met, not_met, panel),
            "score": met / panel,
        }
        env.log(f"judges: change {change} ({r['id']}): {met} of {panel} met")
    return judged


def vote(
    env: StageEnv, aspiration: str, change: str, diff: str, judge: int, panel: int
) -> dict[str, Any]:
    lens = {
        "heading": f"Judge {judge} of {panel}: does change {change} serve the aspiration?",
        "focus": (
            f"The aspiration: {aspiration}\n\n"
            f"Change {change}, as a diff against the base commit (the checkout you can read "
            f"is the base, without the change):\n\n```diff\n{diff}\n```"
        ),
        "closing": (
            "Call cast_vote once: `met` if this change moves the code toward the aspiration "
            "as a careful reviewer would judge it, `not met` otherwise, with your reason."
        ),
        "data": {"aspiration": aspiration, "change": change, "diff": diff, "panel": panel},
    }
    # The script backend finds a judge's steps under "<change>/<judge>".
    cast, run = one_vote(env, lens, ledger_cycle=judge, extra_data={"track": change})
    verdict = cast.get("verdict")
    return {
        "judge": judge,
        "vote": verdict if verdict in ("met", "not met") else None,
        "reason": " ".join(cast.get("reason", "").split()),
        "stop": run.stop_reason,
    }

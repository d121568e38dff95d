"""preserve_on_fail: a change that was not kept, saved where a user can find it.

Each one becomes a commit on top of the commit it was proposed from, under the ref
`refs/autoresearch/preserved/<run-id>/<NNNN>` (`-cK` for a batch's candidate), made in a
throwaway index so the session's worktree and branch never see it; the run folder also
gets its patch (runs.py). `git show <ref>` or `git cherry-pick <ref>` brings it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git
from autoresearch.session.layout import SessionLayout

from .policy import KEPT

REF_ROOT = "refs/autoresearch/preserved"


def ref_name(run_id: str, iteration: int, candidate: str | None = None) -> str:
    return f"{REF_ROOT}/{run_id}/{iteration:04d}" + (f"-{candidate}" if candidate else "")


def patch_of(layout: SessionLayout, rec: dict[str, Any]) -> Path:
    """The experiment's proposal.patch: the iteration's, or its candidate's."""
    if rec.get("candidate"):
        return layout.candidate(rec["iteration"], rec["candidate"]) / "proposal.patch"
    return layout.cycle(rec["iteration"]) / "proposal.patch"


def preserve(env: StageEnv, rec: dict[str, Any], run_id: str) -> None:
    """Every experiment of the iteration `rec` that was not kept and handed in a change:
    its commit under a ref, named in its record as `preserved`. A rerun makes the same
    commit content again and moves the ref to it (never a second ref)."""
    for each in rec.get("candidates") or [rec]:
        patch = patch_of(env.layout, each)
        if each["status"] == KEPT or not patch.exists() or not patch.read_text().strip():
            continue
        which = f" ({each['candidate']})" if each.get("candidate") else ""
        hypothesis = " ".join(each["hypothesis"].split())[:120]
        message = (
            f"autoresearch: exp {env.cycle}{which} -- {each['status']}, not kept -- {hypothesis}"
        )
        start = each.get("start_commit") or rec["start_commit"]
        commit = git.commit_patch(env.worktree, start, patch, message)
        if commit is None:
            continue
        ref = ref_name(run_id, env.cycle, each.get("candidate"))
        git.worktree_git(env.worktree, "update-ref", ref, commit)
        each["preserved"] = ref

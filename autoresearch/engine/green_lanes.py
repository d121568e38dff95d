"""Parallel Green (`agent.parallel_green: k`): the stage's findings in groups that name no
file in common, worked on by k lane jobs, and the groups' commits applied back in order.

Each lane `gK` is a job of its own (rule green_lane) with its own detached worktree; it
works on each of its groups from the stage's start commit, in a conversation that is told
only that group's findings, and writes what it did to `green-lanes/gK.json`. The green
job then applies the groups' commits onto the session branch in finding order (`merge`):
a group whose commits change a file an earlier group changed, or no longer apply, is
skipped whole, with the reason. The gate then settles the applied stack as a batch.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autoresearch.agents import ledger
from autoresearch.agents.backends.base import StageFailed, StageLimits, StageRun, Usage
from autoresearch.engine import findings
from autoresearch.engine.findings import Finding
from autoresearch.engine.stage import StageEnv
from autoresearch.engine.teams import GreenWork, ends_stage, fix_findings, turns_per_finding
from autoresearch.gate.keep import gate_for
from autoresearch.safety import git, worktrees
from autoresearch.safety.protect import ProtectedChange
from autoresearch.session.changesets import Groups
from autoresearch.session.files import read_json, write_json

APPLIED, SKIPPED, NOTHING = "applied", "skipped", "nothing to apply"

# A path-like word of a finding's text: `pkg/mod.py`, `setup.cfg` (no `:line` part).
_PATHLIKE = re.compile(r"[\w.\-/]+")


def lanes_of(spec: Any) -> int:
    """The spec's `agent.parallel_green` (1: Green is one job, as without the key)."""
    return int(spec.agent.get("parallel_green") or 1)


def lane_ids(k: int) -> list[str]:
    return [f"g{i}" for i in range(1, k + 1)]


def named_files(finding: Finding, tracked: frozenset[str]) -> frozenset[str]:
    """The files a finding names: its location's, and each tracked path its title, issue
    or impact mentions (a finding about a call into another module names both)."""
    names = set()
    where = finding.location.strip().partition(":")[0].strip().removeprefix("./")
    if where:
        names.add(where)
    for text in (finding.title, finding.issue, finding.impact):
        for word in _PATHLIKE.findall(text):
            word = word.rstrip(".").removeprefix("./")
            if word in tracked:
                names.add(word)
    return frozenset(names)


def file_groups(found: list[Finding], tracked: frozenset[str]) -> list[list[Finding]]:
    """The findings in groups such that no two groups name a file in common, each group in
    finding order, the groups in the order of their first finding. A finding that names
    no file is a group of its own: what it will touch is unknown until it is done, and
    `merge` skips it if that turns out to be an earlier group's file."""
    groups = Groups(len(found))
    owner: dict[str, int] = {}
    for i, finding in enumerate(found):
        for name in sorted(named_files(finding, tracked)):
            groups.join(owner.setdefault(name, i), i)
    return [[found[i] for i in members] for members in groups.sets()]


def deal(groups: list[list[Finding]], k: int) -> list[str]:
    """The lane of each group: each, in order, to the lane with the fewest findings so far
    (the first such lane on a tie), so the lanes' work is about even and the same on
    every rerun."""
    ids = lane_ids(k)
    load = dict.fromkeys(ids, 0)
    lanes = []
    for group in groups:
        lane = min(ids, key=lambda lane: load[lane])
        load[lane] += len(group)
        lanes.append(lane)
    return lanes


def plan(env: StageEnv, start: str, sanitized_md: Path) -> tuple[list[list[Finding]], list[str]]:
    """The stage's groups and the lane of each: a function of the findings and the start
    commit's files alone, so every lane and the green job compute the same."""
    todo = findings.parse(Path(sanitized_md).read_text())
    listed = git.worktree_git(env.worktree, "ls-tree", "-r", "-z", "--name-only", start)
    groups = file_groups(todo, frozenset(p for p in listed.split("\0") if p))
    return groups, deal(groups, lanes_of(env.spec))


# --- a lane ---------------------------------------------------------------------------


@dataclasses.dataclass
class LaneEnv(StageEnv):
    """One lane's Green: its own worktree; the cycle's files are the stage's. The lanes
    spend the stage's money (and, without turns per finding, its turns) side by side, so
    each gets the part of them its share of the findings is: together they never have
    more than the stage. Turns per finding are each finding's, in any lane."""

    lane: str = ""
    share: float = 1.0

    @property
    def worktree(self) -> Path:
        return self.layout.worktree(_place(self.lane)).resolve()

    @property
    def place(self) -> str:
        return _place(self.lane)

    @property
    def label(self) -> str:
        return f"cycle {self.cycle:03d} lane {self.lane}"

    def limits(self) -> StageLimits:
        limits = super().limits()
        # Turns counted per finding (agent.max_turns_per_finding) are each conversation's
        # own, whatever the lane: only the stage's shared turns are split by share.
        if limits.max_turns is not None and not self.spec.agent.get("max_turns_per_finding"):
            limits.max_turns = int(limits.max_turns * self.share)
        if limits.max_cost_usd is not None:
            limits.max_cost_usd = limits.max_cost_usd * self.share
        if self.spec.budget_usd is not None:
            # Each lane's run may spend what is left of the session's budget, as any stage
            # may: side by side, they may spend only their shares of it together.
            spent = ledger.session_totals(self.layout.root).cost_usd
            left = max(0.0, self.spec.budget_usd - spent) * self.share
            limits.max_cost_usd = min(
                left, limits.max_cost_usd if limits.max_cost_usd is not None else left
            )
        return limits


def _place(lane: str) -> str:
    return f"green-{lane}"


def lane_env(env: StageEnv, lane: str, share: float) -> LaneEnv:
    values = {f.name: getattr(env, f.name) for f in dataclasses.fields(env)}
    return LaneEnv(**values, lane=lane, share=share)


def _ensure_worktree(env: LaneEnv, start: str) -> None:
    """The lane's detached worktree, made on first use where the session's other worktrees
    live, and reused by the lane in every cycle."""
    link = env.layout.worktree(_place(env.lane))
    if not (link / ".git").exists():
        store = Path(env.record.worktrees) if env.record.worktrees else env.layout.root
        real = worktrees.real_place(link, store, "tracks", _place(env.lane))
        try:
            git.add_detached_worktree(Path(env.record.target), real, start)
        except git.StaleWorktree:
            # An earlier session's lane on a repository since deleted (a target made
            # again at the same path): set aside, as setup does the session's worktree.
            aside = worktrees.set_aside(real)
            env.log(f"{real} belonged to a repository that is gone; moved it to {aside}")
            git.add_detached_worktree(Path(env.record.target), real, start)
        worktrees.link(link, real)


def work_lane(env: StageEnv, lane: str, sanitized_md: Path, out: Path) -> None:
    """Lane `lane`'s groups, each from the stage's start commit in the lane's worktree and
    in conversations told only that group's findings; what each did goes to `out`."""
    if env.track:
        raise StageFailed("agent.parallel_green: a broad track's Green runs as one job")
    start = env.stage_record("red")["end_commit"]
    groups, lanes = plan(env, start, sanitized_md)
    mine = [group for group, its in zip(groups, lanes, strict=True) if its == lane]
    total = sum(len(g) for g in groups)
    here = lane_env(env, lane, sum(len(g) for g in mine) / total if total else 0.0)
    _ensure_worktree(here, start)
    began = time.monotonic()
    runs: list[StageRun] = []  # the lane's conversations, held together to its limits
    done: list[dict[str, Any]] = []
    for group in mine:
        here.begin(start)
        part = GreenWork(runs=runs)
        first = len(runs)
        if not runs or not ends_stage(runs[-1], turns_per_finding(here) is not None):
            # `group` in the brief's data: the script backend's key for this group's steps.
            todo = {f.id: f for f in group}
            fix_findings(here, todo, gate_for(here), part, began, data={"group": group[0].id})
        if git.is_dirty(here.worktree):
            git.restore(here.worktree)  # an unfinished fix is never kept
        done.append(
            {
                "findings": [f.id for f in group],
                "fixed": part.book.fixed,
                "skipped": part.book.skipped,
                "refusals": part.refusals,
                "runs": [asdict(r) for r in runs[first:]],
            }
        )
    write_json(out, {"lane": lane, "start_commit": start, "groups": done})
    env.log(f"green lane {lane}: {len(mine)} group(s) of {sum(len(g) for g in mine)} finding(s)")


def _run_of(record: dict[str, Any]) -> StageRun:
    return StageRun(
        Usage(**record["usage"]), record["turns"], record["stop_reason"], record["detail"]
    )


# --- the green job: the lanes' commits onto the session branch --------------------------


def merge(
    env: StageEnv, start: str, todo: dict[str, Finding], lane_files: list[Path]
) -> tuple[GreenWork, list[dict[str, Any]]]:
    """Apply the lanes' groups onto the worktree (at `start`), group by group in the order
    of their first finding; returns what they did and one record per group.

    A group is applied whole or not at all: one that changes a file an earlier applied
    group changed is skipped (each group's agent saw the file as it was at the start, so
    the two changes were never seen together), and so is one whose commits no longer
    apply or are refused by the protection check."""
    order = {fid: i for i, fid in enumerate(todo)}
    entries: list[tuple[str, dict[str, Any]]] = []
    for path in lane_files:
        record = read_json(path)
        if record is None or record.get("start_commit") != start:
            raise StageFailed(
                f"{path}: made for another start commit than the stage's ({start[:10]}); "
                "rerun its green_lane job"
            )
        entries += [(record["lane"], group) for group in record["groups"]]
    entries.sort(key=lambda entry: order.get(entry[1]["findings"][0], len(order)))
    work = GreenWork()
    changed_by: dict[str, str] = {}  # file -> the first finding of the group that changed it
    out = []
    for lane, group in entries:
        work.runs += [_run_of(r) for r in group["runs"]]
        work.refusals.update(group["refusals"])
        work.book.skipped += group["skipped"]
        fixed = group["fixed"]
        status, reason = (APPLIED, "") if fixed else (NOTHING, "")
        if fixed:
            applied, reason = _apply(env, group["findings"][0], fixed, changed_by)
            if applied is None:
                status = SKIPPED
                env.log(f"green: the group of {', '.join(group['findings'])} skipped: {reason}")
                why = f"not kept: its group's commits were not applied: {reason}"
                work.book.skipped += [
                    {"id": r["id"], "key": r["key"], "reason": why} for r in fixed
                ]
            else:
                work.book.fixed += applied
        out.append(
            {
                "lane": lane,
                "findings": group["findings"],
                "commits": [r["commit"] for r in fixed],
                "status": status,
                **({"reason": reason} if status == SKIPPED else {}),
            }
        )
    return work, out


def _apply(
    env: StageEnv, first: str, fixed: list[dict[str, Any]], changed_by: dict[str, str]
) -> tuple[list[dict[str, Any]] | None, str]:
    """A group's fix commits on top of the worktree's HEAD, with the new sha of each; None
    and why, with the worktree as it was, when one is not applied."""
    worktree = env.worktree
    before = git.head(worktree)
    files: set[str] = set()
    for r in fixed:
        # Both sides of a rename: the file it left is changed too.
        names = git.worktree_git(
            worktree, "diff", "--name-only", "--no-renames", "-z", f"{r['commit']}^", r["commit"]
        )
        files |= {p for p in names.split("\0") if p}
    clash = sorted(p for p in files if p in changed_by)
    if clash:
        return None, f"it changes {clash[0]}, which the group of {changed_by[clash[0]]} changed"
    applied = []
    for r in fixed:
        sha = None
        if git.apply_commit(worktree, r["commit"]):
            try:
                sha = env.protection.commit(worktree, r["message"], staged=True)
            except ProtectedChange as err:
                git.reset_to(worktree, before)
                return None, f"{r['id']}: {err.reason}"
        if sha is None:
            git.reset_to(worktree, before)
            return None, f"{r['id']}'s commit no longer applies onto the session branch"
        applied.append({**r, "commit": sha})
    for name in files:
        changed_by.setdefault(name, first)
    return applied, ""

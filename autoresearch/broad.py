"""Broad mode (seed 000): divergent hypotheses, one independent track each, then a winner.

This module holds the hypotheses (their validation and their Markdown file), where broad
files live, and the mode hooks the engine calls (see modes.py). The stages that only broad
runs — strategist, approval, track set-up, track end, comparison — are in broad_stages.py.

Flow, as rules/broad.smk wires it:
    session → broad_strategist (hypotheses.md) → broad_approve (hypotheses.json; waits for
    sessions/<name>/approved when `approve: manual`) → per hypothesis: broad_track (branch and
    worktree from the base commit) → the sweep cycle rules under cycles/<hid>/NNN/ →
    broad_track_end (tracks/<hid>/result.json) → broad_comparison (comparison.md) → done.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import spec as spec_module
from . import stopping

if TYPE_CHECKING:
    from .layout import SessionLayout
    from .stage import StageEnv

REQUIRED_CATEGORIES = ("obvious", "bold", "creative")
OPTIONAL_CATEGORIES = ("adjacent", "wildcard")
CATEGORIES = REQUIRED_CATEGORIES + OPTIONAL_CATEGORIES
MIN_HYPOTHESES = 3
MAX_HYPOTHESES = 5
DEFAULT_TRACK_CYCLES = 5  # seed 000: max_cycles per track, default 5
HID = re.compile(r"^h[1-9][0-9]*$")
BRANCH = "autoresearch/broad/{name}/{hid}"
# Backends that can play the strategist (ruff is mechanical: it has no ideas).
STRATEGIST_BACKENDS = ("claude", "script")


class HypothesisError(ValueError):
    """A set of hypotheses broad mode cannot run; the message says what is wrong."""


class BroadError(RuntimeError):
    """A broad stage cannot go on; printed for the user as it is, without a traceback."""


@dataclass(frozen=True)
class Hypothesis:
    id: str
    category: str
    name: str
    statement: str

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Hypothesis:
        if not isinstance(data, dict):
            raise HypothesisError(f"{where}: expected a mapping with id, category, name, statement")
        missing = [k for k in ("id", "category", "name", "statement") if not data.get(k)]
        if missing:
            raise HypothesisError(f"{where}: {', '.join(missing)} not set")
        return cls(
            id=str(data["id"]).strip(),
            category=str(data["category"]).strip().lower(),
            name=" ".join(str(data["name"]).split()),
            statement=" ".join(str(data["statement"]).split()),
        )


# --- validation ----------------------------------------------------------------------


def validate(items: list[Hypothesis]) -> tuple[list[Hypothesis], list[str]]:
    """The set broad mode runs, and notes on what was pruned; HypothesisError if unusable.

    3 to 5 hypotheses with at least one obvious, one bold and one creative. More than five
    are pruned to five: the first of each required category is kept, the other places go
    to the earliest remaining proposals, and proposal order is preserved.
    """
    seen: set[str] = set()
    for item in items:
        if not HID.match(item.id):
            raise HypothesisError(f"hypothesis id {item.id!r} is not of the form h1, h2, ...")
        if item.id in seen:
            raise HypothesisError(f"hypothesis id {item.id} is used twice")
        seen.add(item.id)
        if item.category not in CATEGORIES:
            raise HypothesisError(
                f"{item.id}: category {item.category!r} is not one of {', '.join(CATEGORIES)}"
            )
        if not item.name or not item.statement:
            raise HypothesisError(f"{item.id}: a hypothesis needs a name and a statement")
    if len(items) < MIN_HYPOTHESES:
        raise HypothesisError(
            f"only {len(items)} hypotheses; broad mode needs {MIN_HYPOTHESES} to "
            f"{MAX_HYPOTHESES} (at least one obvious, one bold and one creative)"
        )
    present = {item.category for item in items}
    missing = [c for c in REQUIRED_CATEGORIES if c not in present]
    if missing:
        raise HypothesisError(
            f"no {' and no '.join(missing)} hypothesis; the set needs at least one obvious, "
            "one bold and one creative (diversity is the point of broad mode)"
        )
    if len(items) <= MAX_HYPOTHESES:
        return list(items), []
    keep: set[str] = set()
    for category in REQUIRED_CATEGORIES:
        keep.add(next(i.id for i in items if i.category == category))
    for item in items:
        if len(keep) >= MAX_HYPOTHESES:
            break
        keep.add(item.id)
    kept = [i for i in items if i.id in keep]
    dropped = [i for i in items if i.id not in keep]
    notes = [f"pruned {i.id} [{i.category}] {i.name} (more than {MAX_HYPOTHESES})" for i in dropped]
    return kept, notes


def from_spec(values: list[Any]) -> list[Hypothesis]:
    return [Hypothesis.from_dict(v, f"hypotheses[{n}]") for n, v in enumerate(values)]


def check_spec(values: dict[str, Any], name: str) -> None:
    """Preflight (nothing written yet): the spec must say what the tracks are about."""
    where = f"config/sessions/{name}.yaml"
    given = values.get("hypotheses")
    aspiration = (values.get("aspiration") or "").strip()
    if not given and not aspiration:
        raise spec_module.SpecError(
            f"{where}: broad mode needs key 'aspiration' (one sentence: what you want more of, "
            "or what should change) or key 'hypotheses' (3 to 5 of {id, category, name, "
            "statement})"
        )
    if given:
        try:
            validate(from_spec(list(given)))
        except HypothesisError as err:
            raise spec_module.SpecError(f"{where}: key 'hypotheses': {err}") from None
        return
    backend = values["agent"]["backend"]
    if backend not in STRATEGIST_BACKENDS:
        raise spec_module.SpecError(
            f"{where}: agent.backend {backend!r} cannot propose hypotheses; list them under "
            "key 'hypotheses', or set key 'agent.backend' to claude"
        )


# --- hypotheses.md -------------------------------------------------------------------

HEADING = re.compile(r"^##\s+(\S+)\s+\[([^\]]*)\]\s*(.*?)\s*$")
MD_HELP = (
    "<!-- One '## <id> [<category>] <name>' heading per hypothesis, its one-sentence\n"
    "statement below it. Categories: obvious, bold, creative (each at least once),\n"
    "adjacent, wildcard. Three to five hypotheses. -->"
)


def render_markdown(
    name: str, aspiration: str | None, items: list[Hypothesis], source: str, notes: list[str]
) -> str:
    lines = [f"# Hypotheses: {name}", "", f"Aspiration: {aspiration or '(none given)'}"]
    lines += [f"Source: {source}", "", MD_HELP, ""]
    for item in items:
        lines += [f"## {item.id} [{item.category}] {item.name}", item.statement, ""]
    if notes:
        lines += ["<!-- " + "; ".join(notes) + " -->", ""]
    return "\n".join(lines)


def parse_markdown(text: str, where: str) -> list[Hypothesis]:
    """Read hypotheses.md back (after a person may have edited it)."""
    items: list[Hypothesis] = []
    current: list[str] | None = None
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)

    def close() -> None:
        if current is not None:
            hid, category, name = current[:3]
            statement = " ".join(" ".join(current[3:]).split())
            if not statement:
                raise HypothesisError(f"{where}: {hid} has no statement under its heading")
            items.append(Hypothesis(hid, category.strip().lower(), name, statement))

    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            close()
            match = HEADING.match(line)
            if not match:
                raise HypothesisError(
                    f"{where}:{number}: expected '## <id> [<category>] <name>', got {line!r}"
                )
            current = [match.group(1), match.group(2), match.group(3)]
        elif current is not None and line.strip():
            current.append(line.strip())
    close()
    return items


# --- files ---------------------------------------------------------------------------


def hypotheses_md(layout: SessionLayout) -> Path:
    return layout.root / "hypotheses.md"


def approved_set(layout: SessionLayout) -> Path:
    """The approved, validated hypotheses (machine-readable); its presence = approved."""
    return layout.root / "hypotheses.json"


def approval_marker(layout: SessionLayout) -> Path:
    """The file a person creates to approve hypotheses.md (`approve: manual`)."""
    return layout.root / "approved"


def track_dir(layout: SessionLayout, hid: str) -> Path:
    return layout.root / "tracks" / hid


def track_meta(layout: SessionLayout, hid: str) -> Path:
    """Written when the track's branch and worktree exist; StageEnv.track_base reads it."""
    return track_dir(layout, hid) / "track.json"


def track_result(layout: SessionLayout, hid: str) -> Path:
    return track_dir(layout, hid) / "result.json"


def comparison_md(layout: SessionLayout) -> Path:
    return layout.root / "comparison.md"


def comparison_json(layout: SessionLayout) -> Path:
    return layout.root / "comparison.json"


def load_approved(layout: SessionLayout) -> dict[str, Any]:
    return json.loads(approved_set(layout).read_text())


def approved_hypotheses(layout: SessionLayout) -> list[Hypothesis]:
    return [Hypothesis(**h) for h in load_approved(layout)["hypotheses"]]


def known_hypotheses(layout: SessionLayout) -> list[Hypothesis]:
    """The approved set, or else what hypotheses.md proposes now (for status and summaries)."""
    if approved_set(layout).exists():
        return approved_hypotheses(layout)
    path = hypotheses_md(layout)
    if path.exists():
        try:
            return parse_markdown(path.read_text(), str(path))
        except HypothesisError:
            return []
    return []


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


# --- hooks ---------------------------------------------------------------------------


def red_scope(env: StageEnv) -> dict[str, Any] | None:
    """Red sees this track's hypothesis and the aspiration, nothing of other tracks."""
    meta = read_json(track_meta(env.layout, env.track)) if env.track else None
    if not meta:
        return None
    return {"hypothesis": dict(meta["hypothesis"]), "aspiration": meta.get("aspiration")}


# Decisions made in this process but not yet on disk (evaluate writes decision.json last,
# after session.md), so the hypothesis table can show the current track's new status.
_pending: dict[tuple[str, str], dict[str, Any]] = {}


def apply_policy(env: StageEnv, decision: dict[str, Any]) -> None:
    """Per-track stop rules (seed 000): max_cycles, two cycles without a Green commit,
    tests broken irrecoverably. The status goes to the hypothesis table."""
    prev = env.previous_decision()
    cap = stopping.cycle_cap(env.spec, DEFAULT_TRACK_CYCLES)
    status, reason = "complete", None
    if decision.get("session_stop"):
        status, reason = "aborted", decision["session_stop"]
    elif decision["broken"]:
        status = "aborted"
        reason = "tests broke in this cycle and reverting did not bring them back"
    elif prev is not None and not decision["fixed"] and not prev.get("fixed"):
        reason = "two consecutive cycles with zero Green commits"
    elif env.cycle >= cap:
        reason = f"max_cycles reached ({cap} per track)"
    decision["stop"] = reason is not None
    decision["reason"] = reason
    decision["track_status"] = status if reason else "in-progress"
    decision["observations"] = observations(env, decision)
    _pending[(str(env.layout.root), env.track)] = decision


def observations(env: StageEnv, d: dict[str, Any]) -> str:
    meta = read_json(track_meta(env.layout, env.track)) or {}
    hyp = meta.get("hypothesis") or {}
    parts = [
        f"Hypothesis {env.track} [{hyp.get('category', '?')}] {hyp.get('name', '')}: "
        f"Red reported {d['findings']} findings, {len(d['fixed'])} fixes kept, "
        f"{len(d['skipped'])} skipped, {d['refactor_changes']} refactor changes; "
        f"{d['commits_total']} commits on the track so far."
    ]
    if d["reverted"]:
        parts.append(f"{len(d['reverted'])} commits reverted because the tests broke.")
    return " ".join(parts)


def track_status(layout: SessionLayout, hid: str, pending: dict[str, Any] | None = None) -> str:
    """not-started | in-progress | complete | aborted, from the files on disk."""
    result = read_json(track_result(layout, hid))
    if result:
        return result["status"]
    decisions = [
        json.loads(layout.decision(n, hid).read_text()) for n in layout.completed_cycles(hid)
    ]
    if pending is not None:
        decisions = [d for d in decisions if d["cycle"] != pending["cycle"]] + [pending]
    if decisions and decisions[-1].get("stop"):
        return decisions[-1].get("track_status") or "complete"
    if decisions or track_meta(layout, hid).exists():
        return "in-progress"
    return "not-started"


def branch_of(layout: SessionLayout, hid: str) -> str:
    meta = read_json(track_meta(layout, hid))
    return meta["branch"] if meta else BRANCH.format(name=layout.name, hid=hid)


def hypothesis_table(layout: SessionLayout, env: StageEnv | None = None) -> list[str]:
    items = known_hypotheses(layout)
    if not items:
        return ["(the strategist has not proposed hypotheses yet)"]
    lines = [
        "| ID | Category | Name | Hypothesis | Branch | Status |",
        "|----|----------|------|------------|--------|--------|",
    ]
    approved = approved_set(layout).exists()
    for item in items:
        pending = _pending.get((str(layout.root), item.id)) if env else None
        status = track_status(layout, item.id, pending) if approved else "awaiting approval"
        cells = [item.id, item.category, item.name, item.statement, branch_of(layout, item.id)]
        cells = [c.replace("|", "\\|") for c in cells]
        lines.append("| " + " | ".join(cells + [status]) + " |")
    return lines


def summary_sections(env: StageEnv) -> str:
    aspiration = (env.spec.get("aspiration") or "").strip() or "(none given)"
    lines = ["## Aspiration (broad only)", aspiration, "", "## Hypotheses (broad only)"]
    lines += hypothesis_table(env.layout, env)
    return "\n".join(lines) + "\n"


def status_lines(layout: SessionLayout, values: dict[str, Any]) -> list[str]:
    lines = ["hypotheses:"] + [f"  {line}" for line in hypothesis_table(layout)]
    if values.get("approve") == "manual" and not approved_set(layout).exists():
        if hypotheses_md(layout).exists() and not approval_marker(layout).exists():
            lines.append(
                f"waiting for approval: edit {rel(hypotheses_md(layout))}, then create "
                f"{rel(approval_marker(layout))} and run again"
            )
    comparison = read_json(comparison_json(layout))
    if comparison:
        winner = comparison.get("winner")
        lines.append(f"winner: {winner['id']} ({winner['branch']})" if winner else "winner: none")
    return lines


def write_done(env: StageEnv, out: Path) -> None:
    from .broad_stages import write_done as write

    write(env, out)


def rel(path: Path) -> str:
    """A session path as the user types it (relative to where snakemake runs)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def as_dicts(items: list[Hypothesis]) -> list[dict[str, str]]:
    return [asdict(i) for i in items]

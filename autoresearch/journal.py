"""The human-facing session files: session.md, results.tsv and ideas.md.

session.md is derived: it is re-rendered from setup.json, the frozen spec and every
cycle's decision.json, so it can never drift from what actually happened.
"""

from __future__ import annotations

import csv
import datetime as dt
import fcntl
import io
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .layout import SessionLayout

if TYPE_CHECKING:
    from .session import SetupRecord

RESULTS_COLUMNS = [
    "cycle",
    "team",
    "status",
    "tests_pass",
    "description",
    "files_changed",
    "timestamp",
    "track",
    "tokens",
    "cost_usd",
]


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _atomic(path: Path, text: str) -> None:
    # A per-writer temporary name: parallel broad tracks rewrite the same session files,
    # and a shared name lets one writer rename away the other's half-written file. Local
    # jobs are threads of one process (the Slurm tests caught two track ends colliding).
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


@contextmanager
def _locked(layout: SessionLayout) -> Iterator[None]:
    """Serialise read-modify-write of results.tsv and ideas.md (parallel broad tracks)."""
    layout.root.mkdir(parents=True, exist_ok=True)
    with open(layout.root / ".journal.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def init_files(layout: SessionLayout, record: SetupRecord, spec: dict[str, Any]) -> None:
    if not layout.results.exists():
        _atomic(layout.results, "\t".join(RESULTS_COLUMNS) + "\n")
    if not layout.ideas.exists():
        _atomic(layout.ideas, f"# Ideas backlog: {layout.name}\n\n")
    write_summary(layout, record, spec, [])


def read_results(layout: SessionLayout) -> list[dict[str, str]]:
    if not layout.results.exists():
        return []
    with layout.results.open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def upsert_results(layout: SessionLayout, track: str, cycle: str, rows: list[dict]) -> None:
    """Replace this cycle's rows (a rerun never duplicates them) and keep the rest."""
    with _locked(layout):
        kept = [
            r for r in read_results(layout) if not (r["track"] == track and r["cycle"] == cycle)
        ]
        out = io.StringIO()
        writer = csv.DictWriter(out, RESULTS_COLUMNS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for row in kept + [{**r, "track": track, "cycle": cycle} for r in rows]:
            writer.writerow({k: _cell(row.get(k, "")) for k in RESULTS_COLUMNS})
        _atomic(layout.results, out.getvalue())


def _cell(value: Any) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def record_ideas(layout: SessionLayout, heading: str, lines: list[str]) -> None:
    """Put a block under `heading` in ideas.md, replacing an earlier one (idempotent)."""
    with _locked(layout):
        _record_ideas(layout, heading, lines)


def _record_ideas(layout: SessionLayout, heading: str, lines: list[str]) -> None:
    text = (
        layout.ideas.read_text() if layout.ideas.exists() else f"# Ideas backlog: {layout.name}\n\n"
    )
    marker = f"## {heading}\n"
    if marker in text:
        start = text.index(marker)
        end = text.find("\n## ", start + len(marker))
        text = text[:start] + (text[end + 1 :] if end != -1 else "")
    if lines:
        text = text.rstrip("\n") + "\n\n" + marker + "".join(f"- {line}\n" for line in lines)
    _atomic(layout.ideas, text)


def load_decisions(layout: SessionLayout, track: str = "") -> list[dict[str, Any]]:
    return [
        json.loads(layout.decision(n, track).read_text()) for n in layout.completed_cycles(track)
    ]


def tried_list(decisions: list[dict[str, Any]]) -> list[str]:
    """What has been fixed or given up on so far (Red must not report it again)."""
    out = []
    for d in decisions:
        track = f"{d['track']} " if d.get("track") else ""  # broad tracks number apart
        out += [f"{track}{f['id']} {f['key']} (fixed)" for f in d.get("fixed", [])]
        out += [
            f"{track}{f['id']} {f['key']} (skipped: {f['reason']})" for f in d.get("skipped", [])
        ]
    return out


def write_summary(
    layout: SessionLayout,
    record: SetupRecord,
    spec: dict[str, Any],
    decisions: list[dict[str, Any]],
    mode_sections: str = "",
) -> None:
    scope = spec.get("scope") or {}
    scope_text = (
        ", ".join(
            [f"include {p}" for p in scope.get("include", [])]
            + [f"exclude {p}" for p in scope.get("exclude", [])]
        )
        or "all files"
    )
    baseline = record.baseline
    lines = [
        f"# Autoresearch session: {record.name}",
        "",
        "## Skill version",
        record.version,
        "",
        "## Mode",
        record.mode,
        "",
        "## Target",
        f"- Path: {record.target}",
        f"- Stack: {record.stack or 'unknown'}",
        f"- Test command: {record.test_command}",
        f"- Linter: {record.linter_command or 'none'}",
        f"- Branch: {record.branch}",
        f"- Config: {record.config_file or 'none'}",
        f"- Scope: {scope_text}",
        f"- Agent backend: {spec['agent']['backend']}",
        "",
        "## Baseline",
        f"- Tests: {'pass' if baseline.get('ok') else 'FAIL'} ({baseline.get('summary')})",
        f"- Base commit: {record.base_commit}",
        f"- Date: {record.date}",
        "",
    ]
    if mode_sections:
        lines += [mode_sections.rstrip(), ""]
    if record.mode == "experiment":
        # Iterations are summarised by the mode's own section; cycle lines would mislead.
        _atomic(layout.summary, "\n".join(lines) + "\n")
        return
    lines += ["## Cycles completed"]
    if not decisions:
        lines.append("(none yet)")
    for d in decisions:
        lines.append(
            f"- Cycle {d['cycle']}{' [' + d['track'] + ']' if d.get('track') else ''}: "
            f"{len(d.get('fixed', []))} fixed, {len(d.get('skipped', []))} skipped, "
            f"{d.get('refactor_changes', 0)} refactor changes, tests "
            f"{'pass' if d.get('tests_pass') else 'FAIL'}"
            f"{', reverted ' + str(len(d['reverted'])) + ' commits' if d.get('reverted') else ''}"
            f" — ending commit {d['end_commit'][:12]}"
        )
    lines += ["", "## What's been tried"]
    tried = tried_list(decisions)
    lines += [f"- {t}" for t in tried] or ["(nothing yet)"]
    lines += ["", "## Open issues"]
    open_issues = decisions[-1].get("open_issues", []) if decisions else []
    lines += [f"- {o}" for o in open_issues] or ["(none)"]
    stop = next((d.get("reason") for d in reversed(decisions) if d.get("stop")), None)
    if stop:
        lines += ["", "## Stopped", stop]
    _atomic(layout.summary, "\n".join(lines) + "\n")

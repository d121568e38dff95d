"""`autoresearch status`: a progress summary read from session files; never runs a stage."""

from __future__ import annotations

import json
from pathlib import Path

from . import __version__, journal, ledger, modes
from .layout import SessionLayout


def session_dirs(sessions: Path) -> list[Path]:
    if not sessions.is_dir():
        return []
    return sorted(p for p in sessions.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def summarize(layout: SessionLayout) -> dict:
    """The figures status prints, from setup.json, decisions, results and the ledger."""
    if not layout.setup.exists():
        return {"name": layout.name, "state": "not started"}
    setup = json.loads(layout.setup.read_text())
    decisions = _all_decisions(layout)
    last = decisions[-1] if decisions else None
    usage = ledger.session_totals(layout.root)
    state = "done" if layout.done.exists() else ("running or paused" if decisions else "set up")
    return {
        "name": layout.name,
        "state": state,
        "mode": setup["mode"],
        "version": setup["version"],
        "cycles": len(decisions),
        "commits": sum(d.get("commits_total", 0) for d in _last_per_track(decisions)),
        "fixes": sum(len(d.get("fixed", [])) for d in decisions),
        "tests": "n/a" if last is None else ("pass" if last.get("tests_pass") else "FAIL"),
        "open_issues": sum(len(d.get("open_issues", [])) for d in _last_per_track(decisions)),
        "cost_usd": usage.cost_usd,
        "tokens": usage.tokens,
        "stopped": stop_reason(layout),
    }


def stop_reason(layout: SessionLayout) -> str | None:
    """The `stopped:` line of done, whatever else the mode writes there."""
    if not layout.done.exists():
        return None
    lines = layout.done.read_text().splitlines()
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("stopped:")), None)


def _all_decisions(layout: SessionLayout) -> list[dict]:
    decisions = journal.load_decisions(layout)
    cycles = layout.cycles()
    if cycles.is_dir():
        for track in sorted(p.name for p in cycles.iterdir() if p.is_dir() and p.name[:1] == "h"):
            decisions += journal.load_decisions(layout, track)
    return decisions


def _last_per_track(decisions: list[dict]) -> list[dict]:
    last: dict[str, dict] = {}
    for d in decisions:
        last[d.get("track", "")] = d
    return list(last.values())


def render_one(layout: SessionLayout) -> str:
    info = summarize(layout)
    if info["state"] == "not started":
        return f"{layout.name}: not started (no setup.json yet)"
    stamp = info["version"]
    version_note = "" if stamp == __version__ else f" (installed: {__version__})"
    lines = [
        f"Session: {info['name']} [{info['state']}]",
        f"Version: autoresearch {stamp}{version_note}",
        f"Mode: {info['mode']}",
        f"Cycles run: {info['cycles']}",
        f"Commits: {info['commits']}",
        f"Fixes kept: {info['fixes']}",
        f"Tests: {info['tests']}",
        f"Open issues: {info['open_issues']}",
        f"Usage: {info['tokens']} tokens, ${info['cost_usd']:.4f}",
    ]
    if info["stopped"]:
        lines.append(f"Stopped: {info['stopped']}")
    spec_path = layout.spec
    if spec_path.exists():
        import yaml

        values = yaml.safe_load(spec_path.read_text())
        lines += modes.status_lines(layout, values)
    return "\n".join(lines)


def render_table(sessions: Path) -> str:
    rows = [summarize(SessionLayout(p.absolute())) for p in session_dirs(sessions)]
    if not rows:
        return f"no sessions under {sessions}/"
    header = ("session", "mode", "state", "cycles", "fixes", "tests", "cost_usd")
    table = [header] + [
        (
            r["name"],
            r.get("mode", "-"),
            r["state"],
            str(r.get("cycles", "-")),
            str(r.get("fixes", "-")),
            r.get("tests", "-"),
            f"{r['cost_usd']:.4f}" if "cost_usd" in r else "-",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    )

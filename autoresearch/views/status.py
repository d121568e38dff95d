"""`autoresearch status`: a progress summary read from session files; never runs a stage."""

from __future__ import annotations

import fcntl
import os
from dataclasses import asdict
from pathlib import Path

from autoresearch import __version__, modes
from autoresearch.agents import ledger
from autoresearch.errors import SessionError, UserError
from autoresearch.measure import measured
from autoresearch.modes.base import Mode, Progress
from autoresearch.safety import git
from autoresearch.session import spec, verify
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import load_record, read_setup
from autoresearch.session.redo import branch_drift


def session_dirs(sessions: Path) -> list[Path]:
    if not sessions.is_dir():
        return []
    return sorted(p for p in sessions.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def mode_of(root: Path) -> tuple[Mode, SessionLayout]:
    """The session's mode (from setup.json) and its layout."""
    setup = read_setup(root / "setup.json")
    try:
        mode = modes.get(setup["mode"])
    except (KeyError, ValueError, UserError):
        raise SessionError(
            f"{root / 'setup.json'}: key 'mode': no mode {setup['mode']!r}"
        ) from None
    return mode, mode.layout(root)


def held_by_a_run(layout: SessionLayout) -> bool:
    """Whether a live run holds the session's run lock (scripts.common takes it, an flock
    that dies with its process): running, not paused. Read from /proc/locks, so asking never
    takes the lock a run or a redo starting that moment would need; elsewhere a shared lock
    is tried and let go at once."""
    try:
        info = layout.run_lock.stat()
    except OSError:
        return False
    key = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return _lock_taken(layout.run_lock)
    return any(
        len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == key
        for fields in (line.split() for line in table.splitlines())  # a waiter's has "->"
    )


def _lock_taken(path: Path) -> bool:
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def summarize(root: Path) -> dict:
    """The figures status prints, from setup.json, decisions, results and the ledger."""
    if not (root / "setup.json").exists():
        return {"name": root.name, "state": "not started"}
    mode, layout = mode_of(root)
    record = load_record(layout)
    progress: Progress = mode.views.progress(layout)
    usage = ledger.session_totals(layout.root)
    done = layout.done.exists()
    started = progress.started
    if done:
        state = "done"
    elif held_by_a_run(layout):
        state = "running"
    else:
        state = "paused" if started else "set up"
    return {
        "name": layout.name,
        "state": state,
        "mode": record.mode,
        "version": record.version,
        **{k: v for k, v in asdict(progress).items() if k != "started"},
        "cost_usd": usage.cost_usd,
        "tokens": usage.tokens,
        "usage": ledger.describe(usage),
        "cost_known": not usage.unpriced,
        "stopped": stop_reason(layout),
        # Every loop whose branch no longer matches its recorded cycles.
        "drift": [line for t in mode.tracks(layout) if (line := branch_drift(layout, record, t))],
    }


def stop_reason(layout: SessionLayout) -> str | None:
    """The `stopped:` line of done, whatever else the mode writes there."""
    if not layout.done.exists():
        return None
    lines = layout.done.read_text().splitlines()
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("stopped:")), None)


def render_one(root: Path) -> str:
    info = summarize(root)
    if info["state"] == "not started":
        return f"{root.name}: not started (no setup.json yet)"
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
        f"Open issues: {info['open_issues']}"
        + (" (re-checked on the current tree)" if info.get("open_rechecked") else ""),
        f"Usage: {info['usage']}",
    ]
    if info["stopped"]:
        lines.append(f"Stopped: {info['stopped']}")
    lines += [f"WARNING: {line}" for line in info["drift"]]
    lines += [line for line in [verify.status_line(root)] if line]
    mode, layout = mode_of(root)
    if layout.spec.exists():
        lines += mode.views.status_lines(layout, spec.load_frozen(layout.spec))
    record = load_record(layout)
    try:
        listed = git.git(Path(record.target), "ls-tree", "-r", "-z", "--name-only",
                         record.base_commit)  # fmt: skip
        files = {p for p in listed.split("\0") if p}
    except (git.GitError, OSError):
        files = set()  # the target is gone or rewritten: the count alone
    where = f"sessions/{layout.name}/setup.json"
    lines += measured.status_lines(record.measured, files, where)
    return "\n".join(lines)


def _row(root: Path) -> dict:
    """A session's row of the table; one the files of which cannot be read says so."""
    try:
        return summarize(root)
    except UserError:
        return {"name": root.name, "state": f"unreadable: autoresearch status {root.name}"}


def render_table(sessions: Path) -> str:
    rows = [_row(p.absolute()) for p in session_dirs(sessions)]
    if not rows:
        return f"no sessions under {sessions}/"
    header = ("session", "mode", "state", "cycles", "fixes", "tests", "cost_usd")
    table = [header] + [
        (
            r["name"],
            r.get("mode", "-"),
            r["state"] + (" (branch changed!)" if r.get("drift") else ""),
            str(r.get("cycles", "-")),
            str(r.get("fixes", "-")),
            r.get("tests", "-"),
            (
                "-"
                if "cost_usd" not in r
                else f"{r['cost_usd']:.4f}" + ("+?" if not r["cost_known"] else "")
            ),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    )

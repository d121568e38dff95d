"""The human-facing session files: session.md, results.tsv and ideas.md.

session.md is derived: it is re-rendered from setup.json, the frozen spec and every
cycle's decision, so it can never drift from what actually happened. Every write of
these shared files happens under the session's journal lock (parallel broad tracks
write them at the same moment).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from autoresearch.engine import findings
from autoresearch.engine.loop import Decision, Extra, Keys, read_decision
from autoresearch.safety.words import count
from autoresearch.session.files import (
    append_line,
    append_text,
    locked,
    read_text_once,
    write_text,
)
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec

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


def init_files(layout: SessionLayout, record: SetupRecord, spec: SessionSpec) -> None:
    with locked(layout.journal_lock):
        if not layout.results.exists():
            write_text(layout.results, "\t".join(RESULTS_COLUMNS) + "\n")
        if not layout.ideas.exists():
            write_text(layout.ideas, f"# Ideas backlog: {layout.name}\n\n")
    write_summary(layout, record, spec, [])


def read_results(layout: SessionLayout) -> list[dict[str, str]]:
    if not layout.results.exists():
        return []
    with layout.results.open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def upsert_results(layout: SessionLayout, track: str, cycle: str, rows: list[dict]) -> None:
    """Replace this cycle's rows (a rerun never duplicates them) and keep the rest. A cycle
    with no rows yet, the usual case, is appended: the file is not rewritten each cycle."""
    track_at = RESULTS_COLUMNS.index("track")
    with locked(layout.journal_lock):
        text = layout.results.read_text() if layout.results.exists() else ""
        earlier = _has_rows(text, cycle, track_at, track)
        out = io.StringIO()
        writer = csv.DictWriter(out, RESULTS_COLUMNS, delimiter="\t", lineterminator="\n")
        new = [{**r, "track": track, "cycle": cycle} for r in rows]
        if text and not earlier:
            writer.writerows({k: _cell(r.get(k, "")) for k in RESULTS_COLUMNS} for r in new)
            append_text(layout.results, out.getvalue())
            return
        kept = [
            r for r in read_results(layout) if not (r["track"] == track and r["cycle"] == cycle)
        ]
        writer.writeheader()
        writer.writerows({k: _cell(r.get(k, "")) for k in RESULTS_COLUMNS} for r in kept + new)
        write_text(layout.results, out.getvalue())


def _has_rows(text: str, cycle: str, track_at: int, track: str) -> bool:
    """Whether results.tsv's `text` holds rows of this cycle of this track. Only the lines
    that start with the cycle are split (cells never hold a tab: _cell), so a long
    session's check does not go through every row."""
    start = text.find(f"\n{cycle}\t")
    while start != -1:
        end = text.find("\n", start + 1)
        cells = text[start + 1 : end if end != -1 else len(text)].split("\t")
        if len(cells) > track_at and cells[track_at] == track:
            return True
        start = text.find(f"\n{cycle}\t", start + 1)
    return False


def _cell(value: Any) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def record_ideas(
    layout: SessionLayout, heading: str, lines: list[str], keys: list[str] | None = None
) -> None:
    """Put a block under `heading` in ideas.md, replacing an earlier one (idempotent).

    With `keys` (one per line: the problem and its place), a line whose key another block
    already holds is left out: a finding held back every cycle is listed once.
    """
    with locked(layout.journal_lock):
        text = (
            layout.ideas.read_text()
            if layout.ideas.exists()
            else f"# Ideas backlog: {layout.name}\n\n"
        )
        marker = f"## {heading}\n"
        if marker in text:
            start = text.index(marker)
            end = text.find("\n## ", start + len(marker))
            text = text[:start] + (text[end + 1 :] if end != -1 else "")
        if keys is not None:
            known = set(re.findall(r"<!-- (.+?) -->", text))
            lines = [
                f"{line} <!-- {key} -->"
                for line, key in zip(lines, keys, strict=True)
                if key not in known
            ]
        if lines:
            text = text.rstrip("\n") + "\n\n" + marker + "".join(f"- {line}\n" for line in lines)
        write_text(layout.ideas, text)


def load_decisions(
    layout: SessionLayout, track: str = "", extra: type[Extra] = Keys
) -> list[Decision]:
    """Every decision of the loop (of `track`), oldest first, the mode's keys read into
    `extra` (the mode's record, when the reader is the mode's).

    Read from the loop's decisions index, one file however long the session (stages, status
    and every progress line ask for them, so reading hundreds of decision.json files each
    time made each cycle slower than the last). The index is checked against the decision
    files at its ends; one that disagrees (a redo moved cycles aside, a decision it never
    saw, a line a crash cut short) is rebuilt from the files. Of a cycle's test run the
    index keeps the counts: the full run stays in its decision.json.
    """
    index = layout.decisions_index(track)
    logged: dict[int, dict[str, Any]] = {}
    if index.exists():
        for line in read_text_once(index).splitlines():
            try:
                decision = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a line a crash cut short: its decision is rewritten on the rerun
            logged[int(decision["cycle"])] = decision
    if _index_matches(layout, track, logged):
        return [Decision.from_json(logged[n], index, extra) for n in sorted(logged)]
    # No lock: the rebuild is atomic, and one that races a new decision's line is found
    # out of date at the next read and rebuilt again.
    decisions = [
        _logged_form(read_decision(layout.decision(n, track)))
        for n in layout.completed_cycles(track)
    ]
    if decisions or index.exists():
        try:
            write_text(index, "".join(orjson.dumps(d).decode() + "\n" for d in decisions))
        except OSError:
            pass  # a reader that may not write (status on a session it does not own)
    return [Decision.from_json(d, index, extra) for d in decisions]


def note_decision(layout: SessionLayout, cycle: int, track: str = "") -> None:
    """Add the cycle's decision, just written, to the loop's decisions index (a rewrite of
    the same cycle, on a rerun, is a later line: the last one stands)."""
    decision = read_decision(layout.decision(cycle, track))
    append_line(layout.decisions_index(track), orjson.dumps(_logged_form(decision)).decode())


# What the index keeps of a decision's test run: its counts. The run itself (test ids,
# output) is in decision.json, read where a cycle is held to it (StageEnv.reference_tests).
_TEST_COUNTS = ("outcome", "ok", "summary", "passed", "failed", "skipped", "errors")


def _logged_form(decision: Decision) -> dict[str, Any]:
    """The decision's line in the index: its JSON, of its test run the counts."""
    logged = decision.to_json()
    tests = logged.get("tests")
    if isinstance(tests, dict):
        logged["tests"] = {k: tests[k] for k in _TEST_COUNTS if k in tests}
    return logged


def _index_matches(layout: SessionLayout, track: str, logged: dict[int, dict[str, Any]]) -> bool:
    """Cycles 1..last are all logged, the last one's decision file exists and the next
    one's does not: two file checks, not one per cycle."""
    if not logged:
        return not layout.decision(1, track).exists()
    last = max(logged)
    return (
        len(logged) == last
        and layout.decision(last, track).exists()
        and not layout.decision(last + 1, track).exists()
    )


def tried_line(decision: dict[str, Any], finding: dict[str, Any], group: str) -> str:
    """One finding of `decision`'s `group` ("fixed" or "skipped"), as the tried list shows it."""
    track = f"{decision['track']} " if decision.get("track") else ""  # tracks number apart
    if group == "skipped":
        return f"{track}{finding['id']} {finding['key']} (skipped: {finding['reason']})"
    return f"{track}{finding['id']} {finding['key']} (fixed)"


TRIED_SHOWN = 40  # the newest tried findings Red is told verbatim


def tried_for_red(tried: list[str], files: list[str], shown: int = TRIED_SHOWN) -> list[str]:
    """The tried list (History.tried_lines, with each finding's file) as Red is told it: the newest
    `shown` verbatim, older ones as counts per file, so a long session's brief stops
    growing. (The harness refuses a repeat of any of them, told or not.)"""
    if len(tried) <= shown:
        return tried
    older = len(tried) - shown
    per_file = Counter(files[:older])
    counts = ", ".join(f"{n} in {place}" for place, n in sorted(per_file.items()))
    return [f"{older} earlier findings, fixed or given up on ({counts})"] + tried[-shown:]


def write_summary(
    layout: SessionLayout,
    record: SetupRecord,
    spec: SessionSpec,
    decisions: list[dict[str, Any]],
    mode_sections: str = "",
    list_cycles: bool = True,
    cycle_lines: list[str] | None = None,
) -> None:
    """Render session.md. `list_cycles` is off for loops whose own section summarises them;
    `cycle_lines`, when given, are its cycle sections, made elsewhere (tally.history)."""
    baseline = record.baseline
    lines = [
        f"# Autoresearch session: {record.name}",
        "",
        "## Skill version",
        f"autoresearch {record.version}",
        "",
        "## Mode",
        record.mode,
        "",
        "## Target",
        f"- Path: {record.target}",
        f"- Stack: {record.stack or 'unknown'}",
        f"- Test command: {record.test_command or 'none (none could be detected)'}",
        f"- Linter: {record.linter_command or 'none'}",
        f"- Branch: {record.branch}",
        f"- Config: {record.config_file or 'none'}",
        f"- Scope: {spec.scope_text}",
        f"- Agent backend: {spec.backend}",
        "",
        "## Baseline",
        f"- Tests: {'pass' if baseline.get('ok') else 'FAIL'} ({baseline.get('summary')})"
        if record.test_command
        else "- Tests: none (no test command)",
        *failing_at_base(baseline),
        f"- Base commit: {record.base_commit}",
        f"- Date: {record.date}",
        "",
    ]
    if mode_sections:
        lines += [mode_sections.rstrip(), ""]
    if list_cycles:
        lines += cycle_lines if cycle_lines is not None else History.of(decisions).sections()
    with locked(layout.journal_lock):
        write_text(layout.summary, "\n".join(lines).rstrip("\n") + "\n")


FAILING_LISTED = 50  # failing ids session.md lists; setup.json has them all


def failing_at_base(baseline: dict[str, Any]) -> list[str]:
    """The tests that already failed at the base, one a line: they may stay failing (the
    gate holds every other test), and a reader should see which they are."""
    ids = sorted(baseline.get("failing_ids") or [])
    if baseline.get("outcome") != "failed" or not ids:
        return []
    lines = ["- Failing at the base (may stay failing; no other test may fail):"]
    lines += [f"  - {test_id}" for test_id in ids[:FAILING_LISTED]]
    if len(ids) > FAILING_LISTED:
        lines.append(f"  - and {len(ids) - FAILING_LISTED} more (setup.json: baseline.failing_ids)")
    return lines


def cycle_line(d: dict[str, Any]) -> str:
    """A cycle as session.md lists it."""
    return (
        f"- Cycle {d['cycle']}{' [' + d['track'] + ']' if d.get('track') else ''}: "
        f"{len(d.get('fixed', []))} fixed, {len(d.get('skipped', []))} skipped, "
        f"{count(d.get('refactor_changes', 0), 'refactor change')}, tests "
        f"{'pass' if d.get('tests_pass') else 'FAIL'}"
        f"{', reverted ' + count(len(d['reverted']), 'commit') if d.get('reverted') else ''}"
        f" — ending commit {(d.get('end_commit') or '?')[:12]}"
    )


@dataclass
class History:
    """What session.md lists of a loop and what Red may not report again, made one
    decision at a time (tally.history keeps it up as the loop grows)."""

    cycle_lines: list[str] = field(default_factory=list)  # one per cycle
    # Each finding fixed or given up on: [its identity, "F-003, fixed", its tried line,
    # its file].
    tried: list[list[str]] = field(default_factory=list)
    open_issues: list[str] = field(default_factory=list)  # the last cycle's
    open_rechecked: bool = False
    stop_reason: str | None = None  # of the last cycle that stopped the loop

    @classmethod
    def of(cls, decisions: list[dict[str, Any]]) -> History:
        history = cls()
        for decision in decisions:
            history.add(decision)
        return history

    def add(self, decision: dict[str, Any]) -> History:
        """This history with the next cycle's decision added (in place)."""
        self.cycle_lines.append(cycle_line(decision))
        for outcome in ("fixed", "skipped"):
            for f in decision.get(outcome) or []:
                key = findings.identity(*findings.title_and_location(f["key"]))
                line = tried_line(decision, f, outcome)
                self.tried.append([key, f"{f['id']}, {outcome}", line, findings.file_of(f["key"])])
        self.open_issues = list(decision.get("open_issues") or [])
        self.open_rechecked = bool(decision.get("open_rechecked"))
        if decision.get("stop"):
            self.stop_reason = decision.get("reason")
        return self

    @property
    def tried_lines(self) -> list[str]:
        return [entry[2] for entry in self.tried]

    @property
    def tried_files(self) -> list[str]:
        return [entry[3] for entry in self.tried]

    def sections(self) -> list[str]:
        """session.md's sections on the loop: its cycles, what was tried, what is open."""
        lines = ["## Cycles completed", *(self.cycle_lines or ["(none yet)"])]
        lines += ["", "## What's been tried"]
        lines += [f"- {t}" for t in self.tried_lines] or ["(nothing yet)"]
        checked = " (re-checked on the current tree)" if self.open_rechecked else ""
        lines += ["", f"## Open issues{checked}"]
        lines += [f"- {o}" for o in self.open_issues] or ["(none)"]
        if self.stop_reason:
            lines += ["", "## Stopped", self.stop_reason]
        return lines

"""The `ruff` backend: a mechanical team that needs no model and no key.

Red reports `ruff check` diagnostics, Green applies ruff's own fix for one
finding at a time, Refactor runs `ruff format` on the files Green changed. It
works only through the toolbox, so every change is sandboxed, test-gated and
committed by the harness exactly as a model's would be.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import worktree_files
from .base import StageBrief, StageFailed, StageRun, Toolbox, Usage

LOCATION = re.compile(r"^(?P<path>.+?):(?P<line>\d+)")
CODE = re.compile(r"^(?P<code>[A-Z]+[0-9]+)\b")
CRITICAL = re.compile(r"^(E9|F63|F7|F82)")
HIGH = re.compile(r"^(B\d|E711|E712|E721|E722|F811|PLE|S\d)")
MEDIUM = re.compile(r"^(F|SIM|C4|PERF|RET)")
IMPACT = {
    "critical": "The code fails at run time or cannot be imported.",
    "high": "Likely incorrect behaviour or errors hidden from the caller.",
    "medium": "Dead or misleading code that hides real problems and slows readers down.",
    "low": "Inconsistent style that makes the code harder to read and review.",
}


def ruff(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        cwd=str(cwd),
        input=stdin,
        capture_output=True,
        text=True,
    )


def diagnostics(
    worktree: Path, *paths: str, select: list[str] | None = None
) -> list[dict[str, Any]]:
    """ruff's findings, never fixed in place (`--no-fix`, whatever the target's config says):
    reporting must not change a file. A ruff that fails is an error, not "no findings".
    `select` checks those rules whatever the project selects (a finding may come from a
    count run with other rules than the project's)."""
    rules = ["--select", ",".join(select)] if select else []
    proc = ruff(
        "check",
        "--output-format=json",
        "--no-cache",
        "--no-fix",
        "--exit-zero",
        *rules,
        *(paths or (".",)),
        cwd=worktree,
    )
    try:
        found = json.loads(proc.stdout or "")
    except json.JSONDecodeError:
        found = None
    if proc.returncode != 0 or not isinstance(found, list):
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [
            f"exit {proc.returncode}"
        ]
        raise StageFailed(
            f"ruff check failed in {worktree} ({detail[0]}); check agent.ruff.select and "
            "the target's ruff config"
        )
    return readable_only(worktree, found)


def readable_only(worktree: Path, diags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ruff follows links: drop what it says about a file the worktree reader refuses (a link
    out of the worktree), whose messages would carry names from outside into the findings."""
    root = Path(worktree).resolve()
    kept = []
    for diag in diags:
        name = Path(diag.get("filename") or "")
        for base in (Path(worktree).absolute(), root):
            if name.is_relative_to(base):
                rel = name.relative_to(base).as_posix()
                if worktree_files.why_unreadable(worktree, rel) is None:
                    kept.append(diag)
                break
    return kept


def severity_of(code: str) -> str:
    for level, pattern in (("critical", CRITICAL), ("high", HIGH), ("medium", MEDIUM)):
        if pattern.match(code):
            return level
    return "low"


def apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """Apply ruff's fix edits (1-based rows and columns) from the end backwards."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(loc: dict[str, int]) -> int:
        row = loc["row"] - 1
        return offsets[min(row, len(lines))] + loc["column"] - 1

    for edit in sorted(edits, key=lambda e: offset(e["location"]), reverse=True):
        start, end = offset(edit["location"]), offset(edit["end_location"])
        text = text[:start] + (edit.get("content") or "") + text[end:]
    return text


def issue_of(diag: dict[str, Any], code: str) -> str:
    """What the rule says about this line, without repeating the title."""
    name = (diag.get("url") or "").rstrip("/").rsplit("/", 1)[-1]
    rule = f"ruff rule {code}" + (f" ({name})" if name else "")
    fixable = "ruff has an automatic fix" if diag.get("fix") else "ruff has no automatic fix"
    return f"Flagged by {rule}; {fixable}."


class RuffBackend:
    name = "ruff"

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        # agent.ruff.select: the rules Red reports (default: the target's own ruff config).
        self.select = list((settings or {}).get("select") or [])

    def still_reported(self, worktree: Path, keys: list[str]) -> set[str]:
        """Which of these findings (`CODE message (path:line)`) ruff still reports on the
        tree as it is now; a line number may have moved."""
        wanted: dict[str, list[tuple[str, str]]] = {}
        for key in keys:
            title, _, rest = key.rpartition(" (")
            code, _, message = title.partition(" ")
            path = rest.rstrip(")").rsplit(":", 1)[0]
            wanted.setdefault(path, []).append((key, f"{code} {message}"))
        present: set[str] = set()
        for path, items in wanted.items():
            if not (Path(worktree) / path).is_file():
                continue
            now = {f"{d.get('code')} {d['message']}" for d in diagnostics(worktree, path)}
            present |= {key for key, title in items if title in now}
        return present

    def run(self, brief: StageBrief, toolbox: Toolbox, progress: Callable[[str], None]) -> StageRun:
        worktree = Path(brief.data["worktree"])
        team = brief.team
        if team == "red":
            turns = self._red(worktree, brief, toolbox, progress)
        elif team in ("green", "fix"):  # fix: one error, in the shape of a Green finding
            turns = self._green(worktree, brief, toolbox, progress)
        elif team == "refactor":
            turns = self._refactor(worktree, brief, toolbox, progress)
        elif team == "auditor":
            turns = self._security(worktree, brief, toolbox, progress)
        else:
            return StageRun(Usage(), 0, "error", f"the ruff backend has no {team} team")
        return StageRun(Usage(), turns, "finished")

    def _red(self, worktree, brief, toolbox, progress) -> int:
        tried = " ".join(brief.data.get("tried", []))
        turns = 0
        for diag in diagnostics(worktree, select=self.select):
            path = Path(diag["filename"]).resolve().relative_to(worktree.resolve()).as_posix()
            code = diag.get("code") or "syntax"
            title = f"{code} {diag['message']}"
            if f"{title} ({path}:" in tried:
                continue  # reported before: fixed or given up on
            turns += 1
            result = toolbox.call(
                "report_finding",
                {
                    "severity": severity_of(code),
                    "title": title,
                    "location": f"{path}:{diag['location']['row']}",
                    "issue": issue_of(diag, code),
                    "impact": IMPACT[severity_of(code)],
                },
            )
            progress(f"turn {turns}: report_finding {title} -> {result.content}")
        return turns

    def _security(self, worktree, brief, toolbox, progress) -> int:
        """ruff's `S` rules as the security auditor: the diagnostics of this iteration's vector."""
        from .ruff_security import IGNORED, matches, rule_for

        vector = brief.data.get("vector") or {}
        files = brief.data.get("files")  # diff_base: only the changed files
        reported = set(brief.data.get("reported") or [])
        proc = ruff(
            "check", "--no-cache", "--exit-zero", "--output-format=json", "--select", "S",
            "--ignore", ",".join(IGNORED), *(files or ["."]), cwd=worktree,
        )  # fmt: skip
        try:
            diags = readable_only(worktree, json.loads(proc.stdout or "[]"))
        except json.JSONDecodeError:
            diags = []
        turns = 0
        for diag in diags:
            code = diag.get("code") or ""
            rule = rule_for(code)
            if not matches(rule, vector):
                continue
            path = Path(diag["filename"]).resolve().relative_to(worktree.resolve()).as_posix()
            row = diag["location"]["row"]
            title = f"{code} {diag['message']}"
            if f"{title} ({path}:{row})" in reported:
                continue
            lines = (worktree_files.read_if_any(worktree, path) or "").splitlines()
            evidence = lines[row - 1].strip() if 0 < row <= len(lines) else diag["message"]
            turns += 1
            result = toolbox.call(
                "report_vulnerability",
                {
                    "title": title,
                    "owasp": rule.owasp,
                    "stride": rule.stride,
                    "cwe": rule.cwe,
                    "location": f"{path}:{row}",
                    "scenario": rule.scenario,
                    "evidence": evidence,
                    "confidence": "likely",
                    "severity": rule.severity,
                    "mitigation": rule.mitigation,
                },
            )
            progress(f"turn {turns}: report_vulnerability {title} -> {result.content}")
        return turns

    def _green(self, worktree, brief, toolbox, progress) -> int:
        turns = 0
        for finding in brief.data.get("findings", []):
            turns += 1
            fid = finding["id"]
            # fix: a change must lower the count, so imports it leaves unused go with it.
            action, args = self._fix_one(worktree, finding, toolbox, tidy=brief.team == "fix")
            result = toolbox.call(action, args)
            progress(f"turn {turns}: {action} {fid} -> {result.content.splitlines()[0]}")
        return turns

    def _fix_one(self, worktree, finding, toolbox, tidy=False) -> tuple[str, dict[str, str]]:
        fid = finding["id"]
        where, code = LOCATION.match(finding["location"]), CODE.match(finding["title"])
        if not where or not code:
            return "skip_finding", {"finding_id": fid, "reason": "not a ruff finding"}
        path, line = where["path"], int(where["line"])
        message = finding["title"][len(code["code"]) :].strip()
        candidates = [
            d
            for d in diagnostics(worktree, path, select=[code["code"]])
            if d.get("code") == code["code"] and d["message"] == message
        ]
        if not candidates:
            return "skip_finding", {"finding_id": fid, "reason": "ruff no longer reports it"}
        diag = min(candidates, key=lambda d: abs(d["location"]["row"] - line))
        fix = diag.get("fix")
        if not fix or not fix.get("edits"):
            return "skip_finding", {
                "finding_id": fid,
                "reason": f"ruff has no automatic fix for {code['code']}",
            }
        unused_before = (
            {d["message"] for d in diagnostics(worktree, path, select=["F401"])} if tidy else set()
        )
        read = toolbox.call("read_file", {"path": path})
        if read.is_error:
            return "skip_finding", {"finding_id": fid, "reason": read.content}
        try:
            original = worktree_files.read_text(worktree, path, errors="strict")
        except worktree_files.Refused as err:
            return "skip_finding", {"finding_id": fid, "reason": str(err)}
        written = toolbox.call(
            "write_file", {"path": path, "content": apply_edits(original, fix["edits"])}
        )
        if written.is_error:
            return "skip_finding", {"finding_id": fid, "reason": written.content}
        if tidy:
            self._drop_imports_left_unused(worktree, path, unused_before, toolbox)
        return "finish_fix", {"finding_id": fid, "summary": fix.get("message") or diag["message"]}

    def _drop_imports_left_unused(self, worktree, path, before: set[str], toolbox) -> None:
        """Apply ruff's F401 fix to each import the change left unused, one at a time (two
        names of one import line have overlapping edits)."""
        for _ in range(10):
            fresh = [
                d
                for d in diagnostics(worktree, path, select=["F401"])
                if d["message"] not in before and (d.get("fix") or {}).get("edits")
            ]
            if not fresh:
                return
            try:
                text = worktree_files.read_text(worktree, path, errors="strict")
            except worktree_files.Refused:
                return
            edited = apply_edits(text, fresh[0]["fix"]["edits"])
            if toolbox.call("write_file", {"path": path, "content": edited}).is_error:
                return

    def _refactor(self, worktree, brief, toolbox, progress) -> int:
        turns = 0
        for path in brief.data.get("changed_files", []):
            if not path.endswith(".py"):
                continue
            try:
                source = worktree_files.read_text(worktree, path, errors="strict")
            except worktree_files.Refused as err:
                if not isinstance(err, worktree_files.Missing):
                    progress(f"{path}: not read: {err}")
                continue
            formatted = ruff("format", "--stdin-filename", path, "-", cwd=worktree, stdin=source)
            if formatted.returncode != 0 or formatted.stdout == source:
                continue
            turns += 1
            written = toolbox.call("write_file", {"path": path, "content": formatted.stdout})
            if written.is_error:
                progress(f"turn {turns}: write_file {path} refused: {written.content}")
                continue
            result = toolbox.call("finish_refactor", {"summary": f"format {path} with ruff format"})
            progress(f"turn {turns}: finish_refactor {path} -> {result.content.splitlines()[0]}")
        return turns

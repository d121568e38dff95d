"""The learn lens's view of a target's docs: which docs there are, which a run writes, each
doc's checks and staleness (git dates of the doc and of the code it names), and its score.

A doc's score is doc_checks.py's share of checks passed, plus one more check for
`update`: the doc is not older than the code it describes.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from autoresearch.safety import git, worktree_files

from . import doc_checks
from .doc_checks import Check, DocReport

# What `init` writes, and what each doc must hold.
DOC_SET = {
    "overview.md": "Overview: what the project does, for whom, how to install and run it.",
    "architecture.md": "Architecture: the main components and how they work together, with one "
    "Mermaid diagram of them.",
    "code-standards.md": "Code standards: the conventions the code follows (layout, naming, "
    "tests, linting), each shown by a file that follows it.",
    "codebase-summary.md": "Codebase summary: every top-level module or package with one line "
    "on what it owns.",
}
SKIP_DIRS = {"node_modules", "__pycache__", "venv", "site-packages", "dist", "build", "target"}


def docs_of(worktree: Path, docs_dir: str) -> list[str]:
    """README.md and every Markdown file under `docs_dir`, worktree-relative, sorted."""
    found = ["README.md"] if (worktree / "README.md").is_file() else []
    base = worktree / docs_dir
    if base.is_dir():
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
            found += [
                (Path(folder) / f).relative_to(worktree).as_posix()
                for f in sorted(files)
                if f.endswith(".md")
            ]
    return found


def config_keys(
    worktree: Path, paths: list[str], unread: list[str] | None = None
) -> set[str] | None:
    """The dotted keys of the target's config files a doc may name; None: none given. A
    file the reader refuses (a link out, a FIFO) is noted in `unread`."""
    if not paths:
        return None
    keys: set[str] = set()
    for relative in paths:
        path = worktree / relative
        text = worktree_files.read_if_any(worktree, relative, unread)
        if text is None:
            continue
        if path.suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif path.suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
        if isinstance(data, dict):
            keys |= doc_checks.config_keys_of(data)
    return keys


def last_change(worktree: Path, path: str) -> datetime | None:
    """The date of the last commit that touched `path`; None when none did."""
    stamp = git.git(worktree, "log", "-1", "--format=%cI", "--", path, check=False)
    return datetime.fromisoformat(stamp) if stamp else None


@dataclass
class Health:
    """One doc as `check` reports it."""

    doc: str
    generated: bool
    lines: int
    report: DocReport
    stale_days: float = 0.0
    code: list[str] = field(default_factory=list)

    @property
    def freshness(self) -> str:
        return doc_checks.freshness(self.stale_days)

    @property
    def score(self) -> float:
        return self.report.score


@dataclass(frozen=True)
class Rules:
    """How docs are checked in this session."""

    max_lines: int = doc_checks.MAX_LINES
    ignore: tuple[str, ...] = ()
    keys: frozenset[str] | None = None


def report_of(doc: str, text: str, worktree: Path, rules: Rules) -> DocReport:
    keys = set(rules.keys) if rules.keys is not None else None
    return doc_checks.check_doc(doc, text, worktree, keys, rules.max_lines, rules.ignore)


def health(doc: str, worktree: Path, rules: Rules) -> Health:
    refused: list[str] = []
    text = worktree_files.read_if_any(worktree, doc, refused) or ""
    if refused:  # a link out or a FIFO named like a doc: a failed check, never its content
        report = DocReport(doc, [Check("read", doc, False, refused[0])])
        return Health(doc, False, 0, report)
    code = doc_checks.referenced_files(text, worktree)
    changed = last_change(worktree, doc)
    days = 0.0
    if changed is not None:
        dates = [d for d in (last_change(worktree, f) for f in code) if d is not None]
        days = doc_checks.staleness_days(changed, dates)
    return Health(
        doc,
        doc_checks.is_generated(text),
        len(text.splitlines()),
        report_of(doc, text, worktree, rules),
        days,
        code,
    )


def score(doc: str, text: str | None, worktree: Path, rules: Rules, fresh: bool | None) -> float:
    """A doc's score: 0 when it does not exist; `fresh` adds the freshness check (update)."""
    if text is None:
        return 0.0
    report = report_of(doc, text, worktree, rules)
    if fresh is not None:
        report.checks.append(Check("fresh", doc, fresh, "" if fresh else "older than its code"))
    return report.score


def now() -> datetime:
    return datetime.now(UTC)

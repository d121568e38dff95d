"""Findings: the Red team's record, its Markdown form, and sanitize (deterministic).

Sanitize keeps what is wrong, where, and the impact. It drops how a problem was
found, fix suggestions and design commentary, and passes on at most `limit`
findings (critical + high + the most impactful medium); the rest go to ideas.md.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from autoresearch.safety import worktree_files

MAX_LOCATED_BYTES = 10_000_000  # as the agents' read_file: a file they could not have read

SEVERITIES = ("critical", "high", "medium", "low", "test-gap")
HEADINGS = {
    "critical": "Critical",
    "high": "High",
    "medium": "Medium",
    "low": "Low",
    "test-gap": "Test coverage gaps",
}
FINDING_RE = re.compile(r"^### \[(F-\d+)\] (.+)$")
# A place in the code: a file with a line or line range (`src/a.py:12-14`), or a path.
LINE_PLACE_RE = re.compile(r"[\w./@+-]*\w:\d+(?:-\d+)?")
PATH_PLACE_RE = re.compile(r"[\w.@+-]*/[\w./@+-]*\.\w+|[\w@+-]+\.[A-Za-z]\w*")
FIELD_RE = re.compile(r"^- (Location|Issue|Impact): ?(.*)$")

# Sentences that tell how the problem was found, what to do about it, or what the
# reviewer thinks of the design. Green must see none of them (clean room).
DISCOVERY = re.compile(
    r"\b(I|we)\s+(read|found|noticed|saw|checked|ran|looked|grepped|searched|traced|"
    r"reviewed|discovered|spotted|tested|inspected)\b|\b(while|after|when|by)\s+"
    r"(reading|reviewing|running|looking|grepping|searching|tracing|inspecting|scanning)\b|"
    r"\b(discovered|found|noticed|spotted)\s+(by|while|when|via|through)\b|\bruff\s+reports?\b",
    re.IGNORECASE,
)
SUGGESTION = re.compile(
    r"\b(should|could|must|need to|needs to)\s+(be\s+)?(use|change|replace|fix|add|remove|"
    r"rewrite|refactor|wrap|check|validate|return|raise|call|move|rename|switch)|"
    r"\b(fix|solution|workaround|remedy)\b.*\b(is|would be|by)\b|\b(consider|recommend|suggest|"
    r"instead,? use|better to|we could|you could|try)\b|^to fix\b",
    re.IGNORECASE,
)
COMMENTARY = re.compile(
    r"\b(the (overall )?(design|architecture|codebase|code base|author)|in general|"
    r"generally|overall,|this (whole )?(project|codebase)|code smell|design choice|"
    r"(poorly|well|badly)[- ](designed|written|structured)|technical debt)\b",
    re.IGNORECASE,
)
# Red's "what to look for" categories (keys of prompts.RED_CATEGORIES); later
# cycles drop those that found nothing.
CATEGORIES = (
    "bugs",
    "error-handling",
    "test-gaps",
    "concurrency",
    "performance",
    "api-contracts",
    "security",
)
CATEGORY_PATTERNS = (
    ("security", re.compile(r"secur|inject|auth|secret|password|unsafe|unbounded|sanitiz", re.I)),
    ("concurrency", re.compile(r"race|deadlock|thread|lock|concurren|async|atomic", re.I)),
    ("performance", re.compile(r"slow|perf|N\+1|alloc|quadratic|memory|cache|index", re.I)),
    ("error-handling", re.compile(r"except|error|swallow|bare|raise|catch|panic", re.I)),
    (
        "api-contracts",
        re.compile(r"ignored|parameter|argument|contract|inconsistent|signature", re.I),
    ),
)
IMPACT_WEIGHTS = (
    (re.compile(r"secur|inject|leak|exploit|unauthori", re.I), 5),
    (re.compile(r"crash|data loss|corrupt|lost|exception|traceback|hang|deadlock", re.I), 4),
    (re.compile(r"wrong|incorrect|silently|race|invalid|broken", re.I), 3),
    (re.compile(r"slow|performance|memory|quadratic", re.I), 2),
    (re.compile(r"confus|readab|maintain|style|unused", re.I), 1),
)


@dataclass
class Finding:
    id: str
    severity: str
    title: str
    location: str
    issue: str
    impact: str

    def key(self) -> str:
        """How a finding is recognised again in later cycles (do not re-report)."""
        return f"{self.title} ({self.location})"

    def identity(self) -> str:
        """The same problem at the same place, however its title is cased or spaced."""
        return identity(self.title, self.location)


def identity(title: str, location: str) -> str:
    return f"{' '.join(title.casefold().split())} @ {''.join(location.split())}"


def title_and_location(key: str) -> tuple[str, str]:
    """A finding's key, `title (location)`, split back into its parts."""
    title, _, rest = key.rpartition(" (")
    return (title, rest[:-1]) if title and rest.endswith(")") else (key, "")


def file_of(key: str) -> str:
    """The file a finding's key places it in (`elsewhere` when it names none)."""
    match = re.fullmatch(r"([^():]+)(?::[\d-]+)?", title_and_location(key)[1])
    return match.group(1) if match else "elsewhere"


def location_problem(location: str, worktree: Path) -> str | None:
    """Why `location` does not name a line of a file in the worktree, or None.

    `path`, `path:line` and `path:first-last` are understood; the path must stay inside the
    worktree and the line must exist.
    """
    match = re.fullmatch(r"(?P<path>[^:]+?)(?::(?P<line>\d+)(?:-\d+)?)?", location.strip())
    if not match:
        return f"location {location!r} is not of the form path:line"
    root = Path(worktree).resolve()
    path = (root / match["path"].strip()).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return f"location {location!r}: there is no file {match['path'].strip()!r} in the target"
    if match["line"]:
        line = int(match["line"])
        try:  # the worktree reader: no FIFO, no hard link out, no unbounded read
            data = worktree_files.read_bytes(root, path.relative_to(root).as_posix(),
                                             max_bytes=MAX_LOCATED_BYTES)  # fmt: skip
        except worktree_files.Refused as err:
            return f"location {location!r}: not read: {err}"
        count = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        if not 1 <= line <= max(count, 1):
            return f"location {location!r}: the file has {count} lines"
    return None


def _one_line(text: str) -> str:
    """A field as one line: a line break inside one would start a new record when read back."""
    return " ".join(text.split())


def clean_location(location: str) -> str:
    """Only the places of a location (`path:line` ones, else file paths); words around
    them, such as a hint about the fix, are dropped. Without any place it is cleaned like
    the issue text."""
    for pattern in (LINE_PLACE_RE, PATH_PLACE_RE):
        places = list(dict.fromkeys(pattern.findall(location)))
        if places:
            return ", ".join(places)
    return clean_text(_one_line(location)) or "(location not stated)"


def render(findings: list[Finding], notes: str = "", title: str = "") -> str:
    """red-findings.md (and sanitized.md): a title, then the findings grouped Critical,
    High, Medium, Low, Test coverage gaps."""
    out = [f"# {title}\n"] if title else []
    for severity in SEVERITIES:
        group = [f for f in findings if f.severity == severity]
        out.append(f"## {HEADINGS[severity]}\n")
        if not group:
            out.append("(none)\n")
        for f in group:
            out.append(
                f"### [{f.id}] {_one_line(f.title)}\n- Location: {_one_line(f.location)}\n"
                f"- Issue: {_one_line(f.issue)}\n- Impact: {_one_line(f.impact)}\n"
            )
    if notes.strip():
        out.append("## Red team notes\n\n" + notes.strip() + "\n")
    return "\n".join(out)


def parse(markdown: str) -> list[Finding]:
    """Read findings back from red-findings.md or sanitized.md (notes are ignored)."""
    findings: list[Finding] = []
    severity = None
    in_finding = False  # its fields follow a finding's heading, until the next section
    for line in markdown.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            severity = next((s for s, h in HEADINGS.items() if h == heading), None)
            in_finding = False
            continue
        match = FINDING_RE.match(line)
        if match and severity:
            findings.append(Finding(match.group(1), severity, match.group(2).strip(), "", "", ""))
            in_finding = True
            continue
        field = FIELD_RE.match(line)
        if field and in_finding:
            setattr(findings[-1], field.group(1).lower(), field.group(2).strip())
    return findings


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def clean_text(text: str) -> str:
    """Keep only the sentences that state a fact about the problem."""
    kept = [
        s
        for s in _sentences(text)
        if not (DISCOVERY.search(s) or SUGGESTION.search(s) or COMMENTARY.search(s))
    ]
    return " ".join(kept)


def categorize(finding: Finding) -> str:
    """The Red category a finding belongs to, by its severity and wording."""
    if finding.severity == "test-gap":
        return "test-gaps"
    text = f"{finding.title} {finding.issue}"
    return next((name for name, pattern in CATEGORY_PATTERNS if pattern.search(text)), "bugs")


def impact_score(finding: Finding) -> int:
    return max((w for pattern, w in IMPACT_WEIGHTS if pattern.search(finding.impact)), default=0)


def sanitize(findings: list[Finding], limit: int = 15) -> tuple[list[Finding], list[Finding]]:
    """Return (passed to Green, kept back for ideas.md)."""
    cleaned = []
    for f in findings:
        issue = clean_text(f.issue) or f.title
        cleaned.append(
            Finding(
                id=f.id,
                severity=f.severity if f.severity in SEVERITIES else "medium",
                title=clean_text(f.title) or f.title.split(":")[0],
                location=clean_location(f.location),
                issue=issue,
                impact=clean_text(f.impact) or "(impact not stated)",
            )
        )
    if len(cleaned) <= limit:
        return cleaned, []
    order = {s: i for i, s in enumerate(SEVERITIES)}
    # Stable ranking: severity first; among mediums, the most impactful first.
    ranked = sorted(
        enumerate(cleaned),
        key=lambda p: (
            order[p[1].severity],
            -impact_score(p[1]) if p[1].severity == "medium" else 0,
            p[0],
        ),
    )
    eligible = [f for _, f in ranked if f.severity in ("critical", "high", "medium")]
    passed = eligible[:limit]
    passed_ids = {f.id for f in passed}
    held = [f for f in cleaned if f.id not in passed_ids]
    passed.sort(key=lambda f: (order[f.severity], int(f.id[2:])))
    return passed, held


def as_dicts(findings: list[Finding]) -> list[dict]:
    return [asdict(f) for f in findings]

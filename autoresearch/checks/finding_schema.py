"""What a lens finding must hold, checked by code: the schema per lens, the check that drops
what fails it, the finding's identity (a hash stable across iterations and reruns), the `fail_on`
gate and the new / recurring / fixed labels against an earlier audit.

Rule: nothing a model says about its own finding is trusted. A finding is dropped, with one reason,
at the first check it fails, in this order: not an object → a required field missing or empty → a
value outside its allowed set (or pattern) → `file:line` not naming a file inside the worktree and a
line within it → file outside the scope → same hash as an earlier finding (this run, earlier
iterations or earlier runs).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from autoresearch.checks.severity import SEVERITIES, at_or_above
from autoresearch.safety import worktree_files

MAX_LOCATED_BYTES = 10_000_000  # as the agents' read_file: a file they could not have read

HASH_LENGTH = 12


@dataclass(frozen=True)
class Field:
    name: str
    required: bool = True
    allowed: tuple[str, ...] | None = None  # canonical spellings; matched case-insensitively
    pattern: str | None = None  # a regular expression the whole value must match
    aliases: Mapping[str, str] = field(default_factory=dict)  # lower-case alias -> canonical
    normalize: Callable[[str], str] | None = None  # applied before the allowed/pattern check
    # What the lens's report tool tells the agent of the field (default: the allowed values,
    # "a | b | c"); asked=False: the harness fills it in, the tool does not take it.
    says: str = ""
    asked: bool = True


@dataclass(frozen=True)
class Schema:
    lens: str
    fields: tuple[Field, ...]
    category: str  # the field whose value is the finding's category (part of its identity)
    location: str = "location"
    title: str = "title"


@dataclass
class Accepted:
    finding: dict[str, Any]  # with values normalized to their canonical spelling
    hash: str
    file: str | None  # worktree-relative, posix
    line: int | None
    title_key: str
    novelty: str = "new"  # or "variant": an earlier finding has the same title elsewhere


@dataclass
class Dropped:
    finding: Any
    reason: str  # one line, e.g. "severity 'urgent' not allowed (critical, high, ...)"
    kind: str  # for the counters: shape, missing, not-allowed, location, scope, duplicate


# --- the schemas ---

OWASP_2021 = {
    "A01": "Broken Access Control",
    "A02": "Cryptographic Failures",
    "A03": "Injection",
    "A04": "Insecure Design",
    "A05": "Security Misconfiguration",
    "A06": "Vulnerable and Outdated Components",
    "A07": "Identification and Authentication Failures",
    "A08": "Software and Data Integrity Failures",
    "A09": "Security Logging and Monitoring Failures",
    "A10": "Server-Side Request Forgery",
}
STRIDE = {
    "S": "Spoofing",
    "T": "Tampering",
    "R": "Repudiation",
    "I": "Information disclosure",
    "D": "Denial of service",
    "E": "Elevation of privilege",
}
SCENARIO_DIMENSIONS = (
    "happy-path",
    "errors",
    "edge-values",
    "abuse",
    "scale",
    "concurrency",
    "time",
    "data-variation",
    "permissions",
    "integration",
    "recovery",
    "state-transitions",
)
DEBUG_CATEGORIES = (
    "crash",
    "wrong-result",
    "data-loss",
    "hang",
    "race",
    "resource-leak",
    "performance",
    "error-handling",
    "api-contract",
    "security",
    "other",
)
DEBUG_VERDICTS = ("confirmed", "disproven", "inconclusive", "new-lead")
PREDICT_CATEGORIES = (
    "architecture",
    "security",
    "performance",
    "reliability",
    "correctness",
    "maintainability",
    "other",
)
FIX_CATEGORIES = ("build", "bug", "type", "test", "lint", "warning")
BUG_SEVERITIES = SEVERITIES[:4]  # critical … low: a bug is never merely "info"


def _owasp_id(value: str) -> str:
    """'a03', 'A03:2021', 'A03:2021-Injection', 'Injection' -> 'A03'."""
    match = re.match(r"\s*A(\d{1,2})\b", value, re.IGNORECASE)
    if match:
        return f"A{int(match.group(1)):02d}"
    by_name = {name.lower(): key for key, name in OWASP_2021.items()}
    return by_name.get(value.strip().lower(), value.strip())


def _cwe(value: str) -> str:
    """'79', 'cwe-79', 'CWE 79' -> 'CWE-79'."""
    match = re.fullmatch(r"\s*(?:CWE[-\s]?)?(\d+)\s*", value, re.IGNORECASE)
    return f"CWE-{match.group(1)}" if match else value.strip()


_STRIDE_ALIASES = {name.lower(): letter for letter, name in STRIDE.items()} | {
    "dos": "D",
    "denial-of-service": "D",
    "information-disclosure": "I",
    "elevation-of-privilege": "E",
    "privilege escalation": "E",
}
_LABEL = {"new lead": "new-lead", "lead": "new-lead"}
_EXISTS = "path/to/file.py:42 (must exist)."

SECURITY = Schema(
    lens="security",
    category="owasp",
    fields=(
        Field("title", says="One line: what is vulnerable."),
        Field(
            "owasp",
            allowed=tuple(OWASP_2021),
            normalize=_owasp_id,
            says="OWASP Top 10 2021 id: A01 … A10.",
        ),
        Field(
            "stride",
            allowed=tuple(STRIDE),
            aliases=_STRIDE_ALIASES,
            says="STRIDE letter: S, T, R, I, D or E.",
        ),
        Field(
            "cwe",
            required=False,
            pattern=r"CWE-\d+",
            normalize=_cwe,
            says="Optional CWE id, e.g. CWE-78.",
        ),
        Field("location", says=_EXISTS),
        Field("scenario", says="How an attacker gets there and what they gain."),
        Field("evidence", says="The code, quoted from the file."),
        Field("confidence", allowed=("confirmed", "likely", "possible")),
        Field("severity", allowed=SEVERITIES),
        Field("mitigation", says="What removes or limits the risk."),
    ),
)
DEBUG = Schema(
    lens="debug",
    category="category",
    fields=(
        Field("title", says="One line: the suspected bug."),
        Field("category", allowed=DEBUG_CATEGORIES),
        Field("location", says=_EXISTS),
        Field("hypothesis", says="I think X because Y; test by Z."),
        Field("evidence", says="What the experiment showed."),
        Field("verdict", allowed=DEBUG_VERDICTS, aliases=_LABEL),
        Field("severity", allowed=BUG_SEVERITIES),
        # The scratch test; the harness decides confirmed.
        Field(
            "reproduction",
            required=False,
            says="A complete test file that fails while the bug is there.",
        ),
        Field("impact", required=False, says="What goes wrong for a user."),
        Field("root_cause", required=False, says="Why it happens."),
    ),
)
SCENARIO = Schema(
    lens="scenario",
    category="dimension",
    fields=(
        Field("title", says="One line."),
        Field(
            "dimension",
            allowed=SCENARIO_DIMENSIONS,
            normalize=lambda v: v.replace("_", "-"),
            says="The dimension this situation belongs to.",
        ),
        Field("actors", says="Who takes part."),
        Field("precondition", says="What holds before."),
        Field("trigger", says="What starts it."),
        Field("flow", says="What happens, step by step."),
        Field("expected", says="The outcome the system should produce."),
        Field("what_can_go_wrong", says="How it can fail."),
        Field("severity", allowed=BUG_SEVERITIES),
        # Where the code handles it, when the agent knows.
        Field(
            "location",
            required=False,
            says="Optional: path/to/file.py:42 where the code handles it.",
        ),
    ),
)
PREDICT = Schema(
    lens="predict",
    category="category",
    fields=(
        Field("title", says="One line."),
        Field("persona", asked=False),  # the persona the harness asked
        Field("category", allowed=PREDICT_CATEGORIES),
        Field("location", says=_EXISTS),
        Field("evidence", says="What in the code supports it."),
        Field("severity", allowed=BUG_SEVERITIES),
        Field("confidence", allowed=("high", "medium", "low")),
        # What to try, for the hypothesis queue.
        Field(
            "hypothesis",
            required=False,
            says="Optional: a change worth trying because of it.",
        ),
    ),
)
FIX = Schema(
    lens="fix",
    category="category",
    fields=(
        Field("title"),
        Field("category", allowed=FIX_CATEGORIES),
        Field("location"),
        Field("severity", required=False, allowed=SEVERITIES),
        Field("message", required=False),
        Field("regression_test", required=False),  # a reproduction handed on by debug
    ),
)


def told(schema: Schema) -> dict[str, str]:
    """The fields the lens's report tool takes, in order, with what the agent is told."""
    return {f.name: f.says or " | ".join(f.allowed or ()) for f in schema.fields if f.asked}


# --- identity ---


def normalize_text(text: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed: how titles are compared."""
    words = re.findall(r"[a-z0-9]+", str(text).lower())
    return " ".join(words)


def finding_hash(category: str, location: str, title: str) -> str:
    """sha256 of normalized category | location | title, cut to 12 hex characters.

    Locations are compared as written paths (`./a.py:3` and `a.py:3` are one place), the
    line range's start only, so `a.py:3-9` and `a.py:3` are the same finding.
    """
    file, line = split_location(location)
    where = f"{_clean_path(file)}:{line}" if file is not None else normalize_text(location)
    key = "|".join((normalize_text(category), where, normalize_text(title)))
    return hashlib.sha256(key.encode()).hexdigest()[:HASH_LENGTH]


def title_key(title: str) -> str:
    """The identity of a title alone: a second finding with it elsewhere is a variant."""
    return hashlib.sha256(normalize_text(title).encode()).hexdigest()[:HASH_LENGTH]


_LOCATION = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?:\s*[-–:]\s*\d+)?$")


def split_location(location: str) -> tuple[str | None, int | None]:
    """'src/a.py:12', 'src/a.py:12-20', 'src/a.py:12:5' -> ('src/a.py', 12); else (None, None)."""
    match = _LOCATION.match(str(location).strip().strip("`"))
    if not match:
        return None, None
    return match.group("file").strip(), int(match.group("line"))


def _clean_path(path: str) -> str:
    parts = [p for p in PurePosixPath(path.replace("\\", "/")).parts if p != "."]
    return "/".join(parts)


# --- the check ---


def check(
    findings: Iterable[Any],
    schema: Schema,
    worktree: Path,
    seen_hashes: Collection[str] = (),
    scope: Collection[str] | None = None,
    seen_titles: Collection[str] = (),
) -> tuple[list[Accepted], list[Dropped]]:
    """Split findings into (accepted, dropped); see the module docstring for the order of checks.

    `seen_hashes`: hashes of findings accepted earlier (earlier iterations and runs, from the
    lens's log); a finding repeated within `findings` is a duplicate of the first one too.
    `scope`: glob patterns (fnmatch, on worktree-relative paths); None means the whole worktree.
    `seen_titles`: title keys of earlier findings; an accepted finding whose title was seen before
    (at another place or category) is labelled a variant rather than new.
    """
    seen = set(seen_hashes)
    titles = set(seen_titles)
    accepted: list[Accepted] = []
    dropped: list[Dropped] = []
    places = _Places(Path(worktree))
    for raw in findings:
        result = _check_one(raw, schema, places, scope)
        if isinstance(result, Dropped):
            dropped.append(result)
        elif result.hash in seen:
            dropped.append(Dropped(raw, f"duplicate of {result.hash}", "duplicate"))
        else:
            if result.title_key in titles:
                result.novelty = "variant"
            seen.add(result.hash)
            titles.add(result.title_key)
            accepted.append(result)
    return accepted, dropped


def _check_one(
    raw: Any, schema: Schema, places: _Places, scope: Collection[str] | None
) -> Accepted | Dropped:
    if not isinstance(raw, Mapping):
        return Dropped(raw, f"not a finding object: {str(raw)[:80]!r}", "shape")
    finding = dict(raw)
    for f in schema.fields:
        value = finding.get(f.name)
        if value is None or (isinstance(value, str) and not value.strip()):
            if f.required:
                return Dropped(raw, f"missing field '{f.name}'", "missing")
            finding.pop(f.name, None)
            continue
        if f.allowed is None and f.pattern is None and f.normalize is None:
            continue
        canonical = _canonical(str(value), f)
        if canonical is None:
            return Dropped(raw, _not_allowed(f, value), "not-allowed")
        finding[f.name] = canonical
    file = line = None
    if schema.location in finding:
        file, line, problem = places.resolve(str(finding[schema.location]))
        if problem:
            return Dropped(raw, problem, "location")
        if scope is not None and not any(fnmatch.fnmatch(file, p) for p in scope):
            return Dropped(raw, f"out of scope: {file} matches none of the scope", "scope")
        finding[schema.location] = f"{file}:{line}"
    digest = finding_hash(
        str(finding[schema.category]),
        str(finding.get(schema.location, "")),
        str(finding[schema.title]),
    )
    return Accepted(finding, digest, file, line, title_key(str(finding[schema.title])))


def _canonical(value: str, f: Field) -> str | None:
    text = f.normalize(value) if f.normalize else value.strip()
    text = f.aliases.get(text.lower(), text)
    if f.allowed is not None:
        return next((a for a in f.allowed if a.lower() == text.lower()), None)
    if f.pattern is not None and not re.fullmatch(f.pattern, text):
        return None
    return text


def _not_allowed(f: Field, value: Any) -> str:
    expected = ", ".join(f.allowed) if f.allowed else f"the pattern {f.pattern}"
    return f"{f.name} {str(value)[:60]!r} not allowed (expected {expected})"


class _Places:
    """Resolves `file:line` locations in one worktree, reading each file at most once."""

    def __init__(self, worktree: Path) -> None:
        self.root = worktree.resolve()
        self._files: dict[str, tuple[str, int | None] | str] = {}

    def resolve(self, location: str) -> tuple[str, int, str | None]:
        """(relative file, line, None), or ('', 0, a reason starting 'location does not exist')."""
        file, line = split_location(location)
        if file is None or line is None:
            return "", 0, f"location does not exist: {location[:80]!r} is not file:line"
        if file not in self._files:
            self._files[file] = self._file(file)
        known = self._files[file]
        if isinstance(known, str):
            return "", 0, known
        relative, count = known
        if count is None:
            return "", 0, f"location does not exist: no file {file}"
        if not 1 <= line <= count:
            return "", 0, f"location does not exist: {file} has {count} lines, not line {line}"
        return relative, line, None

    def _file(self, file: str) -> tuple[str, int | None] | str:
        """(relative path, line count or None if no such file), or why the path is refused."""
        path = (self.root / file).resolve()
        if not path.is_relative_to(self.root):
            return f"location does not exist: {file} is outside the worktree"
        relative = path.relative_to(self.root).as_posix()
        if relative.split("/", 1)[0] == ".git":
            return f"location does not exist: {file} is inside .git"
        # Through the worktree reader: a FIFO, a hard link out or a huge file is not read
        # (its line count would say something about a file outside).
        try:
            data = worktree_files.read_bytes(self.root, relative, max_bytes=MAX_LOCATED_BYTES)
        except worktree_files.Missing:
            return relative, None
        except worktree_files.Refused as err:
            if not path.is_file():
                return relative, None  # a directory: no file there
            return f"location does not exist: {file} is not read ({err})"
        return relative, data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


# --- after the check ---


def drop_counts(dropped: Iterable[Dropped]) -> dict[str, int]:
    """How many were dropped for each kind of reason, for the lens's log."""
    return dict(Counter(d.kind for d in dropped))


def gate(severities: Iterable[str], fail_on: str) -> str:
    """'FAILED' when any finding is at or above `fail_on` (critical|high|medium|low|none), else
    'PASSED'. `autoresearch check` exits 1 on FAILED; the run itself succeeds either way."""
    return "FAILED" if any(at_or_above(s, fail_on) for s in severities) else "PASSED"


def gate_of(done_text: str) -> str | None:
    """The `gate:` line of a session's `done` file: PASSED, FAILED, or None (no gate: not a
    lens). `autoresearch check` reads it without asking which mode the session was."""
    lines = done_text.splitlines()
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("gate:")), None)


def compare(current: Collection[str], previous: Collection[str]) -> dict[str, str]:
    """Labels against an earlier audit of the same target, by finding hash: each current hash is
    'new' or 'recurring'; each previous hash not found again is 'fixed'."""
    labels = {h: ("recurring" if h in previous else "new") for h in current}
    labels.update({h: "fixed" for h in previous if h not in current})
    return labels

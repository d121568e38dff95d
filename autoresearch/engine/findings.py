"""Findings: the Red team's record, its Markdown form, and sanitize (deterministic).

Sanitize keeps what is wrong, where, and the impact. It drops how a problem was
found, fix suggestions and design commentary, and passes on at most `limit`
findings (critical + high + the most impactful medium); the rest go to ideas.md.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from autoresearch.agents.prompts import RED_CATEGORIES
from autoresearch.agents.prompts import RED_SEVERITIES as SEVERITIES
from autoresearch.safety import worktree_files

MAX_LOCATED_BYTES = 10_000_000  # as the agents' read_file: a file they could not have read

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

# Green must see neither how a problem was found nor how to fix it (the clean room). Each
# sentence (and each clause after a ';', a spaced dash or a colon) is judged by its shape:
# first-person or exploration narrative, advice (an imperative, a modal of obligation or
# benefit, a remedy as the subject or the predicate, a "Fix:" label), or commentary on the
# design. What is left states a fact: what is wrong, where, and what it does.
COMMENTARY = re.compile(
    r"\b(the (overall )?(design|architecture|codebase|code base|author)|in general|"
    r"generally|overall,|this (whole )?(project|codebase)|code smell|design choice|"
    r"(poorly|well|badly)[- ](designed|written|structured)|technical debt)\b",
    re.IGNORECASE,
)
# Red's "what to look for" categories; later cycles drop those that found nothing.
CATEGORIES = tuple(RED_CATEGORIES)
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
    # Never inside a code span: `from . import x` is one piece of code, not two sentences.
    masked = _CODE.sub(lambda m: "\0" * len(m.group()), text)
    cuts = [0, *(m.end() for m in re.finditer(r"(?<=[.!?])\s+|\n+", masked)), len(text)]
    pieces = (text[a:b].strip() for a, b in zip(cuts, cuts[1:], strict=False))
    return [piece for piece in pieces if piece]


def _before_label(title: str) -> str:
    """A title that states no fact, up to its first colon outside code (`Race: use a
    lock`): a colon inside a code span (`if x == None:`) is the code's, and a cut there
    would leave a span unclosed in every page that shows the title."""
    masked = _CODE.sub(lambda m: "\0" * len(m.group()), title)
    colon = masked.find(":")
    return (title[:colon] if colon > 0 else title).strip()


def sanitized_title(title: str) -> str:
    """A finding's title as sanitize passes it on: what a backend that matches its own
    titles against a finding it is handed compares with."""
    return clean_text(title) or _before_label(title)


def clean_text(text: str) -> str:
    """Keep only the sentences (or, of a sentence, the clauses) that state a fact about
    the problem: no narrative of how it was found, no advice on how to fix it."""
    kept = []
    for sentence in _sentences(text):
        if _LABEL.search(sentence):  # "Fix: ...": advice, whatever its clauses say
            continue
        masked = _CODE.sub(lambda m: "\0" * len(m.group()), sentence)  # no split inside code
        cuts = [0, *(m.end() for m in _CLAUSE_BREAK.finditer(masked)), len(sentence) + 1]
        clauses = [sentence[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if a < b]
        facts = [c for c in clauses if clause_kind(c) == "fact"]
        if len(facts) == len(clauses):
            kept.append(sentence)
        elif facts:
            kept.append("; ".join(_CLAUSE_END.sub("", c).strip() for c in facts) + ".")
    return " ".join(kept)


# --- the shape of a sentence -------------------------------------------------------------

_CODE = re.compile(r"`[^`]*`")
_CLAUSE_BREAK = re.compile(r";\s+|\s+(?:-|--|—|–)\s+|:\s+")
_CLAUSE_END = re.compile(r"\s*(?:[;:.!?]|-|--|—|–)?\s*$")
_TOKEN = re.compile(r"`[^`]*`|[A-Za-z][A-Za-z'’]*|\d[\w.]*|[^\sA-Za-z\d]")
# Verbs a fix is told with: in the imperative ("Use a lock"), as a change's gerund
# ("Adding a check prevents it") or after a lead-in ("Instead of X, use Y").
REMEDY_VERBS = frozenset(
    """add use wrap replace guard cache memoize validate check verify ensure make change fix
    remove delete drop move rename switch return raise catch handle avoid pass call apply
    introduce refactor extract split convert escape sanitize sanitise limit cap bound close
    lock consider prefer try update set initialize initialise reuse store keep hold compile
    precompute hoist inline cast clamp protect normalize strip trim sort test document log
    assert release acquire reset clear free copy stop start rewrite restructure simplify
    cover default pin upgrade enable disable lower increase decrease reduce prevent throw
    retry skip filter quote encode parse guarantee defer memoise bump""".split()
)
# Of those, the ones that are nouns too ("Check is skipped", "Cache entries expire"): they
# open an imperative only when an object or a particle follows them.
NOUN_TOO = frozenset(
    """guard cache check change fix return catch handle drop switch call split escape limit
    cap bound close lock update set store hold cast test log release reset clear copy stop
    start cover default pin lower increase decrease filter quote parse retry skip use free
    make bump""".split()
)
_OBJECT_NEXT = frozenset(
    """the a an this that these those it them each every all any its their his her both
    some to on in with for from into out up down around before early first only
    always sure back over away once""".split()
)
_FINITE_NEXT = frozenset(
    """is are was were has have had does do did can cannot will would may might must should
    never always not""".split()
)
# Looking at code, not what the code does: "Grepping for X turned up ...".
EXPLORE_VERBS = frozenset(
    """look read grep search trace inspect review scan dig skim examine debug step browse
    audit investigate check run test profile bisect explore go walk""".split()
)
_REVEALS = re.compile(
    r"\b(shows?|showed|reveals?|revealed|reproduces?|reproduced|confirms?|confirmed|"
    r"turn(?:s|ed)? up|point(?:s|ed)? (?:at|to)|led to|leads to|surfaced|uncovered|exposed?s?)\b"
)
_FIRST_PERSON = re.compile(
    r"(?<![\w/])I(?:'m|'ve|'d|'ll|’m|’ve|’d|’ll)?(?![\w/'’-])|"  # not I/O
    r"\b(?:[Mm]e|[Mm]y|[Mm]ine|[Ww]e|[Ww]e're|[Ww]e've|[Ww]e'd|[Ww]e'll|[Uu]s|[Oo]ur|[Oo]urs|"
    r"[Ll]et's|[Ll]et’s|[Ll]et me|[Ll]et us)\b(?![/-])"  # not US-ASCII
)
_SECOND_PERSON = re.compile(r"\b(?i:you|your|you're|you'd|you'll|yourself)\b")
_NARRATIVE_OPENING = re.compile(
    r"^(?:(?:on|upon|after) (?:a )?(?:closer|further|careful|second|more careful)? ?"
    r"(?:inspection|look|review|reading|examination|investigation|glance)\b|initially\b|"
    r"at first\b|originally\b|it turn(?:s|ed) out\b|first,|then,|next,|eventually,)",
    re.IGNORECASE,
)
_FOUND_BY = re.compile(
    r"\b(?:is|are|was|were|been)\s+(?:found|discovered|spotted|noticed|observed|identified|"
    r"uncovered|caught)\s+(?:while|when|by|during|via|through|after|in the course)\b|"
    r"\bruff\s+reports?\b",
    re.IGNORECASE,
)
_SUBORDINATE = frozenset("after while when upon on before during by through from".split())
_LABEL = re.compile(
    r"^(?:suggested|proposed|recommended|possible|quick|easy)?\s*(?:fix|fixes|suggestion|"
    r"recommendation|remedy|solution|workaround|mitigation|proposal|todo|to do|action|"
    r"next steps?|how to fix)\s*(?::|—|–|-\s)",
    re.IGNORECASE,
)
_OBLIGATION = re.compile(
    r"\b(?:should|shouldn't|ought to|must|mustn't|needs? to|has to|have to|had better)\b", re.I
)
_CONTRAST = re.compile(r"\b(?:but|yet|however|although|though|whereas)\b", re.IGNORECASE)
_BENEFIT = re.compile(
    r"\b(?:would|could|might|will|can|may)(?:n't| not)?\s+(?:also\s+|probably\s+|likely\s+|"
    r"easily\s+|simply\s+|just\s+|then\s+|quickly\s+|certainly\s+)?(?:be\s+(?:much\s+|far\s+|"
    r"a lot\s+)?)?(?:help|fix|resolve|solve|prevent|avoid|address|eliminate|mitigate|cure|"
    r"suffice|do|simplify|improve|fixed|resolved|solved|prevented|avoided|addressed|"
    r"eliminated|mitigated|handled|caught|replaced|simplified|improved|refactored|rewritten|"
    r"better|safer|cleaner|simpler|faster|preferable|best|wise|advisable|ideal|nicer|"
    r"more robust|more efficient|more correct|a good idea|the way to go)\b",
    re.IGNORECASE,
)
_REMEDY_ACT = re.compile(
    r"\b(?:fix(?:es)?|resolves?|solves?|prevents?|avoids?|address(?:es)?|eliminates?|"
    r"mitigates?|cures?|removes?|closes?|stops?|helps?|suffices?)\b",
    re.IGNORECASE,
)
_REMEDY_OBJECT = re.compile(
    r"\b(?:fix(?:es)?|resolves?|solves?|prevents?|avoids?|address(?:es)?|eliminates?|"
    r"mitigates?|cures?)\s+(?:this|it|that|these|them|the (?:issue|problem|bug|crash|race|"
    r"leak|error|failure|vulnerability|risk|overflow|hang|deadlock)s?)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:not|never|no|but|yet|however|only)\b|n't\b", re.IGNORECASE)
_REMEDY_NOUN = (
    r"(?:fix|solution|remedy|workaround|mitigation|option|alternative|approach|answer|cure)"
)
_REMEDY_SUBJECT = re.compile(
    r"^(?:(?:the|a|an|one|another|simple|simplest|easy|easiest|obvious|best|better|proper|"
    r"correct|real|quick|safe|safest|cleanest|only|possible|likely|good)\s+)*"
    + _REMEDY_NOUN
    + r"\s+(?:is|would|here|might|could|will|:)",
    re.IGNORECASE,
)
_REMEDY_PREDICATE = re.compile(
    r"\b(?:is|are|would be|seems|looks like)\s+(?:the|an?|one)\s+(?:\w+\s+){0,2}?"
    + _REMEDY_NOUN
    + r"\b|\bis all (?:that(?:'s| is)|it takes|we need)\b",
    re.IGNORECASE,
)
_EVALUATIVE_OPENING = re.compile(
    r"^(?:ideally|preferably|perhaps|maybe|better|best|optionally|alternatively|"
    r"it(?:'s|’s| is| would be| might be| may be| will be) (?:worth|advisable|better|best|wise|"
    r"preferable|safer|cleaner|recommended|a good idea|good practice|sensible|prudent|"
    r"simpler|easier))\b",
    re.IGNORECASE,
)
_LEAD_IN = frozenset(
    "instead to for if when in before after once rather as since given with".split()
)
_FILLER = frozenset("also so then thus hence therefore just simply please finally and".split())


def _stem_of(gerund: str) -> set[str]:
    """The verbs a word ending in -ing may be the gerund of (adding: add, caching: cache)."""
    if not gerund.endswith("ing") or len(gerund) < 6:
        return set()
    stem = gerund[:-3]
    found = {stem, stem + "e"}
    if len(stem) > 2 and stem[-1] == stem[-2]:
        found.add(stem[:-1])  # wrapping: wrap
    return found


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _is_imperative(words: list[str], strict: bool) -> bool:
    """Whether the clause opens with a fix told as a command: "Use a lock", "Don't reuse".
    `strict` (the sentence's start): a verb that is a noun too needs its object next."""
    low = [w.lower() for w in words]
    while low and low[0] in _FILLER:
        low = low[1:]
    if not low:
        return False
    if low[0] in ("don't", "don’t") or low[:2] == ["do", "not"]:
        return True
    if low[0] in ("never", "always") and len(low) > 1 and low[1] in REMEDY_VERBS:
        return True
    if low[0] not in REMEDY_VERBS:
        return False
    after = low[1] if len(low) > 1 else ""
    if after in ("(", ".", "_"):
        return False  # `add()` overflows: the name of a function, not a command
    if low[0] not in NOUN_TOO:
        return after not in _FINITE_NEXT
    if strict:
        return after in _OBJECT_NEXT or after.startswith("`") or after.endswith("ing")
    return after not in _FINITE_NEXT and not after.endswith("'s")


def _narrative(clause: str, low: list[str]) -> bool:
    if _FIRST_PERSON.search(clause) or _NARRATIVE_OPENING.search(clause):
        return True
    if _FOUND_BY.search(clause):
        return True
    opening = low[1:] if low and low[0] in _SUBORDINATE else low
    explored = bool(opening) and bool(_stem_of(opening[0]) & EXPLORE_VERBS)
    if not explored:
        return False
    # "After running X, ..." and "Looking at X, ..." tell the search; "Running two
    # workers corrupts the index" tells what the code does, unless what follows is what
    # the search showed ("Running X reproduces the crash").
    return opening is not low or "," in low or bool(_REVEALS.search(clause))


def _advice(clause: str, words: list[str], low: list[str]) -> bool:
    if _SECOND_PERSON.search(clause) or _LABEL.search(clause):
        return True
    if _EVALUATIVE_OPENING.search(clause) or _REMEDY_SUBJECT.search(clause):
        return True
    if _REMEDY_PREDICATE.search(clause) or _BENEFIT.search(clause):
        return True
    told = re.search(r"\b(?:is|would be) to (\w+)", clause, re.IGNORECASE)  # "is to check"
    if told and told.group(1).lower() in REMEDY_VERBS:
        return True
    if _OBLIGATION.search(clause) and not _CONTRAST.search(clause):
        return True
    if _is_imperative(words, strict=True):
        return True
    if low and low[0] in _LEAD_IN and "," in words:  # "Instead of X, use Y"
        rest = words[words.index(",") + 1 :]
        if _is_imperative(rest, strict=False):
            return True
    changed = bool(low) and bool(_stem_of(low[0]) & REMEDY_VERBS)  # "Adding a check ..."
    if changed and (re.search(r"\b(?:would|could|might|will|should)\b", clause, re.I)):
        return True
    negated = bool(_NEGATION.search(clause))
    if changed and _REMEDY_ACT.search(clause) and not negated:
        return True
    return bool(_REMEDY_OBJECT.search(clause)) and not negated


def clause_kind(clause: str) -> str:
    """ "narrative", "advice", "commentary" or "fact": what one sentence or clause says."""
    text = _CODE.sub("`code`", clause.strip())  # a variable named `my` says nothing
    words = _tokens(text)
    low = [w.lower() for w in words if not w.startswith("`")]
    if _narrative(text, low):
        return "narrative"
    if _advice(text, words, low):
        return "advice"
    if COMMENTARY.search(text):
        return "commentary"
    return "fact"


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
                title=sanitized_title(f.title),
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


def none_passed_why(
    passed: list[Finding], held: list[Finding], limit: int, waiting: list[Finding] | None = None
) -> str:
    """Why nothing went on to Green though Red found something, or "": more than `limit`
    findings, none above low (`held`, sanitize's: a narrow angle on style warnings stalls on
    this), or every finding left out by the cycle's focus (`waiting`: a narrow angle's
    `match` or `paths`)."""
    if passed:
        return ""
    if held and not any(f.severity in ("critical", "high", "medium") for f in held):
        return (
            f" (all {len(held)} below medium: those go on to Green only when Red reports "
            f"max_findings ({limit}) or fewer)"
        )
    if waiting and not held:
        return f" (all {len(waiting)} wait for a later cycle: this cycle's focus leaves them out)"
    return ""


def as_dicts(findings: list[Finding]) -> list[dict]:
    return [asdict(f) for f in findings]

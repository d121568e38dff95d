"""Broad mode's hypotheses: what a valid set is, and its Markdown file (hypotheses.md).

A set is 3 to 5 hypotheses with at least one obvious, one bold and one creative; a person
may edit hypotheses.md before approving it, so the file is read back with line numbers in
every error.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

REQUIRED_CATEGORIES = ("obvious", "bold", "creative")
OPTIONAL_CATEGORIES = ("adjacent", "wildcard")
CATEGORIES = REQUIRED_CATEGORIES + OPTIONAL_CATEGORIES
MIN_HYPOTHESES = 3
MAX_HYPOTHESES = 5
HID = re.compile(r"^h[1-9][0-9]*$")


class HypothesisError(ValueError):
    """A set of hypotheses broad mode cannot run; the message says what is wrong."""


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


def validate(items: list[Hypothesis]) -> tuple[list[Hypothesis], list[str]]:
    """The set broad mode runs, and notes on what was pruned; HypothesisError if unusable.
    More than five are pruned to five: the first of each required category is kept, the
    other places go to the earliest remaining proposals, in proposal order."""
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
    keep = {next(i.id for i in items if i.category == c) for c in REQUIRED_CATEGORIES}
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


def as_dicts(items: list[Hypothesis]) -> list[dict[str, str]]:
    return [asdict(i) for i in items]

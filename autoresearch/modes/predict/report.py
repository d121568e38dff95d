"""Predict's report files: the vote table, the ranked hypothesis queue, the debate record."""

from __future__ import annotations

from typing import Any

from ...checks import votes


def as_finding(vote: votes.Vote, first: dict[str, Any]) -> dict[str, Any]:
    """A voted finding as handoff.json carries it."""
    file, _, line = vote.finding.location.rpartition(":")
    return {
        "id": vote.finding.id,
        "hash": vote.finding.id,
        "title": vote.finding.title,
        "location": vote.finding.location,
        "file": file,
        "line": int(line) if line.isdigit() else None,
        "severity": vote.severity,
        "confidence": vote.finding.confidence,
        "label": vote.label,
        "priority": vote.priority,
        "confirmations": vote.confirmations,
        "disputes": vote.disputes,
        "personas": vote.personas,
        "raised_by": list(vote.finding.raised_by),
        "evidence": first.get("evidence", ""),
        "hypothesis": first.get("hypothesis", ""),
        "category": first.get("category", ""),
    }


def findings_md(name: str, tally: list[votes.Vote], evidence: dict, warnings: list[str]) -> str:
    lines = [f"# Predict findings: {name}", "", "## Vote", ""]
    lines += [
        "| id | finding | location | severity | confirm | dispute | label | priority |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in tally:
        lines.append(
            f"| {v.finding.id} | {v.finding.title} | {v.finding.location} | {v.severity} | "
            f"{v.confirmations}/{v.personas} | {v.disputes} | {v.label} | {v.priority:.2f} |"
        )
    if not tally:
        lines.append("| (none) | | | | | | | |")
    if warnings:
        lines += ["", "## Warnings", "", *(f"- {w}" for w in warnings)]
    lines += ["", "## Evidence", ""]
    for v in tally:
        first = evidence.get(v.finding.id, {})
        lines += [
            f"### {v.finding.id} {v.finding.title}",
            f"- Raised by: {', '.join(v.finding.raised_by)}",
            f"- Evidence: {first.get('evidence', '')}",
            "",
        ]
    return "\n".join(lines) + "\n"


def queue_md(tally: list[votes.Vote], evidence: dict) -> str:
    queue = votes.hypothesis_queue(tally)
    lines = [
        "# Hypothesis queue",
        "",
        "Everything not discarded, highest priority first. Paste the first block under",
        "`angles:` of a narrow session, or the second under `hypotheses:` of a broad one",
        "(docs/lenses.md).",
        "",
    ]
    for n, v in enumerate(queue, 1):
        lines.append(f"{n}. [{v.label}, {v.priority:.2f}] {_statement(v, evidence)}")
    lines += ["", "## As narrow angles", "", "```yaml", "angles:"]
    for n, v in enumerate(queue[:5], 1):
        lines += [
            f"  - name: {_yaml(v.finding.title)}",
            f"    hypothesis: {_yaml(_statement(v, evidence))}",
            f"    priority: {n}",
        ]
    lines += ["```", "", "## As broad hypotheses", "", "```yaml", "hypotheses:"]
    categories = ("obvious", "bold", "creative", "adjacent", "wildcard")
    for n, v in enumerate(queue[:5], 1):
        lines += [f"  - id: h{n}", f"    category: {categories[n - 1]}",
                  f"    name: {_yaml(v.finding.title)}",
                  f"    statement: {_yaml(_statement(v, evidence))}"]  # fmt: skip
    lines.append("```")
    return "\n".join(lines) + "\n"


def _statement(vote: votes.Vote, evidence: dict) -> str:
    first = evidence.get(vote.finding.id, {})
    return first.get("hypothesis") or f"Addressing {vote.finding.title} ({vote.finding.location})"


def _yaml(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def debate_md(merged: list[votes.Merged], records: list[dict], warnings: list[str]) -> str:
    titles = {m.id: m.title for m in merged}
    lines = ["# Debate", ""]
    for record in records:
        if not record:
            continue
        lines += [f"## Round {record['round']}: {record['persona']}", ""]
        for fid, p in (record.get("positions") or {}).items():
            severity = f" ({p['severity']})" if p.get("severity") else ""
            lines.append(f"- {p['stance']}{severity} {fid} {titles.get(fid, '')}: {p['reason']}")
        if not record.get("positions"):
            lines.append("- (no positions stated)")
        advocate = record.get("devils_advocate")
        if advocate:
            lines.append(
                f"- Devil's advocate check: disputed {len(advocate['disputed'])} of "
                f"{len(advocate['majority'])} majority findings after {record['attempts']} "
                f"attempt(s): {advocate['action']}"
            )
        lines.append("")
    if warnings:
        lines += ["## Groupthink", "", *(f"- {w}" for w in warnings), ""]
    return "\n".join(lines)

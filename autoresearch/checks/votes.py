"""The predict lens's vote: merging the personas' findings, the debate's positions, the label and
priority of each finding, the groupthink warning and the devil's-advocate rule.

Rules:
- Merge: findings with the same place (file:line) and normalized title are one finding, raised by
  every persona that proposed it; it keeps the most severe severity and highest confidence.
- Positions: before the debate each raiser confirms its own findings and every other persona
  abstains; each debate round replaces the positions a persona states. `revise` counts as a
  confirmation that argues for another severity.
- Label, from c confirmations and d disputes out of N personas: confirmed when c > N/2;
  discarded when c = 0 or d > N/2; probable when c ≥ 0.4·N; minority otherwise.
- Severity after the debate: the median of the confirmers' severities (the less severe of the two
  middle ones). Priority = 0.4·severity + 0.2·confidence + 0.4·(c/N), each on 0–1.
- Groupthink: a round in which at least 80% of the positions that disputed before now confirm
  (and at least 3 did dispute) is flagged.
- Devil's advocate: in each round it must dispute at least half of the majority positions (the
  findings more than half of the other personas confirm in that round); if not, its round is
  retried once, and a second miss is accepted and reported.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from autoresearch.checks.finding_schema import finding_hash
from autoresearch.checks.severity import rank, weight

STANCES = ("confirm", "dispute", "revise", "abstain")
CONFIDENCE_WEIGHTS = {"high": 1.0, "medium": 0.5, "low": 0.0}
PRIORITY_WEIGHTS = (0.4, 0.2, 0.4)  # severity, confidence, consensus
GROUPTHINK_SHARE = 0.8
GROUPTHINK_MINIMUM = 3
DEVILS_ADVOCATE = "devils-advocate"


@dataclass(frozen=True)
class Proposal:
    """One persona's finding from its independent analysis (already schema-checked)."""

    persona: str
    title: str
    location: str
    severity: str
    confidence: str  # high | medium | low


@dataclass(frozen=True)
class Merged:
    id: str  # hash of place + title, stable across runs
    title: str
    location: str
    severity: str
    confidence: str
    raised_by: tuple[str, ...]


@dataclass(frozen=True)
class Position:
    stance: str  # one of STANCES
    severity: str | None = None  # revise only: the severity argued for

    def __post_init__(self) -> None:
        if self.stance not in STANCES:
            raise ValueError(f"stance {self.stance!r} not allowed (expected {', '.join(STANCES)})")

    @property
    def agrees(self) -> bool:
        return self.stance in ("confirm", "revise")


# persona -> finding id -> position, for one debate round
Round = Mapping[str, Mapping[str, Position]]


@dataclass(frozen=True)
class Vote:
    finding: Merged
    confirmations: int
    disputes: int
    personas: int
    label: str  # confirmed | probable | minority | discarded
    severity: str  # after the debate
    priority: float


def merge_id(location: str, title: str) -> str:
    """The merge identity: place and normalized title (the persona's category does not count)."""
    return finding_hash("", location, title)


def merge(proposals: Sequence[Proposal]) -> list[Merged]:
    """One Merged per place + title, in the order first proposed."""
    groups: dict[str, list[Proposal]] = {}
    for p in proposals:
        groups.setdefault(merge_id(p.location, p.title), []).append(p)
    merged = []
    for fid, group in groups.items():
        raised_by = tuple(dict.fromkeys(p.persona for p in group))
        merged.append(
            Merged(
                id=fid,
                title=group[0].title,
                location=group[0].location,
                severity=min((p.severity for p in group), key=rank),
                confidence=max((p.confidence for p in group), key=_confidence),
                raised_by=raised_by,
            )
        )
    return merged


def positions(
    merged: Sequence[Merged], personas: Sequence[str], rounds: Sequence[Round]
) -> dict[str, dict[str, Position]]:
    """finding id -> persona -> position after the given rounds."""
    state = {
        m.id: {p: Position("confirm" if p in m.raised_by else "abstain") for p in personas}
        for m in merged
    }
    for debate_round in rounds:
        for persona, stated in debate_round.items():
            for fid, position in stated.items():
                if fid in state and persona in state[fid]:
                    state[fid][persona] = position
    return state


def label(confirmations: int, disputes: int, personas: int) -> str:
    if personas < 1:
        raise ValueError("a vote needs at least one persona")
    if 2 * confirmations > personas:
        return "confirmed"
    if confirmations == 0 or 2 * disputes > personas:
        return "discarded"
    if 5 * confirmations >= 2 * personas:
        return "probable"
    return "minority"


def priority(severity: str, confidence: str, consensus: float) -> float:
    ws, wc, wn = PRIORITY_WEIGHTS
    return round(ws * weight(severity) + wc * _confidence(confidence) + wn * consensus, 4)


def tally(merged: Sequence[Merged], personas: Sequence[str], rounds: Sequence[Round]) -> list[Vote]:
    """Every finding's vote, highest priority first (ties: more severe, then title)."""
    state = positions(merged, personas, rounds)
    votes = []
    for m in merged:
        stated = state[m.id].values()
        agreeing = [p for p in stated if p.agrees]
        c = len(agreeing)
        d = sum(1 for p in stated if p.stance == "dispute")
        severity = _median_severity([p.severity or m.severity for p in agreeing]) or m.severity
        n = len(personas)
        votes.append(
            Vote(m, c, d, n, label(c, d, n), severity, priority(severity, m.confidence, c / n))
        )
    return sorted(votes, key=lambda v: (-v.priority, rank(v.severity), v.finding.title))


def hypothesis_queue(votes: Sequence[Vote]) -> list[Vote]:
    """The votes worth trying, in rank order: everything not discarded."""
    return [v for v in votes if v.label != "discarded"]


def groupthink(
    merged: Sequence[Merged], personas: Sequence[str], rounds: Sequence[Round]
) -> list[str]:
    """One warning per round in which nearly every dissenting position flipped to agree."""
    warnings = []
    for r in range(1, len(rounds) + 1):
        before = positions(merged, personas, rounds[: r - 1])
        after = positions(merged, personas, rounds[:r])
        dissent = [
            (fid, p)
            for fid, by in before.items()
            for p, pos in by.items()
            if pos.stance == "dispute"
        ]
        flipped = sum(1 for fid, p in dissent if after[fid][p].agrees)
        if len(dissent) >= GROUPTHINK_MINIMUM and flipped >= GROUPTHINK_SHARE * len(dissent):
            warnings.append(
                f"groupthink in round {r}: {flipped} of {len(dissent)} disputing positions "
                "flipped to agree"
            )
    return warnings


# --- the devil's advocate ---


@dataclass(frozen=True)
class DevilsAdvocateCheck:
    majority: tuple[str, ...]  # finding ids most other personas confirm this round
    disputed: tuple[str, ...]  # those among them the devil's advocate disputed

    @property
    def ok(self) -> bool:
        return 2 * len(self.disputed) >= len(self.majority)

    @property
    def required(self) -> int:
        return (len(self.majority) + 1) // 2


def check_devils_advocate(debate_round: Round) -> DevilsAdvocateCheck:
    """Whether the devil's advocate disputed at least half of this round's majority positions."""
    others = [p for p in debate_round if p != DEVILS_ADVOCATE]
    fids = sorted({fid for p in others for fid in debate_round[p]})
    majority = tuple(
        fid
        for fid in fids
        if 2 * sum(1 for p in others if _agrees(debate_round[p].get(fid))) > len(others)
    )
    own = debate_round.get(DEVILS_ADVOCATE, {})
    disputed = tuple(
        fid for fid in majority if own.get(fid) is not None and own[fid].stance == "dispute"
    )
    return DevilsAdvocateCheck(majority, disputed)


def devils_advocate_action(check: DevilsAdvocateCheck, attempt: int) -> str:
    """'accept', 'retry' (first miss) or 'accept-noncompliant' (missed again after the retry)."""
    if check.ok:
        return "accept"
    return "retry" if attempt <= 1 else "accept-noncompliant"


# --- helpers ---


def _confidence(confidence: str) -> float:
    return CONFIDENCE_WEIGHTS.get(confidence.strip().lower(), 0.0)


def _agrees(position: Position | None) -> bool:
    return position is not None and position.agrees


def _median_severity(severities: Collection[str]) -> str | None:
    if not severities:
        return None
    ordered = sorted(severities, key=rank)
    return ordered[len(ordered) // 2]

"""Predict: several reviewers analyse the target independently — each persona a separate job
that sees no other's work — then debate for a few rounds, and code counts the vote. The target
is never changed.

Files under `sessions/<name>/predict/<persona>/`: `round-0.json` (the persona's own checked
findings), `round-<r>.json` (its positions in debate round r). The report (`lens_report`)
merges, tallies and writes findings.md (the vote table), hypothesis-queue.md, debate.md and
predict-results.tsv.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoresearch.engine.stage import StageEnv
from autoresearch.session.files import read_json, write_text
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec

from ...checks import votes
from ...checks.severity import at_or_above
from ..base import Progress, part
from ..lens import Lens, lens_log
from ..lens.output import Writer
from . import report

DEFAULT_PERSONAS = ("architecture", "security", "performance", "reliability", "devils-advocate")
DEFAULT_ROUNDS = 2
CHARGES = {
    "architecture": "Structure: module boundaries, coupling, layering, and where a change "
    "ripples furthest.",
    "security": "Attackers: untrusted input, secrets, permissions, unsafe calls.",
    "performance": "Cost: algorithms, repeated work, memory, I/O inside loops.",
    "reliability": "Failure: error handling, cleanup, what happens on bad input or a crash.",
    "correctness": "Logic: wrong results, off-by-one errors, broken invariants.",
    "maintainability": "Change: duplication, unclear names, code that resists being changed.",
    votes.DEVILS_ADVOCATE: "Doubt: challenge what looks fine and what the others will take "
    "for granted. In the debate, dispute the majority wherever its evidence is thin.",
}
SPEC_EXAMPLE = """
predict:
  personas: [architecture, security, performance, reliability, devils-advocate]   # 3 to 8
  rounds: 2              # debate rounds after the independent analysis
fail_on: none            # gate on confirmed findings at or above this severity
"""


def charge(persona: str) -> str:
    return CHARGES.get(persona, f"Review the code as an expert in {persona.replace('-', ' ')}.")


class PredictViews(Lens.views):
    def progress(self, layout: SessionLayout) -> Progress:
        return replace(
            super().progress(layout),
            cycles=len(list((layout.root / "predict").glob("*/round-*.json"))),
        )

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        personas = self.personas(spec)
        done = [p for p in personas if self.round_path(layout, p, 0).exists()]
        lines = [f"Personas analysed: {len(done)}/{len(personas)}"]
        return lines + super().status_lines(layout, spec)


class Predict(Lens):
    name = "predict"
    spec_example = SPEC_EXAMPLE
    gate_label = "findings voted on"
    views = part(PredictViews)

    def personas(self, spec: dict[str, Any]) -> list[str]:
        return list(self.section(spec).get("personas") or DEFAULT_PERSONAS)

    def rounds(self, spec: dict[str, Any]) -> int:
        value = self.section(spec).get("rounds")
        return DEFAULT_ROUNDS if value is None else int(value)

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        personas = self.personas(values)
        log(f"predict: {len(personas)} personas, {self.rounds(values)} debate rounds")
        return {"personas": personas, "run_id": self.new_run_id(layout)}

    # --- files ---------------------------------------------------------------------------

    @staticmethod
    def round_path(layout: SessionLayout, persona: str, number: int) -> Path:
        return layout.root / "predict" / persona / f"round-{number}.json"

    def debate_inputs(self, layout: SessionLayout, spec: SessionSpec, number: int) -> list[str]:
        return [rel(self.round_path(layout, p, number - 1)) for p in self.personas(spec)]

    def report_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        from autoresearch.session.spec import load_frozen

        spec = load_frozen(layout.spec)
        last = self.rounds(spec)
        return [rel(self.round_path(layout, p, last)) for p in self.personas(spec)]

    # --- reading the rounds --------------------------------------------------------------

    def analysed(self, layout: SessionLayout, personas: list[str]) -> list[tuple[str, dict]]:
        """(persona, finding) of each finding the independent analysis accepted, in order."""
        return [
            (persona, item["finding"])
            for persona in personas
            for item in read_json(self.round_path(layout, persona, 0))["accepted"]
        ]

    def proposals(self, layout: SessionLayout, personas: list[str]) -> list[votes.Proposal]:
        return [
            votes.Proposal(persona, f["title"], f["location"], f["severity"], f["confidence"])
            for persona, f in self.analysed(layout, personas)
        ]

    def evidence(self, layout: SessionLayout, personas: list[str]) -> dict[str, dict[str, Any]]:
        """Merged id -> the first raiser's finding (its evidence and hypothesis)."""
        out: dict[str, dict[str, Any]] = {}
        for _, f in self.analysed(layout, personas):
            out.setdefault(votes.merge_id(f["location"], f["title"]), f)
        return out

    def debate_rounds(
        self, layout: SessionLayout, personas: list[str], upto: int
    ) -> list[dict[str, dict[str, votes.Position]]]:
        """Rounds 1..upto as the vote maths takes them: persona -> finding id -> position."""
        rounds = []
        for number in range(1, upto + 1):
            stated = {}
            for persona in personas:
                data = read_json(self.round_path(layout, persona, number)) or {}
                stated[persona] = {
                    fid: votes.Position(p["stance"], p.get("severity"))
                    for fid, p in (data.get("positions") or {}).items()
                }
            rounds.append(stated)
        return rounds

    # --- the report ----------------------------------------------------------------------

    def write_report(self, env: StageEnv, findings_out: Path, handoff_out: Path) -> None:
        layout, spec = env.layout, env.spec
        personas = self.personas(spec)
        merged = votes.merge(self.proposals(layout, personas))
        rounds = self.debate_rounds(layout, personas, self.rounds(spec))
        tally = votes.tally(merged, personas, rounds)
        warnings = votes.groupthink(merged, personas, rounds)
        evidence = self.evidence(layout, personas)
        writer = self.writer(env.record)
        writer.text(findings_out, report.findings_md(layout.name, tally, evidence, warnings))
        writer.text(layout.root / "hypothesis-queue.md", report.queue_md(tally, evidence))
        records = [read_json(self.round_path(layout, p, n)) or {}
                   for n in range(1, self.rounds(spec) + 1) for p in personas]  # fmt: skip
        writer.text(layout.root / "debate.md", report.debate_md(merged, records, warnings))
        self.write_log(env, personas, merged)
        kept = [
            report.as_finding(v, evidence.get(v.finding.id, {}))
            for v in tally
            if v.label in ("confirmed", "probable")
        ]
        data = self.handoff(env, kept, {"groupthink": warnings})
        confirmed = [v.severity for v in tally if v.label == "confirmed"]
        data["gate"] = (
            "FAILED" if any(at_or_above(s, self.fail_on(spec)) for s in confirmed) else "PASSED"
        )
        writer.json(handoff_out, data)

    def write_log(self, env: StageEnv, personas: list[str], merged: list[votes.Merged]) -> None:
        """predict-results.tsv: one row per round (0 = the independent analysis)."""
        layout = env.layout
        run_id = self.setup_data(layout)["run_id"]
        rows = []
        for number in range(0, self.rounds(env.spec) + 1):
            records = [read_json(self.round_path(layout, p, number)) or {} for p in personas]
            dropped = [d for r in records for d in r.get("dropped", [])]
            rows.append(
                lens_log.LogRow(
                    run_id=run_id,
                    iteration=number,
                    category="analysis" if number == 0 else f"debate-{number}",
                    new=len(merged) if number == 0 else 0,
                    dropped=len(dropped),
                    drop_reasons=dict(Counter(d["kind"] for d in dropped)),
                    hashes=tuple(m.id for m in merged) if number == 0 else (),
                    status="analysed" if number == 0 else "debated",
                    description=f"{len(personas)} personas",
                    timestamp=max((r.get("timestamp", "") for r in records), default=""),
                )
            )
        merged_rows = lens_log.merge(self.read_log(layout), rows)
        write_text(self.results_path(layout), lens_log.render(merged_rows))

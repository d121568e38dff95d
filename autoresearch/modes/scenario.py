"""Scenario: from one seed scenario (an actor and an action), the situations the system will
meet, explored one dimension per iteration — the least covered, never the same more than three
times in a row — and classified by code as new, variant, duplicate or out of scope. The target
is never changed; `format: pytest` also writes skipped test skeletons.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from autoresearch.engine.stage import StageEnv
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec

from ..checks.finding_schema import SCENARIO, SCENARIO_DIMENSIONS
from ..checks.severity import at_or_above, rank
from ..errors import SpecError
from .base import part
from .lens import lens_log
from .lens.loop import Focus, LoopLens
from .lens.output import Writer
from .lens.saturation import Iteration, coverage, next_dimension

SPEC_EXAMPLE = """
scenario:
  seed: "A shop owner removes stock that another clerk is selling"   # an actor and an action
  format: markdown       # or pytest: also skipped test skeletons in sessions/<name>/tests/
fail_on: none            # scenarios inform; set a severity to gate on them
saturation: 3
# then: fix              # hand the high-severity situations on as findings
"""
QUESTIONS = {
    "happy-path": "What happens when everything goes as intended?",
    "errors": "Which errors can occur, and what does the actor see?",
    "edge-values": "What do empty, zero, huge, negative or malformed values do?",
    "abuse": "How could someone misuse this on purpose?",
    "scale": "What changes with many items, users or requests?",
    "concurrency": "What if two actors do this at the same time?",
    "time": "What do time zones, clocks, timeouts and ordering change?",
    "data-variation": "Which unusual but valid data shapes occur (unicode, duplicates, ...)?",
    "permissions": "Who may do this, and what stops anyone else?",
    "integration": "What do the systems around it expect, and what if they fail?",
    "recovery": "What happens after a crash or an interrupted run, halfway through?",
    "state-transitions": "Which states does the data pass through, and which are forbidden?",
}
HANDED_ON = "high"  # `then: fix` takes situations of this severity and above


class ScenarioViews(LoopLens.views):
    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        return f"## Scenario\n- Iterations: {len(decisions)}"


class Scenario(LoopLens):
    name = "scenario"
    team = "explorer"
    schema = SCENARIO
    report_tool = "report_situation"
    id_prefix = "U"
    default_cycle_cap = 24  # every dimension twice
    spec_example = SPEC_EXAMPLE
    gate_label = "situations"
    views = part(ScenarioViews)

    def check_lens_spec(self, values: dict[str, Any], where: str) -> None:
        if not self.section(values).get("seed"):
            raise SpecError(
                f"{where}: key 'scenario.seed' is not set: give one sentence with an actor and "
                "an action, e.g. 'A clerk sells the last item'"
            )

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        seed = self.section(values)["seed"]
        log(f"scenario: seed {seed!r} over {len(SCENARIO_DIMENSIONS)} dimensions")
        return {"seed": seed, "dimensions": {d: QUESTIONS[d] for d in SCENARIO_DIMENSIONS}}

    def categories(self, spec: SessionSpec, setup: dict[str, Any]) -> list[str]:
        return list(SCENARIO_DIMENSIONS)

    def pick(self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]) -> Focus:
        dimension = next_dimension(history, window=self.window(env.spec)) or SCENARIO_DIMENSIONS[0]
        return Focus(dimension, f"{dimension}: {QUESTIONS[dimension]}", {"dimension": dimension})

    def extra_stop(
        self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]
    ) -> str | None:
        if next_dimension(history, window=self.window(env.spec)) is None:
            return "every dimension saturated"
        return None

    def brief(self, env: StageEnv, focus: Focus, setup: dict[str, Any]) -> dict[str, Any]:
        known = [f"[{i['finding']['dimension']}] {i['finding']['title']}"
                 for i in self.accepted(env.layout, before=env.cycle)]  # fmt: skip
        return {
            "heading": f"Scenarios: iteration {env.cycle}",
            "focus": f"Seed scenario: {setup['seed']}\nDimension of this run: {focus.text}",
            "context": [("Situations already recorded (do not repeat them)", known)],
            "closing": "Report each situation with report_situation, then end your turn.",
            "data": {**focus.data, "seed": setup["seed"], "known": known},
        }

    def counts_as_new(self, item: dict[str, Any]) -> bool:
        return item["novelty"] == "new"

    # --- the report ----------------------------------------------------------------------

    def render_findings(self, env: StageEnv, findings: list[dict[str, Any]]) -> str:
        ordered = sorted(findings, key=lambda f: (rank(f["severity"]), f["id"]))
        lines = [f"# Scenario findings: {env.layout.name}", "", "Most severe first.", ""]
        lines += [f"- [{f['id']}] [{f['severity']}] {f['title']} ({f['dimension']}, "
                  f"{f['novelty']})" for f in ordered] or ["(none)"]  # fmt: skip
        return "\n".join(lines) + "\n"

    def write_report(self, env: StageEnv, findings_out: Path, handoff_out: Path) -> None:
        findings = self.report_findings(env.layout)
        writer = self.writer(env.record)
        writer.text(findings_out, self.render_findings(env, findings))
        self.write_outputs(env, findings, self.read_log(env.layout))
        handed = [
            {**f, "task": "write a test for this scenario and make it pass"}
            for f in findings
            if at_or_above(f["severity"], HANDED_ON)
        ]
        data = self.handoff(env, handed, {"stopped": self.stopped(env)})
        data["gate"] = self.handoff(env, findings)["gate"]  # the gate weighs every situation
        writer.json(handoff_out, data)

    def write_outputs(
        self, env: StageEnv, findings: list[dict[str, Any]], rows: list[lens_log.LogRow]
    ) -> None:
        writer = self.writer(env.record)
        root = env.layout.root
        setup = self.setup_data(env.layout)
        by_dim = {d: [f for f in findings if f["dimension"] == d] for d in SCENARIO_DIMENSIONS}
        writer.text(root / "scenarios.md", scenarios_md(setup["seed"], by_dim))
        edges = {d: fs for d, fs in by_dim.items() if d != "happy-path"}
        writer.text(root / "edge-cases.md", scenarios_md(setup["seed"], edges, "Edge cases"))
        writer.text(root / "use-cases.md", use_cases_md(findings))
        writer.text(root / "summary.md", self.summary_md(env, findings, rows))
        if self.section(env.spec).get("format") == "pytest":
            writer.text(root / "tests" / "test_scenarios.py", skeletons(setup["seed"], findings))

    def summary_md(self, env, findings, rows) -> str:
        runs = list(dict.fromkeys(r.run_id for r in rows))
        log = lens_log.iterations(rows, runs[-1]) if runs else []
        counts = coverage(log, SCENARIO_DIMENSIONS)
        dropped: dict[str, Counter[str]] = defaultdict(Counter)
        for r in rows:
            dropped[r.category].update(r.drop_reasons)
        lines = [
            f"# Scenario summary: {env.layout.name}",
            "",
            f"Seed: {self.setup_data(env.layout)['seed']}",
            "",
            "## Coverage matrix",
            "",
            "| dimension | iterations | new | variants | duplicates | out of scope | high+ |",
            "|---|---|---|---|---|---|---|",
        ]
        for d in SCENARIO_DIMENSIONS:
            fs = [f for f in findings if f["dimension"] == d]
            drops = dropped.get(d, {})
            lines.append(
                f"| {d} | {counts[d].iterations} | "
                f"{sum(1 for f in fs if f['novelty'] == 'new')} | "
                f"{sum(1 for f in fs if f['novelty'] == 'variant')} | "
                f"{drops.get('duplicate', 0)} | {drops.get('scope', 0)} | "
                f"{sum(1 for f in fs if at_or_above(f['severity'], 'high'))} |"
            )
        lines += ["", f"Stopped: {self.stopped(env) or 'finished'}"]
        return "\n".join(lines) + "\n"


def scenarios_md(seed: str, by_dim: dict[str, list[dict]], title: str = "Scenarios") -> str:
    lines = [f"# {title}", "", f"Seed: {seed}", ""]
    for dimension, fs in by_dim.items():
        if not fs:
            continue
        lines += [f"## {dimension}", ""]
        for f in fs:
            lines += [
                f"### {f['id']} [{f['severity']}] {f['title']} ({f['novelty']})",
                f"- Actors: {f['actors']}",
                f"- Precondition: {f['precondition']}",
                f"- Trigger: {f['trigger']}",
                f"- Flow: {f['flow']}",
                f"- Expected: {f['expected']}",
                f"- What can go wrong: {f['what_can_go_wrong']}",
                *([f"- Code: {f['location']}"] if f.get("location") else []),
                "",
            ]
    return "\n".join(lines) + "\n"


def use_cases_md(findings: list[dict[str, Any]]) -> str:
    lines = ["# Use cases", ""]
    for f in findings:
        lines += [
            f"## {f['id']} {f['title']}",
            f"- Given {f['precondition']}",
            f"- When {f['trigger']}",
            f"- Then {f['expected']}",
            "",
        ]
    return "\n".join(lines) + "\n"


def skeletons(seed: str, findings: list[dict[str, Any]]) -> str:
    """One skipped test per situation: a person (or the fix lens) fills each in."""
    lines = [f'"""Test skeletons for the scenario: {seed}"""', "", "import pytest", ""]
    for f in findings:
        name = re.sub(r"[^a-z0-9]+", "_", f"{f['id']} {f['title']}".lower()).strip("_")
        lines += [
            "",
            f'@pytest.mark.skip(reason="skeleton: {f["dimension"]}, {f["severity"]}")',
            f"def test_{name}():",
            f"    # Given {f['precondition']}",
            f"    # When {f['trigger']}",
            f"    # Then {f['expected']}",
            "    raise NotImplementedError",
            "",
        ]
    return "\n".join(lines)

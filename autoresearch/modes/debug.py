"""Debug: a hypothesis-driven bug hunt. Leads come from the symptom, or — with none — from the
harness's own run of the tests, the linter, and the type checker and build when configured (a
chained debug also takes the findings handed to it). Each iteration works one lead with one
new, falsifiable hypothesis; a bug is confirmed only when its reproduction, a test file run by
the harness with the target's runner from a scratch folder, fails on the current tree. The
target is never changed; the reproductions ship with the findings for the fix lens.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from autoresearch.engine import chain
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import commands
from autoresearch.session.files import read_json
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec

from ..checks.finding_schema import DEBUG
from ..checks.severity import rank
from .base import part
from .lens import lens_log
from .lens.loop import Focus, LoopLens
from .lens.output import Writer
from .lens.reproduction import MAX_ATTEMPTS, hypothesis_key, judge_reproduction
from .lens.saturation import Iteration

SPEC_EXAMPLE = """
debug:
  symptom: null          # an error message, a failing test id or a description
  # repro_command: "python -m pytest -q {file}"   # default: the test command, then {file}
  # type_check_command: mypy .
fail_on: high
saturation: 3
# then: fix              # hand the confirmed bugs (with their reproductions) to the fix lens
"""
SCRATCH = ".autoresearch-scratch"  # inside the worktree, outside the target's tests
MAX_LEADS = 10
FAILED_TEST = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)
GENERAL = "No symptom and nothing fails: look for a bug anywhere in scope."


class DebugViews(LoopLens.views):
    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        return f"## Debug\n- Iterations: {len(decisions)}"


class Debug(LoopLens):
    name = "debug"
    team = "debugger"
    schema = DEBUG
    report_tool = "report_bug"
    id_prefix = "B"
    default_cycle_cap = 10
    spec_example = SPEC_EXAMPLE
    gate_label = "confirmed bugs"
    views = part(DebugViews)

    # --- leads ---------------------------------------------------------------------------

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        section = self.section(values)
        leads: list[dict[str, str]] = []
        if section.get("symptom"):
            leads.append({"source": "symptom", "text": str(section["symptom"])})
        else:
            worktree, timeout = layout.worktree(), values["test_timeout_s"]
            secrets = values.get("secrets")
            tests = commands.run(record.test_command, worktree, timeout, extra_secrets=secrets)
            leads += [
                {"source": "tests", "text": f"failing test {test_id}"}
                for test_id in dict.fromkeys(FAILED_TEST.findall(tests.output))
            ]
            if not tests.ok and not leads:
                leads.append({"source": "tests", "text": "the test run fails:\n" + tests.tail(800)})
            for source, command in (
                ("linter", record.linter_command),
                ("type checker", section.get("type_check_command")),
                ("build", section.get("build_command")),
            ):
                if not command:
                    continue
                run = commands.run(command, worktree, timeout, extra_secrets=secrets)
                if not run.ok:
                    leads.append({"source": source, "text": f"`{command}` fails:\n{run.tail(800)}"})
        handoff = chain.inherited(Path(values["handoff"])) if values.get("handoff") else {}
        leads += [
            {"source": "handed on", "text": f"{f.get('id')} {f.get('title')} ({f.get('location')})"}
            for f in (handoff.get("findings") or [])
        ]
        leads = leads[:MAX_LEADS] or [{"source": "none", "text": GENERAL}]
        for n, lead in enumerate(leads, 1):
            lead["id"] = f"lead-{n}"
        log(f"debug: {len(leads)} leads ({', '.join(sorted({ld['source'] for ld in leads}))})")
        return {"leads": leads}

    def lead_state(self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]):
        """lead id -> 'confirmed' | 'abandoned' | 'open' (attempts counted in this run)."""
        # The iteration being checked has no decision yet: its checked.json counts too.
        current = (read_json(env.cycle_dir / "checked.json") or {}).get("accepted", [])
        items = self.accepted(env.layout, before=env.cycle) + current
        confirmed = {i["focus"] for i in items if i["finding"].get("verdict") == "confirmed"}
        tries = Counter(i.category for i in history)

        def state(lead: str) -> str:
            if lead in confirmed:
                return "confirmed"
            return "abandoned" if tries[lead] >= MAX_ATTEMPTS else "open"

        return {ld["id"]: state(ld["id"]) for ld in setup["leads"]}

    def categories(self, spec: SessionSpec, setup: dict[str, Any]) -> list[str]:
        return [lead["id"] for lead in setup.get("leads", [])]

    def pick(self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]) -> Focus:
        state = self.lead_state(env, history, setup)
        tries = Counter(i.category for i in history)
        open_leads = [ld for ld in setup["leads"] if state[ld["id"]] == "open"]
        lead = min(open_leads or setup["leads"], key=lambda ld: tries[ld["id"]])
        return Focus(lead["id"], lead["text"], {"lead": lead})

    def extra_stop(
        self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]
    ) -> str | None:
        state = self.lead_state(env, history, setup)
        if "open" not in state.values():
            return "no untested lead remains"
        return None

    def brief(self, env: StageEnv, focus: Focus, setup: dict[str, Any]) -> dict[str, Any]:
        earlier = self.accepted(env.layout, before=env.cycle)
        tested = [f"{i['finding']['hypothesis']} → {i['finding']['verdict']}" for i in earlier]
        return {
            "heading": f"Bug hunt: iteration {env.cycle}",
            "focus": f"Lead ({focus.data['lead']['source']}): {focus.text}",
            "context": [("Hypotheses already tested (form a different one)", tested)],
            "closing": "Form one hypothesis (I think X because Y; test by Z), run one "
            "experiment, and report it with report_bug, with a reproduction test file when you "
            "think the bug is real. Then end your turn.",
            "data": {**focus.data, "tested": [hypothesis_key(t) for t in tested]},
        }

    # --- the harness's confirmation ------------------------------------------------------

    def repro_command(self, env: StageEnv, path: str) -> str:
        template = self.section(env.spec).get("repro_command")
        if template:
            return template.replace("{file}", shlex.quote(path))
        return f"{env.record.test_command} {shlex.quote(path)}"

    def after_check(
        self, env: StageEnv, accepted: list[dict[str, Any]], setup: dict[str, Any]
    ) -> list[dict[str, Any]]:
        earlier = {
            hypothesis_key(str(i["finding"]["hypothesis"]))
            for i in self.accepted(env.layout, before=env.cycle)
        }
        writer = self.writer(env.record)
        for item in accepted:
            finding = item["finding"]
            key = hypothesis_key(str(finding["hypothesis"]))
            item["repeated"] = key in earlier
            earlier.add(key)
            claimed = finding["verdict"]
            repro = finding.get("reproduction")
            if not repro:
                # Without a reproduction nothing is confirmed: it stays a lead.
                finding["verdict"] = "new-lead" if claimed == "confirmed" else claimed
                item["harness"] = "no reproduction given"
                continue
            result = self.reproduce(env, item["hash"], str(repro))
            item["harness"] = result.reason
            if result.confirmed:
                finding["verdict"] = "confirmed"
            elif claimed == "confirmed":
                finding["verdict"] = "new-lead"
            saved = env.layout.root / "reproductions" / f"test_{item['id'].lower()}.py"
            writer.text(saved, str(repro))
            item["reproduction_file"] = str(saved.relative_to(env.layout.root))
        return accepted

    def reproduce(self, env: StageEnv, digest: str, text: str):
        """Run the reproduction from the scratch folder; the worktree is reset afterwards."""
        path = f"{SCRATCH}/test_repro_{digest}.py"
        try:
            (env.worktree / SCRATCH).mkdir(exist_ok=True)
            (env.worktree / path).write_text(text)
            run = commands.run(
                self.repro_command(env, path),
                env.worktree,
                timeout_s=env.spec.test_timeout_s,
                extra_secrets=env.spec.secrets,
            )
        finally:
            env.begin(env.record.base_commit)  # the scratch folder goes with the reset
        env.log(f"debug: reproduction {path}: exit {run.exit_code}")
        return judge_reproduction(run.output, None if run.timed_out else run.exit_code)

    def counts_as_new(self, item: dict[str, Any]) -> bool:
        return not item.get("repeated")

    def gate_severities(self, findings: list[dict[str, Any]]) -> list[str]:
        return [f["severity"] for f in findings if f.get("verdict") == "confirmed"]

    # --- the report ----------------------------------------------------------------------

    def render_findings(self, env: StageEnv, findings: list[dict[str, Any]]) -> str:
        bugs = [f for f in findings if f["verdict"] != "disproven"]
        bugs.sort(key=lambda f: (f["verdict"] != "confirmed", rank(f["severity"]), f["id"]))
        lines = [f"# Debug findings: {env.layout.name}", ""]
        if not bugs:
            lines.append("(none)")
        for f in bugs:
            lines += [
                f'<a id="{f["id"].lower()}"></a>',
                f"## {f['id']} [{f['verdict']}] [{f['severity']}] {f['title']}",
                "",
                f"- Location: {f['location']}",
                f"- Category: {f['category']}",
                f"- Hypothesis: {f['hypothesis']}",
                f"- Evidence: {f['evidence']}",
                f"- Reproduction: {f.get('reproduction_file') or 'none'}",
                f"- Impact: {f.get('impact', 'not stated')}",
                f"- Root cause: {f.get('root_cause', 'not stated')}",
                "",
            ]
        return "\n".join(lines)

    def report_findings(self, layout) -> list[dict[str, Any]]:
        extra = {i["id"]: i for i in self.accepted(layout)}
        out = super().report_findings(layout)
        for f in out:
            item = extra[f["id"]]
            f["reproduction_file"] = item.get("reproduction_file")
            f["harness"] = item.get("harness")
            if f.get("verdict") == "confirmed" and f.get("reproduction"):
                f["regression_test"] = f["reproduction"]  # what the fix lens turns into a test
        return out

    def write_outputs(
        self, env: StageEnv, findings: list[dict[str, Any]], rows: list[lens_log.LogRow]
    ) -> None:
        writer = self.writer(env.record)
        root = env.layout.root
        gone = [f for f in findings if f["verdict"] == "disproven"]
        lines = [f"# Eliminated hypotheses: {env.layout.name}", ""]
        lines += [
            f"- {f['id']} {f['hypothesis']} — {f['evidence']} ({f['location']})" for f in gone
        ]
        writer.text(root / "eliminated.md", "\n".join(lines or ["(none)"]) + "\n")
        setup = self.setup_data(env.layout)
        verdicts = {v: sum(1 for f in findings if f["verdict"] == v) for v in DEBUG_VERDICTS}
        summary = [
            f"# Debug summary: {env.layout.name}",
            "",
            f"- Leads: {len(setup.get('leads', []))}",
            *(
                f"  - {ld['id']} ({ld['source']}): {ld['text'].splitlines()[0]}"
                for ld in setup.get("leads", [])
            ),  # fmt: skip
            f"- Iterations: {len(rows)} logged",
            "- Verdicts: " + ", ".join(f"{n} {v}" for v, n in verdicts.items()),
            f"- Gate: {self.handoff(env, findings)['gate']} (fail_on: {self.fail_on(env.spec)}; "
            "confirmed bugs only)",
            f"- Stopped: {self.stopped(env) or 'finished'}",
            "- The target was not changed; reproductions are in reproductions/.",
        ]
        writer.text(root / "summary.md", "\n".join(summary) + "\n")


DEBUG_VERDICTS = ("confirmed", "new-lead", "inconclusive", "disproven")

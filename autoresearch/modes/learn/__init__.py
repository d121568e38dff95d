"""Learn: documentation that is checked against the code.

`learn.mode`:
- check: read-only. A health report per doc (docs-health.md): its checks (paths, symbols,
  config keys, links, size, Mermaid), how many days it lags the code it names, whether a
  person or this lens wrote it. No agent runs; the target is left as it was.
- init: the lens's doc set (overview, architecture with a Mermaid diagram, code standards,
  codebase summary) under `learn.docs_dir`, one doc per iteration (`learn_write`).
- update: only the generated docs whose code changed since they were written, or that fail
  their checks.
A doc without the marker in its front matter was written by a person: it is protected from
the start and only ever reported on. Each doc is kept (`docs: …`) only when every reference
it names holds and its score rose.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoresearch.engine.loop import Decision, Extra, Judged, Status
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import worktree_files
from autoresearch.session.files import read_json
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec

from ..base import Ended, part, review_line
from ..lens.changing import ChangingLens, kept_steps
from ..lens.output import Writer
from . import doc_checks, docs

SPEC_EXAMPLE = """
learn:
  mode: check              # check (read-only report) | init (write the doc set) | update
  docs_dir: docs
  max_lines: 800           # per doc
  # config: [config/config.yaml]   # config files whose keys docs may name (checked)
  # ignore: ["sessions/*"]         # paths docs may name that only exist at run time
"""
# How bad a failed check is, for findings.md and the fail_on gate.
SEVERITY = {
    "path": "medium",
    "symbol": "medium",
    "config-key": "medium",
    "mermaid": "medium",
    "link": "low",
    "size": "low",
}


def learn_mode(values: dict[str, Any]) -> str:
    return str((values.get("learn") or {}).get("mode") or "check")


@dataclass(frozen=True)
class DocStep(Extra):
    """What a learn iteration adds to its decision: the doc, why it was kept or not, its
    score before and after, and what the checks found in each round."""

    doc: str
    why: str
    before: float
    after: float
    rounds: list[list[str]]  # each round's failures the agent was told
    failures: list[str]  # the checks the final text fails
    discarded: list[str]  # what else the agent wrote: never kept
    tests_pass: None  # learn runs no tests
    timestamp: str
    session_stop: str | None
    broken: bool = False


class LearnSetup(ChangingLens.setup):
    spec_loop_keys = ""  # one iteration per planned doc; no team to choose

    def plays_with_ruff(self, values: dict[str, Any]) -> bool:
        # check runs no agent, so any backend does; init and update need a model.
        return learn_mode(values) == "check"


class LearnViews(ChangingLens.views):
    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        lines = ["## Learn", f"- Mode: {self.setup_data(env.layout)['mode']}"]
        lines += [
            f"- {d['doc']}: {d['status']} — {d['why']}" + (f" (round failures: {len(d['rounds'])})"
                                                          if d["rounds"] else "")
            for d in decisions
        ]  # fmt: skip
        return "\n".join(lines)

    def done_detail(self, layout: SessionLayout) -> str:
        return f" ({self.setup_data(layout)['mode']})"

    def done_counts(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        kept = [d["doc"] for d in ended.decisions if d["status"] == Status.KEPT]
        docs = f"docs kept: {len(kept)}" + (f" ({', '.join(kept)})" if kept else "")
        return [docs, f"score: {data['score']}"]

    def done_report(self, layout: SessionLayout) -> Path:
        return self.health_path(layout)

    def done_tail(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        if not any(d["status"] == Status.KEPT for d in ended.decisions):
            return [f"target unchanged: {ended.record.target}"]
        final = ended.decisions[-1]["end_commit"][:12]
        return [f"{review_line(ended.record)}  (final {final})"]


class Learn(ChangingLens):
    name = "learn"
    team = "learn"
    loop = "learn"
    decide_checkpoint = "learn_write"
    decision_extra = DocStep
    branch = "autoresearch/learn/{name}"
    gate_label = "doc problems"
    spec_example = SPEC_EXAMPLE
    setup = part(LearnSetup)
    views = part(LearnViews)

    def change_title(self, decision: dict[str, Any]) -> str:
        return f"Document {decision['doc']}"

    def change_lines(self, decision: dict[str, Any]) -> list[str]:
        """The doc the step wrote, why it was kept, and its reference score."""
        return [
            f"Docs step {decision['cycle']}: {decision['doc']}: {decision.get('why')}",
            f"score {decision.get('before')} → {decision.get('after')} (every reference checked "
            "against the code)",
        ]

    # --- setup: the docs, and which this run writes ----------------------------------------

    def rules(self, layout: SessionLayout) -> docs.Rules:
        data = self.setup_data(layout)["rules"]
        keys = data.get("keys")
        return docs.Rules(
            data["max_lines"], tuple(data["ignore"]), frozenset(keys) if keys is not None else None
        )

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        section = self.section(values)
        mode = learn_mode(values)
        worktree = layout.worktree()
        docs_dir = str(section.get("docs_dir") or "docs")
        unread: list[str] = []
        keys = docs.config_keys(worktree, list(section.get("config") or []), unread)
        rules = docs.Rules(
            int(section.get("max_lines") or doc_checks.MAX_LINES),
            tuple(section.get("ignore") or ()),
            frozenset(keys) if keys is not None else None,
        )
        existing = docs.docs_of(worktree, docs_dir)
        # A doc the reader refuses (a link out) counts as a person's: never rewritten.
        people = [
            d
            for d in existing
            if not doc_checks.is_generated(worktree_files.read_if_any(worktree, d, unread) or "")
        ]
        for note in unread:
            log(f"learn: {note}")
        # The sandbox refuses every edit to a doc a person wrote.
        values["protected"] = list(values.get("protected") or []) + people
        targets = self.targets(mode, existing, people, docs_dir, worktree, rules)
        log(
            f"learn {mode}: {len(existing)} docs ({len(people)} by a person); "
            f"{len(targets)} to write"
        )
        return {
            "mode": mode,
            "docs_dir": docs_dir,
            "rules": {
                "max_lines": rules.max_lines,
                "ignore": list(rules.ignore),
                "keys": sorted(keys) if keys is not None else None,
            },
            "existing": existing,
            "by_a_person": people,
            "targets": targets,
        }

    def targets(self, mode, existing, people, docs_dir, worktree, rules) -> list[dict[str, Any]]:
        if mode == "init":
            out = []
            for name, purpose in docs.DOC_SET.items():
                doc = f"{docs_dir}/{name}"
                if doc not in people:  # a person's doc of that name is left alone
                    out.append({"doc": doc, "purpose": purpose, "why": "part of the doc set"})
            return out
        if mode == "update":
            out = []
            for doc in existing:
                if doc in people:
                    continue
                health = docs.health(doc, worktree, rules)
                if health.stale_days > 0 or health.report.failures:
                    why = (
                        f"{health.stale_days:.1f} days older than its code"
                        if health.stale_days > 0
                        else f"{len(health.report.failures)} checks fail"
                    )
                    out.append({"doc": doc, "purpose": "keep it true to the code", "why": why})
            return out
        return []

    # --- the loop ----------------------------------------------------------------------------

    def brief(self, env: StageEnv, target: dict[str, Any], before: float) -> dict[str, Any]:
        setup = self.setup_data(env.layout)
        rules = self.rules(env.layout)
        verb = "Write" if setup["mode"] == "init" else "Update"
        return {
            "heading": f"{verb} {target['doc']}",
            "focus": f"{target['purpose']} ({target['why']}; score now {before:.2f})",
            "context": [
                ("Docs written by a person (read them, never change them)", setup["by_a_person"]),
                (
                    "Rules the harness checks",
                    [
                        f"at most {rules.max_lines} lines",
                        "every file path, module.symbol and config key named must exist",
                        "relative links must resolve; Mermaid blocks must parse",
                        f"front matter keeps the marker `{doc_checks.MARKER}`",
                    ],
                ),
            ],
            "closing": f"Write {target['doc']} only, then call finish_docs.",
            "data": {"doc": target["doc"], "purpose": target["purpose"]},
        }

    def targets_of(self, layout: SessionLayout) -> list[dict[str, Any]]:
        return list(self.setup_data(layout).get("targets") or [])

    def cycle_cap(self, spec: SessionSpec) -> int | None:
        return None  # one iteration per planned doc: loop_stop ends the loop

    def judge(self, env: StageEnv, output: Any) -> Judged:
        """Write, check, keep or drop the doc (stages.write); its row in results.tsv."""
        from . import stages

        decision = stages.write(env, self, Path(output.record))
        return Judged(decision, lambda d: stages.log_row(env, self, d))

    def log_line(self, env: StageEnv, decision: Decision) -> str:
        return f"learn {env.cycle}: {decision['doc']}: {decision['status']} ({decision['why']})"

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        if env.cycle >= len(self.targets_of(env.layout)):
            kept = kept_steps([*env.decisions_before(), decision])
            return f"every planned doc was worked ({kept} of {env.cycle} kept)"
        return None

    def report_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        if not self.targets_of(layout):
            return [rel(self.setup_path(layout))]  # check, or nothing to write: just report
        return [self.final_decision(layout, checkpoints)]

    # --- the report --------------------------------------------------------------------------

    def health_path(self, layout: SessionLayout) -> Path:
        return layout.root / "docs-health.md"

    def write_report(self, env: StageEnv, findings_out: Path, handoff_out: Path) -> None:
        env.begin(self.end_commit(env))
        setup = self.setup_data(env.layout)
        rules = self.rules(env.layout)
        docs_now = docs.docs_of(env.worktree, setup["docs_dir"])
        health = [docs.health(d, env.worktree, rules) for d in docs_now]
        problems = []  # (severity, title, file, line)
        for h in health:
            problems += [
                (SEVERITY.get(c.kind, "low"), f"{c.kind} {c.subject}: {c.reason}", h.doc, c.line)
                for c in h.report.failures
            ]
            if h.freshness != "fresh":
                severity = "medium" if h.freshness == "very stale" else "low"
                title = f"{h.freshness}: {h.stale_days:.0f} days older than its code"
                problems.append((severity, title, h.doc, None))
        findings = [
            {"id": f"D-{n:03d}", "severity": s, "title": t, "file": f, "line": line}
            for n, (s, t, f, line) in enumerate(problems, 1)
        ]
        writer = self.writer(env.record)
        writer.text(self.health_path(env.layout), render_health(env.layout.name, health))
        writer.text(findings_out, render_findings(env.layout.name, findings))
        extra = {
            "stopped": self.stopped(env),
            "score": round(doc_checks.score(h.report for h in health), 4),
        }
        writer.json(handoff_out, self.handoff(env, findings, extra))

    def idle_reason(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str | None:
        if self.targets_of(env.layout):
            return None
        return f"{self.setup_data(env.layout)['mode']}: nothing to write"

    def open_now(self, layout: SessionLayout) -> int:
        return len((read_json(self.handoff_path(layout)) or {}).get("findings") or [])


def render_health(name: str, health: list[docs.Health]) -> str:
    lines = [
        f"# Docs health: {name}",
        "",
        "| doc | by | lines | score | behind its code | failed checks |",
        "|---|---|---:|---:|---|---:|",
    ]
    for h in health:
        lines.append(
            f"| {h.doc} | {'autoresearch' if h.generated else 'a person'} | {h.lines} | "
            f"{h.score:.2f} | {h.freshness} ({h.stale_days:.0f} d) | {len(h.report.failures)} |"
        )
    for h in health:
        if h.report.failures:
            lines += ["", f"## {h.doc}"]
            lines += [
                f"- {'line ' + str(c.line) + ': ' if c.line else ''}{c.kind} `{c.subject}`: "
                f"{c.reason}"
                for c in h.report.failures
            ]
    if not health:
        lines.append("(no docs)")
    return "\n".join(lines) + "\n"


def render_findings(name: str, findings: list[dict[str, Any]]) -> str:
    lines = [f"# Doc problems: {name}", ""]
    lines += [
        f"- [{f['id']}] {f['severity']} · {f['file']}{':' + str(f['line']) if f['line'] else ''}"
        f": {f['title']}"
        for f in findings
    ] or ["None."]
    return "\n".join(lines) + "\n"

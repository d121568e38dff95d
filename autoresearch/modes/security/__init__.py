"""Security: a threat model and attack surface from recon, then one vector per iteration —
STRIDE on each critical asset, then OWASP Top 10 2021, then dependencies, config and business
logic — each finding checked by code. The target is never changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.agents.backends import security_reach
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git
from autoresearch.session.files import read_json
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec

from ...checks.finding_schema import OWASP_2021, SECURITY, STRIDE, compare
from ...checks.severity import SEVERITIES, rank
from ..base import Ended, part, review_line
from ..lens import check_ended, check_ref, lens_log
from ..lens.loop import Focus, LoopLens
from ..lens.output import Writer
from ..lens.saturation import (
    Iteration,
    coverage,
    next_security_vector,
    security_coverage,
    security_vectors,
)
from . import recon as recon_

SPEC_EXAMPLE = """
fail_on: high            # critical | high | medium | low | none: `autoresearch check` exits 1
saturation: 3            # iterations in a row with nothing new that stop the audit
security:
  critical_assets: []    # default: what recon finds (credentials, stored data, entry points)
  fix: false             # true: fix confirmed critical/high findings on the session branch
# diff_base: main        # audit only the files changed since this ref
# compare_with: earlier-security-session   # label findings new / recurring / fixed
# chain: [debug]         # then hand the findings to another lens
"""


class SecurityViews(LoopLens.views):
    def end_files(self, layout: SessionLayout, track: str = "") -> list[Path]:
        fixed = self.fix_path(layout)
        return [fixed, fixed.with_suffix(".md"), *super().end_files(layout, track)]

    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        run = decisions[-1]["run_id"] if decisions else None
        log = lens_log.iterations(self.read_log(env.layout), run) if run else []
        reach = security_reach(env.spec.agent["backend"])
        return (
            f"## Security\n- Iterations: {len(decisions)}\n"
            f"- Coverage: {security_coverage(log, reach)}{reach_note(reach)}"
        )

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        rows = self.read_log(layout)
        runs = list(dict.fromkeys(r.run_id for r in rows))
        log = lens_log.iterations(rows, runs[-1]) if runs else []
        coverage = security_coverage(log, security_reach(spec.agent["backend"]))
        return [f"Coverage: {coverage}", *super().status_lines(layout, spec)]


class Security(LoopLens):
    name = "security"
    team = "auditor"
    schema = SECURITY
    report_tool = "report_vulnerability"
    id_prefix = "V"
    ruff_plays = True
    spec_example = SPEC_EXAMPLE
    views = part(SecurityViews)

    # --- spec and setup ----------------------------------------------------------------

    def check_lens_spec(self, values: dict[str, Any], where: str) -> None:
        check_ref(values, "diff_base", values.get("diff_base"), where)
        check_ended("compare_with", values.get("compare_with"), where)

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        worktree = layout.worktree()
        scope = None
        if values.get("diff_base"):
            changed = git.git(
                Path(record.target), "diff", "--name-only", values["diff_base"], "HEAD"
            )
            scope = [f for f in changed.splitlines() if f]
            log(f"security: diff_base {values['diff_base']}: {len(scope)} changed files")
        found = recon_.scan(worktree, scope)
        found.scanners = recon_.baseline_scanners(worktree, values["test_timeout_s"])
        critical = list(self.section(values).get("critical_assets") or found.assets)
        writer.text(layout.root / "threat-model.md", recon_.threat_model_md(found, critical))
        writer.text(layout.root / "attack-surface.md", recon_.attack_surface_md(found))
        previous = None
        if values.get("compare_with"):
            previous = read_json(Path("sessions") / values["compare_with"] / "handoff.json")
        log(f"security: recon found {len(found.entry_points)} entry points; assets {critical}")
        return {
            "critical_assets": critical,
            "scope": scope,
            "recon": found.to_dict(),
            "previous": [f["hash"] for f in (previous or {}).get("findings", [])],
        }

    # --- the loop ------------------------------------------------------------------------

    def categories(self, spec: SessionSpec, setup: dict[str, Any]) -> list[str]:
        return [v.key for v in security_vectors(setup.get("critical_assets") or [])]

    def cap(self, spec: SessionSpec, setup: dict[str, Any]) -> int:
        # Every vector once, then room for the saturation window.
        return spec.max_cycles or len(self.categories(spec, setup)) + self.window(spec)

    def pick(self, env: StageEnv, history: list[Iteration], setup: dict[str, Any]) -> Focus:
        vector = next_security_vector(history, setup.get("critical_assets") or [])
        data = {"kind": vector.kind, "name": vector.name, "asset": vector.asset, "key": vector.key}
        return Focus(vector.key, vector.describe(), {"vector": data})

    def brief(self, env: StageEnv, focus: Focus, setup: dict[str, Any]) -> dict[str, Any]:
        known = [f"{i['finding']['title']} ({i['finding']['location']})"
                 for i in self.accepted(env.layout, before=env.cycle)]  # fmt: skip
        recon = setup.get("recon") or {}
        scope = setup.get("scope")
        context = [
            ("Critical assets", setup.get("critical_assets") or []),
            ("Entry points found by recon", recon.get("entry_points") or []),
            ("Already reported (do not report again)", known),
        ]
        if scope is not None:
            context.insert(0, ("Files in this audit (changed since diff_base)", scope))
        if recon.get("unread"):
            context.append(("Files recon did not read (links out, special files)", recon["unread"]))
        return {
            "heading": f"Security audit: iteration {env.cycle}",
            "focus": f"Work this vector only: {focus.text}. Find where it applies to the code.",
            "context": context,
            "closing": "Report each vulnerability with report_vulnerability (evidence quoted "
            "from the code), then end your turn. Report nothing you cannot point to.",
            "data": {**focus.data, "files": scope, "reported": known},
        }

    # --- fix: true --------------------------------------------------------------------

    def fixing(self, spec: dict[str, Any]) -> bool:
        return bool(self.section(spec).get("fix"))

    @staticmethod
    def fix_path(layout: SessionLayout) -> Path:
        return layout.root / "security-fix.json"

    def fixes(self, layout: SessionLayout) -> list[dict[str, Any]]:
        return list((read_json(self.fix_path(layout)) or {}).get("results") or [])

    def report_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        from autoresearch.session.spec import load_frozen

        inputs = super().report_inputs(layout, checkpoints)
        if self.fixing(load_frozen(layout.spec)):
            inputs.append(rel(self.fix_path(layout)))
        return inputs

    def done_lines(self, ended: Ended) -> list[str]:
        if not self.fixing(ended.spec):
            return super().done_lines(ended)
        fixed = [r for r in self.fixes(ended.layout) if r["status"] == "fixed"]
        end = (read_json(self.fix_path(ended.layout)) or {}).get("end_commit", "")
        return [
            f"fixes kept: {len(fixed)} (confirmed critical/high only)",
            f"final commit: {end}",
            review_line(ended.record),
        ]

    def report_findings(self, layout: SessionLayout) -> list[dict[str, Any]]:
        status = {r["id"]: r for r in self.fixes(layout)}
        out = super().report_findings(layout)
        for f in out:
            if f["id"] in status:
                f["fix"] = {k: status[f["id"]].get(k) for k in ("status", "commit", "attempts")}
        return out

    # --- the report ----------------------------------------------------------------------

    def labels(self, env: StageEnv, findings: list[dict[str, Any]]) -> dict[str, str]:
        setup = self.setup_data(env.layout)
        if not env.spec.get("compare_with"):
            return {}
        return compare([f["hash"] for f in findings], setup.get("previous") or [])

    def render_findings(self, env: StageEnv, findings: list[dict[str, Any]]) -> str:
        labels = self.labels(env, findings)
        ordered = sorted(findings, key=lambda f: (rank(f["severity"]), f["id"]))
        lines = [f"# Security findings: {env.layout.name}", ""]
        if not ordered:
            lines.append("(none)")
        for f in ordered:
            label = f" [{labels[f['hash']]}]" if f["hash"] in labels else ""
            if f.get("fix"):
                label += f" [{f['fix']['status']}]"
            lines += [
                f'<a id="{f["id"].lower()}"></a>',
                f"## {f['id']} [{f['severity']}] {f['title']}{label}",
                "",
                f"- OWASP: {f['owasp']} {OWASP_2021[f['owasp']]}",
                f"- STRIDE: {f['stride']} ({STRIDE[f['stride']]})",
                f"- CWE: {f.get('cwe', 'n/a')}",
                f"- Location: {f['location']}",
                f"- Confidence: {f['confidence']}",
                f"- Attack scenario: {f['scenario']}",
                f"- Evidence: `{f['evidence']}`",
                f"- Mitigation: {f['mitigation']}",
                "",
            ]
        fixed = [h for h, label in labels.items() if label == "fixed"]
        if fixed:
            lines += ["## Fixed since the compared session", "", *(f"- {h}" for h in fixed), ""]
        return "\n".join(lines)

    def write_outputs(
        self, env: StageEnv, findings: list[dict[str, Any]], rows: list[lens_log.LogRow]
    ) -> None:
        writer = self.writer(env.record)
        root = env.layout.root
        runs = list(dict.fromkeys(r.run_id for r in rows))
        log = lens_log.iterations(rows, runs[-1]) if runs else []
        reach = security_reach(env.spec.agent["backend"])
        writer.text(root / "owasp-coverage.md", coverage_md(log, findings, reach))
        writer.text(root / "recommendations.md", recommendations_md(findings))
        by = {s: sum(1 for f in findings if f["severity"] == s) for s in SEVERITIES}
        gate = self.handoff(env, findings)["gate"]
        lines = [
            f"# Security audit: {env.layout.name}",
            "",
            f"- Target: {env.record.target} at {env.record.base_commit[:12]} (unchanged)",
            f"- Coverage: {security_coverage(log, reach)}" + reach_note(reach),
            f"- Iterations: {len(log)} in this run ({len(runs)} run(s) in the log)",
            f"- Findings: {len(findings)} ("
            + ", ".join(f"{n} {s}" for s, n in by.items() if n)
            + ")",
            f"- Gate: {gate} (fail_on: {self.fail_on(env.spec)})",
            f"- Stopped: {self.stopped(env) or 'finished'}",
            "",
            "Files: threat-model.md, attack-surface.md, findings.md, owasp-coverage.md, "
            "recommendations.md, security-results.tsv.",
        ]
        writer.text(root / "overview.md", "\n".join(lines) + "\n")  # last: the summary


def reach_note(reach: tuple[frozenset[str], frozenset[str]] | None) -> str:
    """What a coverage count means for an auditor with a fixed set of checks (the ruff
    backend's pattern rules): only the categories it has a check for count."""
    if reach is None:
        return ""
    missing = [o for o in OWASP_2021 if o not in reach[0]]
    missing += [s for s in STRIDE if s not in reach[1]]
    return " (categories the auditor has a pattern check for" + (
        f"; it has none for {', '.join(missing)})" if missing else ")"
    )


def coverage_md(
    log: list[Iteration],
    findings: list[dict[str, Any]],
    reach: tuple[frozenset[str], frozenset[str]] | None = None,
) -> str:
    counts = coverage(log, [])
    tried = security_coverage(log, reach)
    lines = ["# OWASP and STRIDE coverage", "", f"{tried}{reach_note(reach)}"]
    lines += ["", "## OWASP Top 10 2021", ""]
    lines += ["| id | category | iterations | findings |", "|---|---|---|---|"]
    for oid, title in OWASP_2021.items():
        its = counts.get(f"owasp:{oid}")
        n = sum(1 for f in findings if f["owasp"] == oid)
        lines.append(f"| {oid} | {title} | {its.iterations if its else 0} | {n} |")
    lines += ["", "## STRIDE", "", "| letter | threat | tested | findings |", "|---|---|---|---|"]
    for letter, title in STRIDE.items():
        n = sum(1 for f in findings if f["stride"] == letter)
        lines.append(f"| {letter} | {title} | {'yes' if letter in tried.stride else 'no'} | {n} |")
    return "\n".join(lines) + "\n"


def recommendations_md(findings: list[dict[str, Any]]) -> str:
    lines = ["# Recommendations", "", "Most severe first; each names the findings it answers.", ""]
    groups: dict[str, list[str]] = {}
    for f in sorted(findings, key=lambda f: rank(f["severity"])):
        groups.setdefault(f["mitigation"], []).append(f"{f['id']} ({f['severity']})")
    if not groups:
        lines.append("(nothing to recommend: no findings)")
    for mitigation, ids in groups.items():
        lines.append(f"- {mitigation} — {', '.join(ids)}")
    return "\n".join(lines) + "\n"

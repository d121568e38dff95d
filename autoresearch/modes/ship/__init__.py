"""Ship: a readiness checklist made of commands, and the shipping commands written, not run.

`ship.type` (pr | release | package) picks the default gates (gates.py); `ship.add` and
`ship.drop` change them, `ship.manual` lists what a person must decide. Setup runs every gate;
each iteration (`ship_prepare`, under ship/NNN/) works the most important failing gate.
Score = passing gates / gates code can check. The report writes ship-checklist.md and
ship-log.tsv; `done` writes the exact commands that would ship (push, tag, publish). Only a
separate rule, `ship_execute` (`snakemake sessions/<name>/shipped`), with `approve: manual` and
the file sessions/<name>/approved present, runs them, and as a dry run unless
`ship.dry_run: false`.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autoresearch.engine.loop import Decision, Extra, Judged, absent
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec
from autoresearch.views import journal

from ...errors import SessionError
from ..base import Ended, part
from ..lens import check_ref, is_commit, lens_log
from ..lens.changing import ChangingLens
from ..lens.output import Writer
from . import gates as gating

SPEC_EXAMPLE = """
ship:
  type: pr                 # pr | release | package
  base: main               # what the diff-based gates compare with
  # add: [{name: docs, command: "make docs"}]
  # drop: [todo]
  # manual: [pricing reviewed, legal text approved]
  # dry_run: false         # ship_execute really runs the commands (needs approve: manual)
# approve: manual          # then: touch sessions/<name>/approved; snakemake sessions/<name>/shipped
"""


@dataclass(frozen=True)
class GateStep(Extra):
    """What a ship iteration adds to its decision: the gate it worked, every gate's result
    after it, and what it broke."""

    gate: str | None  # None: no failing gate was left to work
    summary: str
    passing_before: int
    results_after: list[dict[str, Any]]
    broke: list[str]  # gates that passed before and fail after
    tests_pass: None  # ship's gates, not the test gate
    timestamp: str
    broken: bool
    session_stop: str | None
    final: bool
    passing_after: int
    score: float
    blocked: list[str]
    rejected: str | None = absent()  # why the protection refused the change


class ShipViews(ChangingLens.views):
    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        lines = ["## Ship", f"- Type: {self.setup_data(env.layout)['type']}"]
        lines += [f"- Iteration {d['cycle']}: {d['gate']}: {d['status']}, score {d['score']:.2f}"
                  for d in decisions]  # fmt: skip
        return "\n".join(lines)

    def done_detail(self, layout: SessionLayout) -> str:
        return f" ({self.setup_data(layout)['type']})"

    def done_counts(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        results = self.final_results(ended.layout, ended.decisions)
        return [
            f"score: {gating.passing(results)}/{gating.checked(results)} gates pass",
            f"needs a person: {sum(1 for r in results if r.status == gating.PERSON)}",
        ]

    def done_report(self, layout: SessionLayout) -> Path:
        return self.checklist_path(layout)

    def done_tail(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        layout = ended.layout
        return [
            "ship with (not run by the workflow):",
            *[f"    {c}" for c in data["ship_commands"]],
            f"to have the workflow run them: set approve: manual, touch "
            f"{rel(layout.approval_marker)}, then snakemake --cores 1 "
            f"{rel(self.shipped_path(layout))}" + (" (a dry run unless ship.dry_run: false)"),
        ]

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        if not self.setup_path(layout).exists():
            return ["(ship not set up yet)"]
        results = self.final_results(layout)
        return [f"Gates: {gating.passing(results)}/{gating.checked(results)} pass"] + [
            f"  {r.name}: {r.status}" for r in results
        ]


class Ship(ChangingLens):
    name = "ship"
    team = "ship"
    loop = "ship"
    decide_checkpoint = "ship_prepare"
    decision_extra = GateStep
    branch = "autoresearch/ship/{name}"
    default_cycle_cap = 15
    gate_label = "failing gates"
    spec_example = SPEC_EXAMPLE
    ruff_plays = True  # the gates are commands: keyless, each failing gate is left for a person
    views = part(ShipViews)

    # --- the spec and setup --------------------------------------------------------------

    def check_lens_spec(self, values: dict[str, Any], where: str) -> None:
        check_ref(values, "ship.base", self.section(values).get("base"), where)

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        section = self.section(values)
        worktree = layout.worktree()
        base = section.get("base") or default_base(worktree)
        base_commit = git.git(worktree, "rev-parse", f"{base}^{{commit}}")
        checklist = gating.checklist(
            str(section.get("type") or "pr"),
            record.test_command,
            record.linter_command,
            list(section.get("add") or []),
            list(section.get("drop") or []),
            list(section.get("manual") or []),
        )
        ctx = gating.Context(
            worktree, base_commit, values["test_timeout_s"], list(values.get("secrets") or []),
            (record.base_commit, base_commit),
        )  # fmt: skip
        results = gating.run_all(checklist, ctx)
        git.reset_to(worktree, record.base_commit)  # a gate may leave files behind
        log(f"ship: {gating.passing(results)} of {gating.checked(results)} gates pass at setup")
        return {
            "type": str(section.get("type") or "pr"),
            "base": base,
            "base_commit": base_commit,
            "checklist": [asdict(g) for g in checklist],
            "baseline": [r.__dict__ for r in results],
            "run_id": self.new_run_id(layout),
        }

    def checklist(self, layout: SessionLayout) -> list[gating.Gate]:
        return [gating.Gate(**g) for g in self.setup_data(layout)["checklist"]]

    def gate_context(self, env: StageEnv) -> gating.Context:
        setup = self.setup_data(env.layout)
        return gating.Context(
            env.worktree,
            setup["base_commit"],
            env.spec.test_timeout_s,
            env.spec.secrets,
            (env.record.base_commit, setup["base_commit"]),
        )

    def results_path(self, layout: SessionLayout) -> Path:
        return layout.root / "ship-log.tsv"

    @staticmethod
    def checklist_path(layout: SessionLayout) -> Path:
        return layout.root / "ship-checklist.md"

    # --- the loop ------------------------------------------------------------------------

    def brief(self, env, gate, result, decisions) -> dict[str, Any]:
        earlier = [
            f"iteration {d['cycle']}: {d['status']}"
            + (f" (it broke {', '.join(d['broke'])})" if d.get("broke") else "")
            for d in decisions
            if d.get("gate") == gate.name
        ]
        return {
            "heading": f"Make the gate pass: {gate.name}",
            "focus": f"{gate.what}." + (f"\nIts command: `{gate.command}`" if gate.command else ""),
            "context": [
                ("What the gate reports now", result.detail.splitlines()[-30:]),
                ("Earlier attempts on this gate", earlier),
            ],
            "closing": f"Fix it, then call finish_fix with id {gate.name} (or skip_finding if "
            "a person must decide), then end your turn. Never push, tag or publish.",
            "data": {"gate": gate.name, "command": gate.command, "what": gate.what},
        }

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        results = [gating.Result(**r) for r in decision["results_after"]]
        if not any(r.status == gating.FAIL for r in results):
            return "every gate passes"
        if not any(r.status == gating.FAIL and r.name not in decision["blocked"] for r in results):
            return "every failing gate is blocked or needs a person"
        return None

    def cap_reason(self, spec: SessionSpec, cap: int) -> str:
        return f"cap of {cap} iterations reached"

    def report_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        baseline = [gating.Result(**r) for r in self.setup_data(layout)["baseline"]]
        if not any(r.status == gating.FAIL for r in baseline):
            return [rel(self.setup_path(layout))]  # ready already: nothing to prepare
        return [self.final_decision(layout, checkpoints)]

    def log_line(self, env: StageEnv, decision: Decision) -> str:
        return (
            f"ship {env.cycle}: {decision['gate']}: {decision['status']} "
            f"({decision['passing_before']} → {decision['passing_after']} passing)"
            + (f"; stopping: {decision['reason']}" if decision["stop"] else "")
        )

    def judge(self, env: StageEnv, output: Any) -> Judged:
        """One failing gate: the agent's change, every gate again, keep or reset."""
        from . import stages

        rec = stages.prepare(env, self, Path(output.record))
        usage = env.stage_record("prepare")["usage"]
        return Judged(rec, lambda r: self.log_iteration(env, r, usage))

    def log_iteration(self, env: StageEnv, rec: dict[str, Any], usage: dict[str, Any]) -> None:
        setup = self.setup_data(env.layout)
        row = lens_log.LogRow(
            run_id=setup["run_id"],
            iteration=env.cycle,
            category=rec["gate"] or "none",
            new=max(0, rec["passing_after"] - rec["passing_before"]),
            status=rec["status"],
            description=f"passing {rec['passing_before']} → {rec['passing_after']}; "
            f"score {rec['score']:.2f}; {rec['summary']}",
            timestamp=rec["timestamp"],
        )
        self.record_iteration(env, row, usage, row.description)

    # --- the report and done -------------------------------------------------------------

    def final_results(
        self, layout: SessionLayout, decisions: list[dict[str, Any]] | None = None
    ) -> list[gating.Result]:
        decisions = journal.load_decisions(layout) if decisions is None else decisions
        data = decisions[-1]["results_after"] if decisions else self.setup_data(layout)["baseline"]
        return [gating.Result(**r) for r in data]

    def ship_commands(self, env: StageEnv) -> list[str]:
        """The exact commands that would ship this session's branch (never run by the
        workflow itself)."""
        section = self.section(env.spec)
        if section.get("commands"):
            return [str(c) for c in section["commands"]]
        setup = self.setup_data(env.layout)
        branch, commit = env.record.branch, self.end_commit(env)
        if setup["type"] == "pr":
            return [
                f"git push origin {shlex.quote(branch)}",
                f"gh pr create --base {shlex.quote(setup['base'])} --head "
                f"{shlex.quote(branch)} --fill",
            ]
        env.begin(commit)
        version = gating.version_of(env.worktree) or "VERSION"
        if setup["type"] == "release":
            return [
                f"git tag -a v{version} {commit} -m 'v{version}'",
                f"git push origin v{version}",
            ]
        return ["rm -rf dist && python -m build", "python -m twine upload dist/*"]

    def write_report(self, env: StageEnv, findings_out: Path, handoff_out: Path) -> None:
        results = self.final_results(env.layout)
        checklist = {g.name: g for g in self.checklist(env.layout)}
        findings = [
            {
                "id": f"G-{i:03d}",
                "severity": "high",
                "title": f"gate {r.name} fails: {checklist[r.name].what}",
                "file": "",
                "line": None,
                "detail": r.detail.splitlines()[-1] if r.detail else "",
            }
            for i, r in enumerate((r for r in results if r.status == gating.FAIL), 1)
        ]
        writer = self.writer(env.record)
        writer.text(self.checklist_path(env.layout), render_checklist(env, checklist, results))
        writer.text(findings_out, render_findings(findings))
        extra = {
            "stopped": self.stopped(env),
            "score": round(gating.score(results), 4),
            "ship_commands": self.ship_commands(env),
        }
        writer.json(handoff_out, self.handoff(env, findings, extra))

    def idle_reason(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str | None:
        return None if decisions else "every gate passed at setup"

    @staticmethod
    def shipped_path(layout: SessionLayout) -> Path:
        return layout.root / "shipped"

    def execute_inputs(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        """What ship_execute waits for: `done`, and a person's approval file."""
        if spec.get("approve") != "manual":
            raise SessionError(
                f"session {layout.name!r}: the shipping commands run only with approve: manual "
                f"in its spec and {rel(layout.approval_marker)} present; they are in "
                f"{rel(layout.done)}"
            )
        return [rel(layout.done), rel(layout.approval_marker)]

    def open_now(self, layout: SessionLayout) -> int:
        results = self.final_results(layout) if self.setup_path(layout).exists() else []
        return sum(1 for r in results if r.status == gating.FAIL)


def default_base(repo: Path) -> str:
    """main or master when the repository has one, else the root commit."""
    for name in ("main", "master"):
        if is_commit(repo, name):
            return name
    return git.git(repo, "rev-list", "--max-parents=0", "HEAD").splitlines()[0]


def render_checklist(env: StageEnv, checklist: dict, results: list[gating.Result]) -> str:
    mark = {gating.PASS: "[x]", gating.FAIL: "[ ]", gating.PERSON: "[?]"}
    lines = [
        f"# Ship checklist: {env.layout.name}",
        "",
        f"Score: {gating.passing(results)}/{gating.checked(results)} gates pass "
        "(gates a person decides are not scored).",
        "",
    ]
    for r in results:
        gate = checklist[r.name]
        how = f" — `{gate.command}`" if gate.command else ""
        lines.append(f"- {mark[r.status]} **{r.name}** ({r.status}): {gate.what}{how}")
        if r.status == gating.FAIL and r.detail:
            lines += [f"    {line}" for line in r.detail.strip().splitlines()[-5:]]
    return "\n".join(lines) + "\n"


def render_findings(findings: list[dict[str, Any]]) -> str:
    lines = ["# Failing gates", ""]
    lines += [f"- [{f['id']}] {f['title']}" for f in findings] or ["None."]
    return "\n".join(lines) + "\n"

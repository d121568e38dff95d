"""The lens base: what every lens (security, debug, scenario, predict, and the repair lenses)
shares — the spec checks, the masked writer, the setup record, `handoff.json`, the `fail_on`
gate recorded in `done`, chaining into the next lens, and what `status` shows.

A lens is a `Mode`. Loop lenses (one focus per iteration, findings checked by code after each)
build on `loop.LoopLens`; predict has its own jobs. docs/lenses.md describes each lens.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from autoresearch.engine import chain
from autoresearch.engine.loop import Status
from autoresearch.engine.stage import StageEnv
from autoresearch.safety import git
from autoresearch.safety.words import a_or_an
from autoresearch.session.changesets import ChangeNote
from autoresearch.session.files import locked, read_json, write_text
from autoresearch.session.layout import SESSIONS, SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec, resolve_target
from autoresearch.views import journal

from ...checks.finding_schema import gate
from ...errors import SessionError, SpecError
from ..base import Ended, Mode, Progress, part
from . import lens_log
from .masking import redact
from .output import Writer

DEFAULT_FAIL_ON = "high"
DEFAULT_SATURATION = 3


class LensSetup(Mode.setup):
    # `autoresearch redo` does not know the lenses' stages yet: it refuses them by name.
    loop_stages: tuple[str, ...] = ()

    def plays_with_ruff(self, values: dict[str, Any]) -> bool:
        """Whether the model-free ruff backend can play this lens for this spec."""
        return self.ruff_plays

    def check_spec(self, values: dict[str, Any], name: str) -> None:
        where = f"config/sessions/{name}.yaml"
        ruff = values["agent"]["backend"] == "ruff"
        if ruff and not self.plays_with_ruff(values):
            raise SpecError(
                f"{where}: key 'agent.backend': the {self.name} lens needs a model and the ruff "
                "backend cannot play it; set agent.backend: claude (or script, to replay a "
                "rehearsal)"
            )
        from .. import MODES, get  # the registry imports this module: look it up at call time

        for lens in chain.chain_of(values):
            if lens not in MODES:
                raise SpecError(
                    f"{where}: key 'chain': unknown lens {lens!r}; expected one of "
                    f"{', '.join(sorted(MODES))}"
                )
            # A chained lens inherits this backend: refuse now, not after this lens has run.
            if ruff and not get(lens).setup.plays_with_ruff(values):
                raise SpecError(
                    f"{where}: key 'chain': the {lens} lens needs a model and the ruff backend "
                    "cannot play it; set agent.backend: claude (or script)"
                )
        self.check_lens_spec(values, where)

    def on_setup(
        self, layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log
    ) -> None:
        """Mask what setup copied from the target, then the lens's own setup (lens-setup.json)."""
        writer = self.writer(record)
        writer.root = layout.root
        record.conventions = writer.line(record.conventions)
        data = self.recon(layout, record, values, log, writer) or {}
        handoff = values.get("handoff")
        if handoff:
            data["handoff"] = chain.inherited(Path(handoff))
        writer.json(self.setup_path(layout), data)


class LensViews(Mode.views):
    lists_cycles = False  # the lens's own section summarises its iterations

    def show(
        self,
        layout: SessionLayout,
        spec: SessionSpec,
        iteration: int,
        candidate: str | None,
        track: str = "",
    ) -> str:
        raise SessionError(
            f"session {layout.name!r} is {a_or_an(self.name)} session: `autoresearch show` "
            "prints the cycles of sweep, narrow and broad sessions and the experiments of "
            f"experiment sessions; read its {self.loop}/NNN/ files instead"
        )

    def change_notes(
        self, layout: SessionLayout, track: str, spec: SessionSpec
    ) -> dict[str, ChangeNote]:
        """A lens that commits keeps one commit per kept step: the step's own lines."""
        return {
            d["end_commit"]: ChangeNote(self.change_title(d), tuple(self.change_lines(d)))
            for d in journal.load_decisions(layout, track)
            if d.get("status") == Status.KEPT and d.get("end_commit") != d.get("start_commit")
        }

    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        """The report and handoff.json, and the next lens of the chain's `done`."""
        inputs = [rel(self.findings_path(layout)), rel(self.handoff_path(layout))]
        nxt = chain.link_of(layout.name, _frozen(layout), layout.root.parent).next
        if nxt:
            inputs.append(rel(layout.root.parent / nxt / "done"))
        return inputs

    def end_files(self, layout: SessionLayout, track: str = "") -> list[Path]:
        """The report and handoff.json are made once the lens has looked."""
        made = [self.findings_path(layout), self.handoff_path(layout)]
        return [*made, *super().end_files(layout, track)]

    def cycle_page(self, spec: SessionSpec, decision: dict[str, Any]) -> None:
        return None  # a lens lists no stage files: its step pages are its stages' own

    def render_done(self, ended: Ended) -> str:
        """`done` from the lens's records: handoff.json (why it stopped, its findings, its
        gate) and the loop's decisions. A lens adds only its own lines: `done_counts`
        after why it stopped, `done_tail` after its report (`done_report`)."""
        layout = ended.layout
        data = read_json(self.handoff_path(layout)) or {}
        lines = [
            f"session: {layout.name}",
            f"mode: {self.name}{self.done_detail(layout)}",
            f"stopped: {data.get('stopped') or 'finished'}",
            *self.done_counts(ended, data),
            f"{self.gate_label}: {len(data.get('findings') or [])}",
            f"fail_on: {data.get('fail_on', self.fail_on(ended.spec))}",
            f"gate: {data.get('gate', 'PASSED')}",
            f"report: {rel(self.done_report(layout))}",
            *self.done_tail(ended, data),
        ]
        return redact("\n".join(lines) + "\n", (ended.record.base_commit,))[0]

    def write_done(self, env: StageEnv, out: Path) -> None:
        ended = Ended(env.layout, env.record, env.spec, journal.load_decisions(env.layout))
        self.writer(env.record).text(out, self.render_done(ended))

    def done_detail(self, layout: SessionLayout) -> str:
        """What follows the mode's name on `done`'s mode line (ship: the release type)."""
        return ""

    def done_counts(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        """The lens's counts, before its gate (`data`: handoff.json). Default: none."""
        return []

    def done_report(self, layout: SessionLayout) -> Path:
        return self.findings_path(layout)

    def done_tail(self, ended: Ended, data: dict[str, Any]) -> list[str]:
        """The lines after the report: the handoff, the lens chain and the target."""
        layout = ended.layout
        link = chain.link_of(layout.name, dict(ended.spec), layout.root.parent)
        lines = [f"handoff: {rel(self.handoff_path(layout))}"]
        if link.next:
            lines.append(f"next lens: sessions/{link.next}")
        if link.parent:
            lines.append(f"chained from: sessions/{link.parent}")
        return lines + self.done_lines(ended)

    def kept_count(self, layout: SessionLayout) -> int | str:
        return 0  # a lens changes nothing

    def progress(self, layout: SessionLayout) -> Progress:
        data = read_json(self.handoff_path(layout)) or {}
        cycles = len(layout.completed_cycles())
        return Progress(
            started=bool(cycles),
            cycles=cycles,
            commits=0,
            fixes=0,
            tests="n/a",
            open_issues=len(data.get("findings") or []),
        )

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        data = read_json(self.handoff_path(layout))
        if not data:
            return [f"Gate: not decided yet (fail_on: {self.fail_on(spec)})"]
        return [f"Gate: {data['gate']} (fail_on: {data['fail_on']})"]


class Lens(Mode):
    name = "lens"
    team = ""  # the agent team that does the lens's work
    loop = "lens"  # sessions/<name>/lens/NNN/
    branch = "autoresearch/lens/{name}"
    ruff_plays = False  # whether the model-free ruff backend can play this lens
    gate_label = "findings"  # what the gate counts, for `done`
    setup = part(LensSetup)
    views = part(LensViews)

    # --- autoresearch finalize ---------------------------------------------------------------

    def change_title(self, decision: dict[str, Any]) -> str:
        return str(decision.get("summary") or decision.get("why") or f"step {decision['cycle']}")

    def change_lines(self, decision: dict[str, Any]) -> list[str]:
        return [f"Step {decision['cycle']}: {self.change_title(decision)}"]

    # --- paths ---------------------------------------------------------------------------

    def setup_path(self, layout: SessionLayout) -> Path:
        """What the lens's setup found (recon, leads, decomposition): lens-setup.json."""
        return layout.root / "lens-setup.json"

    def results_path(self, layout: SessionLayout) -> Path:
        """The iteration log, `<lens>-results.tsv`."""
        return layout.root / f"{self.name}-results.tsv"

    @staticmethod
    def findings_path(layout: SessionLayout) -> Path:
        return layout.root / "findings.md"

    def read_log(self, layout: SessionLayout) -> list[lens_log.LogRow]:
        path = self.results_path(layout)
        return lens_log.parse(path.read_text()) if path.exists() else []

    def new_run_id(self, layout: SessionLayout) -> str:
        """An id for a new run, unused in the lens's log."""
        existing = {r.run_id for r in self.read_log(layout)}
        return lens_log.new_run_id(layout.name, dt.datetime.now(dt.UTC), existing)

    def record_iteration(
        self,
        env: StageEnv,
        row: lens_log.LogRow,
        usage: dict[str, Any],
        summary: str,
        tests_pass: Any = "",
        files_changed: Any = "",
    ) -> list[lens_log.LogRow]:
        """The iteration's row in the lens's own log and in results.tsv, both shared by the
        session's jobs; returns the log's rows."""
        log = self.results_path(env.layout)
        with locked(env.layout.journal_lock):
            rows = lens_log.merge(self.read_log(env.layout), [row])
            write_text(log, lens_log.render(rows))
        journal.upsert_results(
            env.layout,
            "",
            f"{env.cycle:03d}",
            [
                {
                    "team": self.team,
                    "status": row.status,
                    "tests_pass": tests_pass,
                    "description": self.writer(env.record).line(summary),
                    "files_changed": files_changed,
                    "timestamp": row.timestamp,
                    "tokens": sum(v for k, v in usage.items() if k.endswith("tokens")),
                    "cost_usd": usage.get("cost_usd", 0),
                }
            ],
        )
        return rows

    @staticmethod
    def handoff_path(layout: SessionLayout) -> Path:
        return layout.root / "handoff.json"

    # --- the spec ------------------------------------------------------------------------

    def check_lens_spec(self, values: dict[str, Any], where: str) -> None:
        """The lens's own keys (raise SpecError naming `where` and the key)."""

    @staticmethod
    def fail_on(spec: dict[str, Any]) -> str:
        return spec.get("fail_on") or DEFAULT_FAIL_ON

    @staticmethod
    def window(spec: dict[str, Any]) -> int:
        return int(spec.get("saturation") or DEFAULT_SATURATION)

    def section(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The lens's own spec section (`security:`, `debug:`, ...)."""
        return dict(spec.get(self.name) or {})

    # --- setup ---------------------------------------------------------------------------

    def writer(self, record: SetupRecord) -> Writer:
        """The masked writer for this session: its commit ids are never masked."""
        return Writer(keep=(record.base_commit,))

    def decision_writer(self, env: StageEnv) -> Writer:
        return self.writer(env.record)  # a lens's decision is masked as its other files

    def recon(
        self,
        layout: SessionLayout,
        record: SetupRecord,
        values: dict[str, Any],
        log,
        writer: Writer,
    ) -> dict[str, Any]:
        """The lens's setup work; returns what lens-setup.json holds."""
        return {}

    def setup_data(self, layout: SessionLayout) -> dict[str, Any]:
        return read_json(self.setup_path(layout)) or {}

    # --- the end -------------------------------------------------------------------------

    def report_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        """What the report waits for: the loop's final decision (predict: its last round)."""
        return [self.final_decision(layout, checkpoints)]

    def write_report(self, env: StageEnv, findings_out: Path, handoff_out: Path) -> None:
        raise NotImplementedError

    def gate_severities(self, findings: list[dict[str, Any]]) -> list[str]:
        """The severities the `fail_on` gate weighs (debug: confirmed bugs only)."""
        return [str(f.get("severity", "")) for f in findings]

    def handoff(
        self, env: StageEnv, findings: list[dict[str, Any]], extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """handoff.json: what a chained lens (or a person) takes on from this one."""
        fail_on = self.fail_on(env.spec)
        return {
            "lens": self.name,
            "session": env.layout.name,
            "target": env.record.target,
            "commit": env.record.base_commit,
            "branch": env.record.branch,
            "fail_on": fail_on,
            "gate": gate(self.gate_severities(findings), fail_on),
            "files": sorted({str(f["file"]) for f in findings if f.get("file")}),
            "findings": findings,
            **(extra or {}),
        }

    def done_lines(self, ended: Ended) -> list[str]:
        """The lens's own lines of `done` (security with `fix: true`: the fixes kept)."""
        return [f"target unchanged: {ended.record.target} (branch {ended.record.branch})"]

    def stopped(self, env: StageEnv) -> str | None:
        """Why the lens's work ended, for `done` and `status`."""
        return None


def is_commit(repo: Path, ref: str) -> bool:
    return bool(git.git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False))


def check_ref(values: dict[str, Any], key: str, ref: str | None, where: str) -> None:
    """The spec's `key` (`ref`) names a commit of the target, when the target is a repo."""
    target = resolve_target(str(values["target"]))
    if ref and git.is_repo(target) and not is_commit(target, ref):
        raise SpecError(f"{where}: key '{key}': {ref!r} is not a commit of {target}")


def check_ended(key: str, session: str | None, where: str) -> None:
    """The session the spec's `key` names has run to its end (it has a handoff.json)."""
    if session and not (Path(SESSIONS) / session / "handoff.json").is_file():
        raise SpecError(
            f"{where}: key '{key}': session {session!r} has no handoff.json (run it to its "
            "end first)"
        )


def _frozen(layout: SessionLayout) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(layout.spec.read_text()) if layout.spec.exists() else {}

"""Broad: divergent hypotheses, one independent track each, then a winner.

Flow, as rules/broad.smk wires it: session → broad_strategist (hypotheses.md) →
broad_approve (hypotheses.json; waits for sessions/<name>/approved with `approve: manual`)
→ per hypothesis: broad_track (branch and worktree from the base commit) → the cycle rules
under cycles/<hid>/NNN/ → broad_track_end (tracks/<hid>/result.json) → broad_comparison
(comparison.md) → done.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from autoresearch.agents.backends import BACKEND_TEAMS
from autoresearch.engine import tally
from autoresearch.engine.loop import Decision
from autoresearch.engine.stage import StageEnv
from autoresearch.safety.words import count
from autoresearch.session.changesets import ReviewLoop
from autoresearch.session.files import read_json, write_text
from autoresearch.session.finalize import run_commands
from autoresearch.session.layout import SessionLayout, rel
from autoresearch.session.record import SetupRecord
from autoresearch.session.spec import SessionSpec

from ...errors import SpecError
from ..base import Ended, Mode, Progress, part
from .aspiration import measure_base, metric_of
from .comparison import UNRANKED
from .hypotheses import HypothesisError, from_spec, validate
from .judges import panel_of
from .step import TrackStep
from .tracks import hypothesis_table, track_decisions, track_ids

# The file a person creates in a running track's folder to end it after its current cycle.
MOVE_ON = "move-on"


# What `autoresearch new --mode broad` writes into the spec, to edit.
SPEC_EXAMPLE = """
aspiration: Make this project dramatically easier to use.
approve: auto                              # manual: stop after hypotheses.md for review
"""


class BroadSetup(Mode.setup):
    has_worktree = False

    def check_spec(self, values: dict[str, Any], name: str) -> None:
        """Nothing written yet: the spec must say what the tracks are about."""
        where = f"config/sessions/{name}.yaml"
        metric_of(values, name)
        panel_of(values, name)
        given = values.get("hypotheses")
        aspiration = (values.get("aspiration") or "").strip()
        if not given and not aspiration:
            raise SpecError(
                f"{where}: broad mode needs key 'aspiration' (one sentence: what you want more "
                "of, or what should change) or key 'hypotheses' (3 to 5 of {id, category, name, "
                "statement})"
            )
        if given:
            try:
                validate(from_spec(list(given)))
            except HypothesisError as err:
                raise SpecError(f"{where}: key 'hypotheses': {err}") from None
            return
        backend = values["agent"]["backend"]
        if "strategist" not in BACKEND_TEAMS[backend]:  # ruff is mechanical: it has no ideas
            raise SpecError(
                f"{where}: agent.backend {backend!r} cannot propose hypotheses; list them under "
                "key 'hypotheses', or set key 'agent.backend' to claude"
            )

    def on_setup(
        self, layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log
    ) -> None:
        """With an aspiration metric: the base measured, the measurement protected.
        Without a metric or a judge panel: the warning that fixes kept will rank."""
        measure_base(layout, record, values, log)
        if not values.get("aspiration_metric") and not values.get("aspiration_judge"):
            log(f"warning: {UNRANKED}")
            record.warnings.append(UNRANKED)

    def teams_needed(self, values: dict[str, Any]) -> set[str]:
        """Without given hypotheses, the strategist proposes them."""
        teams = super().teams_needed(values)
        teams |= {"judge"} if values.get("aspiration_judge") else set()
        return teams if values.get("hypotheses") else teams | {"strategist"}


class BroadViews(Mode.views):
    sections_read_decisions = True

    def summary_decisions(
        self, env: StageEnv, pending: dict[str, Any] | None = None
    ) -> list[Decision]:
        """Every track's cycles, with the pending decision in its place (held to its
        record here, before it is written)."""
        decisions: list[Decision] = []
        for hid in track_ids(env.layout):
            own = track_decisions(env.layout, hid)
            if pending is not None and hid == env.track:
                made = Decision.from_json(pending, env.layout.decision(env.cycle, hid), TrackStep)
                own = [d for d in own if d.cycle < made.cycle] + [made]
            decisions += own
        return decisions

    def summary_sections(self, env: StageEnv, decisions: list[dict[str, Any]]) -> str:
        aspiration = (env.spec.get("aspiration") or "").strip() or "(none given)"
        lines = ["## Aspiration (broad only)", aspiration, "", "## Hypotheses (broad only)"]
        lines += hypothesis_table(env.layout, decisions)  # type: ignore[arg-type]
        return "\n".join(lines) + "\n"

    def done_inputs(self, layout: SessionLayout, checkpoints: Any) -> list[str]:
        return [rel(layout.comparison_md)]

    def end_files(self, layout: SessionLayout, track: str = "") -> list[Path]:
        """A redone track ends again, and the comparison ranks the tracks again."""
        bench = layout.root / "benchmarks"
        ended = [layout.track_result(track), layout.logs / "track-end" / f"{track}.log"]
        ended.append(bench / "track-end" / f"{track}.tsv")
        compared = [layout.comparison_md, layout.comparison_json, layout.logs / "comparison.log"]
        compared.append(bench / "comparison.tsv")
        return [*(ended if track else []), *compared, *super().end_files(layout, track)]

    def render_done(self, ended: Ended) -> str | None:
        layout = ended.layout
        data = json.loads(layout.comparison_json.read_text())
        lines = [
            f"session: {layout.name}",
            "mode: broad",
            f"stopped: all {len(data['tracks'])} tracks ended; comparison.md picks the winner",
            f"tracks: {len(data['tracks'])}",
        ]
        for hid in data["ranking"]:
            r = data["tracks"][hid]
            lines.append(
                f"  {hid} [{r['category']}] {r['name']}: {r['status']}, {r['cycles']} cycles, "
                f"{r['fixes_kept']} fixes kept, tests {'pass' if r['tests_pass'] else 'FAIL'}, "
                f"branch {r['branch']}"
            )
        winner = data["winner"]
        lines.append(f"winner: {winner['id']} ({winner['branch']})" if winner else "winner: none")
        if data.get("runner_up"):
            lines.append(f"runner-up: {data['runner_up']}")
        if data.get("merge_command"):
            lines.append(f"merge with: {data['merge_command']}")
        lines.append(f"details: {rel(layout.comparison_md)}")
        return "\n".join(lines) + "\n"

    def write_done(self, env: StageEnv, out: Path) -> None:
        self.write_summary(env)
        write_text(out, self.render_done(Ended(env.layout, env.record, env.spec, [])) or "")
        winner = json.loads(env.layout.comparison_json.read_text())["winner"]
        env.log(json.dumps({"done": env.layout.name, "winner": winner["id"] if winner else None}))

    def review_loops(
        self, layout: SessionLayout, record: SetupRecord, spec: SessionSpec
    ) -> list[ReviewLoop]:
        """Every track that started: its own branch from the base, its hypothesis."""
        loops = []
        for hid in self.tracks(layout):
            meta = read_json(layout.track_meta(hid))
            if meta is None:
                continue
            h = meta["hypothesis"]
            context = (f"Track {hid}'s hypothesis [{h['category']}] {h['name']}: {h['statement']}",)
            loops.append(ReviewLoop(hid, meta["branch"], meta["base_commit"], context))
        return loops

    def after_review(self, session: Any, sets: list, do_push: bool, remote: str, log) -> None:
        """The winner plus the other tracks' wins that apply and keep the tests (merged.py)."""
        from . import merged as merging

        made = merging.build(session, sets, log)
        if made is None:
            return
        log(f"\nmerged: {session.folder / merging.FILE}")
        if not made.branch:
            log("   no other track's change was added: the winner's branch is the merge")
            return
        log(
            f"   {made.branch}: {made.winner} plus set(s) "
            + ", ".join(str(t.number) for t in made.added)
        )
        argvs = merging.commands(session, made, remote)
        if do_push:
            run_commands(session, made.branch, argvs, log)
        else:
            for argv in argvs:
                log("   " + shlex.join(argv))

    def kept_count(self, layout: SessionLayout) -> int | str:
        """Per track (`h1 3, h2 5`): the tracks compete, so their fixes are never added up."""
        ids = track_ids(layout)
        return ", ".join(f"{hid} {tally.read(layout, hid).fixed}" for hid in ids) or "-"

    def progress(self, layout: SessionLayout) -> Progress:
        """Per track: the tracks compete, so their figures are never added together."""
        # Each track's cycles as broad's records (track_decisions reads them into TrackStep).
        per: dict[str, list[TrackStep]] = {
            hid: [d.extra for d in track_decisions(layout, hid)]  # type: ignore[misc]
            for hid in track_ids(layout)
        }

        def each(figure) -> str:
            return ", ".join(f"{hid} {figure(steps)}" for hid, steps in per.items()) or "-"

        return Progress(
            started=any(per.values()),
            cycles=each(len),
            commits=each(lambda steps: steps[-1].commits_total if steps else 0),
            fixes=each(lambda steps: sum(len(d.fixed) for d in steps)),
            tests=each(
                lambda steps: ("pass" if steps[-1].tests_pass else "FAIL") if steps else "n/a"
            ),
            open_issues=each(lambda steps: len(steps[-1].open_issues) if steps else 0),
        )

    def status_lines(self, layout: SessionLayout, spec: SessionSpec) -> list[str]:
        lines = ["hypotheses:"] + [f"  {line}" for line in hypothesis_table(layout)]
        if spec.get("approve") == "manual" and not layout.approved.exists():
            if layout.hypotheses_md.exists() and not layout.approval_marker.exists():
                lines.append(
                    f"waiting for approval: edit {rel(layout.hypotheses_md)}, then create "
                    f"{rel(layout.approval_marker)} and run again"
                )
        comparison = read_json(layout.comparison_json)
        if comparison:
            winner = comparison.get("winner")
            lines.append(
                f"winner: {winner['id']} ({winner['branch']})" if winner else "winner: none"
            )
        return lines


class Broad(Mode):
    name = "broad"
    tamper_profile = "measure"  # the aspiration metric imports the code under test
    decide_checkpoint = "broad_evaluate"  # a track's cycle (wildcard hid)
    decision_extra = TrackStep
    spec_example = SPEC_EXAMPLE
    branch = "see tracks"  # each track has its own: autoresearch/broad/<name>/<hid>
    default_cycle_cap = 5  # per track
    setup = part(BroadSetup)
    views = part(BroadViews)

    def tracks(self, layout: SessionLayout) -> list[str]:
        return track_ids(layout)

    def red_scope(self, env: StageEnv) -> dict[str, Any] | None:
        """Red sees this track's hypothesis and the aspiration, nothing of other tracks."""
        meta = read_json(env.layout.track_meta(env.track)) if env.track else None
        if not meta:
            return None
        return {"hypothesis": dict(meta["hypothesis"]), "aspiration": meta.get("aspiration")}

    def cap_reason(self, spec: SessionSpec, cap: int) -> str:
        return f"max_cycles reached ({cap} per track)"

    def loop_stop(self, env: StageEnv, decision: dict[str, Any]) -> str | None:
        if env.track and (env.layout.track_dir(env.track) / MOVE_ON).exists():
            # The person's word (docs/broad.md, "Moving on"): this track ends with this
            # cycle, and the next one starts.
            return f"moved on: sessions/{env.layout.name}/tracks/{env.track}/{MOVE_ON} exists"
        prev = self.previous_step(env)
        if prev is not None and not decision["fixed"] and not prev.extra.fixed:
            return "two consecutive cycles with zero Green commits"
        return None

    def apply_policy(self, env: StageEnv, decision: dict[str, Any]) -> None:
        """The shared stop cascade per track; the track's status goes to the table."""
        super().apply_policy(env, decision)
        aborted = bool(decision["session_stop"] or decision["broken"])
        if decision["stop"]:
            decision["track_status"] = "aborted" if aborted else "complete"
        else:
            decision["track_status"] = "in-progress"
        decision["observations"] = observations(env, decision)


def observations(env: StageEnv, d: dict[str, Any]) -> str:
    meta = read_json(env.layout.track_meta(env.track)) or {}
    hyp = meta.get("hypothesis") or {}
    parts = [
        f"Hypothesis {env.track} [{hyp.get('category', '?')}] {hyp.get('name', '')}: "
        f"Red reported {count(d['findings'], 'finding')}, {count(len(d['fixed']), 'fix')} "
        f"kept, {len(d['skipped'])} skipped, {count(d['refactor_changes'], 'refactor change')}; "
        f"{count(d['commits_total'], 'commit')} on the track so far."
    ]
    if d["reverted"]:
        parts.append(f"{count(len(d['reverted']), 'commit')} reverted because the tests broke.")
    return " ".join(parts)

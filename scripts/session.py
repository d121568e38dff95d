"""rules/session.smk: the setup checkpoint, `done`, and the catch-all for bad names."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from autoresearch import modes
from autoresearch.engine import chain
from autoresearch.engine.jobs import Declared, run_job, run_stage
from autoresearch.errors import SessionError, SpecError
from autoresearch.session import spec
from autoresearch.session import start as session
from autoresearch.session.layout import SESSIONS, rel

from . import report
from .common import layout_of, override_origins

EXAMPLES = Path(SESSIONS) / "_examples"
DESCRIBED: set[str] = set()  # sessions whose parsed spec a dry run has printed


def session_inputs(
    name: str,
    basedir: str,
    overrides: dict[str, Any],
    origins: dict[str, str] | None = None,
    dry_run: bool = False,
) -> dict[str, str]:
    """Check the spec before anything runs: a bad spec fails here and nothing is written.
    A bundled example target is made first, by its own rule."""
    layout = layout_of(name)
    if layout.spec.exists():
        return {}
    inputs = {}
    handoff = chain.handoff_path(name)
    if handoff is not None:
        # A chained lens starts from its parent's handoff.json (docs/lenses.md).
        inputs["handoff"] = rel(handoff)
        if not handoff.exists():
            return inputs
        overrides = with_chain(name, overrides)
    raw = Path(basedir) / "config" / "sessions" / f"{name}.yaml"
    target = overrides.get("target")
    if target is None and raw.is_file():
        target = spec.read_yaml(raw, "the session spec").get("target")
    if target:
        example = _example_of(spec.resolve_target(str(target)))
        if example and not (EXAMPLES / f"{example}.ready").exists():
            # The example repository is made by a rule; the setup job checks it then.
            return inputs | {"example": str(EXAMPLES / f"{example}.ready")}
    try:
        pre = session.preflight(name, Path(basedir), overrides, origins)
        # Before the first stage, while a wrong model id can still be one line.
        session.check_model(pre.spec.values, pre.spec)
    except SpecError as err:
        raise SessionError(f"session {name!r} cannot start: {err}") from None
    if dry_run:
        lines = modes.get(pre.spec.values["mode"]).setup.describe_spec(pre.spec.values, name)
        if lines and name not in DESCRIBED:  # input functions run more than once
            DESCRIBED.add(name)
            print("\n".join(lines), file=sys.stderr, flush=True)
    return inputs


def with_chain(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """A chained lens's spec is derived from its root's, on top of --config."""
    values = chain.child_values(name)
    return {**overrides, **values} if values else overrides


def _example_of(target: Path) -> str | None:
    try:
        rel = target.resolve().relative_to(EXAMPLES.resolve())
    except ValueError:
        return None
    return rel.parts[0] if rel.parts else None


def done_inputs(
    name: str,
    checkpoints: Any,
    overrides: dict[str, Any],
    read_spec: spec.SpecReader = spec.load_frozen,
) -> list[str]:
    """What ends the session, as its mode says, and its report; the session must be
    resumable first."""
    checkpoints.session.get(name=name)
    layout = layout_of(name)
    frozen = read_spec(layout.spec)
    mode = modes.get(frozen.mode)
    session.check_resumable(layout, overrides, frozen)
    return mode.views.done_inputs(mode.layout(layout.root), checkpoints) + report.outputs(layout)


def invalid_session_name(name: str) -> list[str]:
    """Reached only for names the other rules refuse: explain instead of 'no rule'."""
    spec.check_session_name(name)
    raise SessionError(f"no session rule matches {name!r}")


# --- jobs ----------------------------------------------------------------------------


def setup(wildcards: Any, input: Any, output: Any, log: Any, workflow: Any, config: Any) -> None:
    """The `session` checkpoint: Snakemake's `config` (the spec files and `--config`)
    made a session, each key's origin said in any error."""
    run_job(
        log[0],
        lambda: session.start(
            wildcards.name,
            Path(output.spec).parent.absolute(),
            with_chain(wildcards.name, dict(config)),
            log[0],
            root=Path(workflow.basedir),
            origins=override_origins(workflow),
        ),
        Declared.of(input, output, log),
    )


def done(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    run_stage(
        wildcards, input, output, log, lambda env, mode: mode.views.write_done(env, Path(output[0]))
    )

"""rules/session.smk: the setup checkpoint, `done`, and the catch-all for bad names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch import modes, session, spec
from autoresearch.errors import SessionError, SpecError
from autoresearch.jobs import run_job, run_stage
from autoresearch.layout import SESSIONS

from . import report
from .common import layout_of

EXAMPLES = Path(SESSIONS) / "_examples"


def session_inputs(name: str, basedir: str, overrides: dict[str, Any]) -> dict[str, str]:
    """Check the spec before anything runs: a bad spec fails here and nothing is written.
    A bundled example target is made first, by its own rule."""
    layout = layout_of(name)
    if layout.spec.exists():
        return {}
    raw = Path(basedir) / "config" / "sessions" / f"{name}.yaml"
    target = overrides.get("target")
    if target is None and raw.is_file():
        target = spec.read_yaml(raw, "the session spec").get("target")
    if target:
        example = _example_of(spec.resolve_target(str(target)))
        if example and not (EXAMPLES / f"{example}.ready").exists():
            # The example repository is made by a rule; the setup job checks it then.
            return {"example": str(EXAMPLES / f"{example}.ready")}
    try:
        session.preflight(name, Path(basedir), overrides)
    except SpecError as err:
        raise SessionError(f"session {name!r} cannot start: {err}") from None
    return {}


def _example_of(target: Path) -> str | None:
    try:
        rel = target.resolve().relative_to(EXAMPLES.resolve())
    except ValueError:
        return None
    return rel.parts[0] if rel.parts else None


def done_inputs(name: str, checkpoints: Any, overrides: dict[str, Any]) -> list[str]:
    """What ends the session, as its mode says, and its report; the session must be
    resumable first."""
    checkpoints.session.get(name=name)
    layout = layout_of(name)
    mode = modes.get(spec.load_frozen(layout.spec).mode)
    session.check_resumable(layout, overrides)
    return mode.done_inputs(mode.layout(layout.root), checkpoints) + report.outputs(layout)


def invalid_session_name(name: str) -> list[str]:
    """Reached only for names the other rules refuse: explain instead of 'no rule'."""
    spec.check_session_name(name)
    raise SessionError(f"no session rule matches {name!r}")


# --- jobs ----------------------------------------------------------------------------


def setup(wildcards: Any, output: Any, params: Any, log: Any, basedir: str) -> None:
    run_job(
        log[0],
        lambda: session.start(
            wildcards.name,
            Path(output.spec).parent.absolute(),
            dict(params.overrides),
            log[0],
            root=Path(basedir),
        ),
    )


def done(wildcards: Any, output: Any, log: Any) -> None:
    run_stage(wildcards, log, lambda env, mode: mode.write_done(env, Path(output[0])))

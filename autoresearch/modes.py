"""What differs between modes, and the only place the engine asks about it.

One engine serves every mode (DESIGN §2): the same git, agent, metric and ledger
code. A mode module (narrow, broad, experiment) may define any of the hooks below;
the sweep mode defines none. Mode modules are imported lazily.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .layout import SessionLayout
    from .session import SetupRecord
    from .stage import StageEnv

MODE_MODULES = {"narrow": "narrow", "broad": "broad", "experiment": "experiment"}


def module_for(mode: str) -> ModuleType | None:
    name = MODE_MODULES.get(mode)
    return importlib.import_module(f"autoresearch.{name}") if name else None


def _hook(mode: str, hook: str):
    module = module_for(mode)
    return getattr(module, hook, None) if module else None


def check_spec(values: dict[str, Any], name: str) -> None:
    """Preflight: raise spec.SpecError naming the key when the mode's spec is incomplete."""
    hook = _hook(values["mode"], "check_spec")
    if hook:
        hook(values, name)


def on_setup(layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log) -> None:
    """Setup: mode files such as baseline.json (runs before the spec is frozen)."""
    hook = _hook(values["mode"], "on_setup")
    if hook:
        hook(layout, record, values, log)


def red_scope(env: StageEnv) -> dict[str, Any] | None:
    """The angle (narrow) or hypothesis (broad) Red is scoped to, if any."""
    hook = _hook(env.spec["mode"], "red_scope")
    return hook(env) if hook else None


def apply_policy(env: StageEnv, decision: dict[str, Any]) -> None:
    """Set decision['stop'] / ['reason'] (and mode extras) after a cycle's tests."""
    hook = _hook(env.spec["mode"], "apply_policy")
    if hook:
        hook(env, decision)
    else:
        from . import stopping

        stopping.sweep_policy(env, decision)


def summary_sections(env: StageEnv) -> str:
    """Mode-specific blocks of session.md (Goal and Angles, Hypotheses)."""
    hook = _hook(env.spec["mode"], "summary_sections")
    return hook(env) if hook else ""


def write_done(env: StageEnv, out: Path) -> bool:
    """Write `done` the mode's way; False when the mode has no own version."""
    hook = _hook(env.spec["mode"], "write_done")
    if hook:
        hook(env, out)
        return True
    return False


def status_lines(layout: SessionLayout, values: dict[str, Any]) -> list[str]:
    """Extra lines for `autoresearch status NAME`."""
    hook = _hook(values["mode"], "status_lines")
    return hook(layout, values) if hook else []

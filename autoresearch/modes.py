"""What differs between modes: Red's scope and the end-of-cycle policy.

One engine serves every mode (DESIGN §2); a mode plugs in here and nowhere else.
Mode modules are imported lazily so the sweep path loads only what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .stage import StageEnv


def red_scope(env: StageEnv) -> dict[str, Any] | None:
    """The angle (narrow) or hypothesis (broad) Red is scoped to, if any."""
    mode = env.spec["mode"]
    if mode == "narrow":
        from . import narrow

        return narrow.red_scope(env)
    if mode == "broad":
        from . import broad

        return broad.red_scope(env)
    return None


def apply_policy(env: StageEnv, decision: dict[str, Any]) -> None:
    """Set decision['stop'] / ['reason'] (and mode extras) after a cycle's tests."""
    mode = env.spec["mode"]
    if mode == "narrow":
        from . import narrow

        narrow.apply_policy(env, decision)
    elif mode == "broad":
        from . import broad

        broad.apply_policy(env, decision)
    else:
        from . import stopping

        stopping.sweep_policy(env, decision)


def summary_sections(env: StageEnv) -> str:
    """Mode-specific blocks of session.md (Goal and Angles, Hypotheses)."""
    mode = env.spec["mode"]
    if mode == "narrow":
        from . import narrow

        return narrow.summary_sections(env)
    if mode == "broad":
        from . import broad

        return broad.summary_sections(env)
    return ""

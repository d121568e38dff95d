"""The modes: one `Mode` subclass each; `get(name)` is the only way to reach one."""

from __future__ import annotations

import difflib
import importlib

from .base import Mode

DEFAULT = "sweep"
# mode name -> "module:Class", imported on first use (a mode's module may be heavy).
MODES = {
    "sweep": "sweep:Sweep",
    "narrow": "narrow:Narrow",
    "broad": "broad:Broad",
    "experiment": "experiment:Experiment",
    "security": "security:Security",
    "debug": "debug:Debug",
    "scenario": "scenario:Scenario",
    "predict": "predict:Predict",
    "fix": "fix:Fix",
    "learn": "learn:Learn",
    "ship": "ship:Ship",
}


def get(name: str) -> Mode:
    try:
        module, cls = MODES[name].split(":")
    except KeyError:
        close = difflib.get_close_matches(str(name), list(MODES), n=1)
        maybe = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"unknown mode {name!r}; {maybe}expected one of {', '.join(MODES)}"
        ) from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)()

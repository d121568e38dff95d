"""A spec refused before anything runs, asked without starting Snakemake.

The setup rule's input function (rules/common.smk: session_inputs) calls
scripts.session.session_inputs with Snakemake's `config` and the origins that
scripts.common.override_origins reads off the workflow. `refusal` calls both the same
way for `snakemake --configfile specs/NAME.yaml [--config ...]` run in `workdir`, and
returns the message the run would print as its one line. Each Snakemake start costs more
than a second of CPU, so the variants of a refusal are asked here; tests/e2e keeps one run
per wiring (the exit code, the one line, nothing written).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from conftest import ROOT

import scripts.common
import scripts.session
from autoresearch.errors import SessionError


def merged(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Snakemake's `config`: the config files, then --config over them, key by key."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def ask(workdir: Path, values: dict[str, Any], config: dict[str, Any] | None = None, name="s"):
    """Run the setup rule's input function for session `name` as Snakemake would."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "specs" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(values))
    settings = SimpleNamespace(configfiles=[path], config=config or {})
    origins = scripts.common.override_origins(SimpleNamespace(config_settings=settings))
    with contextlib.chdir(workdir):
        return scripts.session.session_inputs(
            name, str(ROOT), merged(values, config or {}), origins
        )


def refusal(workdir: Path, values: dict[str, Any], config: dict[str, Any] | None = None, name="s"):
    """The message session `name` is refused with; the session folder is never made."""
    with pytest.raises(SessionError) as caught:
        ask(workdir, values, config, name)
    assert not (workdir / "sessions").exists()
    return str(caught.value)

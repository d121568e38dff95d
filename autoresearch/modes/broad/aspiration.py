"""Broad mode's optional aspiration metric: one number that says how far a track got.

`aspiration_metric:` is a command and a direction, measured on the base at setup and on each
track's tip at its end, in the jail on a pristine tree. The files the command runs are
protected, as narrow's are: a track that could edit the measurement could make any number
(docs/broad.md, "The aspiration metric").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoresearch.engine.stage import jail_for
from autoresearch.measure import measured, metrics
from autoresearch.session.files import read_json, write_json
from autoresearch.session.layout import SessionLayout
from autoresearch.session.record import SetupRecord
from autoresearch.views import journal

from ...errors import SpecError

KEY = "aspiration_metric"
DEFAULTS: dict[str, Any] = {"format": "last_line", "key": None, "repeats": 1, "timeout_s": 300}


@dataclass(frozen=True)
class AspirationMetric(metrics.MetricCommand):
    label: str
    command: str
    direction: str  # minimize | maximize
    format: str = "last_line"
    key: str | None = None
    repeats: int = 1
    timeout_s: float = 300


def metric_of(values: dict[str, Any], name: str = "<name>") -> AspirationMetric | None:
    """The spec's aspiration metric, or None without one. The schema has checked its keys;
    what it cannot say (a blank command, the format's own grammar) is a one-line SpecError
    naming the key."""
    raw = values.get(KEY)
    if raw is None:
        return None
    where = f"config/sessions/{name}.yaml"
    command = raw["command"]
    if not command.strip():
        raise SpecError(
            f"{where}: key '{KEY}.command' is not set: a shell command that prints the value "
            "when run in the target"
        )
    merged = metrics.checked_settings(raw, DEFAULTS, where, KEY)
    return AspirationMetric(
        label=str(raw.get("label") or "").strip() or command.strip(),
        command=command,
        direction=raw["direction"],
        format=merged["format"],
        key=merged["key"],
        repeats=merged["repeats"],
        timeout_s=float(merged["timeout_s"]),
    )


def measure_base(layout: SessionLayout, record: SetupRecord, values: dict[str, Any], log) -> None:
    """Setup: watch what the command runs (protected from then on), measure the base in the
    baseline checkout, write baseline.json. Amends `values['protected']`."""
    metric = metric_of(values, layout.name)
    if metric is None:
        return
    worktree = layout.baseline_worktree.resolve()
    box = jail_for(layout, record.worktrees, values.get("commands"), worktree)
    watch = measured.watch_at_setup(worktree, record, values, f"{KEY}.command", metric, box, log)
    existing = list(values.get("protected") or [])
    values["protected"] = list(dict.fromkeys([*existing, *watch.patterns()]))
    labels = {p: "spec key protected" for p in existing}
    record.measured = watch.to_record(values["protected"], labels)
    values[KEY] = DEFAULTS | {k: v for k, v in values[KEY].items() if v is not None}
    try:
        base = metric.measure(worktree, values.get("secrets"), box)
    except metrics.MetricError as err:
        raise SpecError(
            f"config/sessions/{layout.name}.yaml: key '{KEY}.command': the measurement of the "
            f"base commit failed, so no track can be judged by it.\n{err}"
        ) from None
    baseline = {
        "metric": metric.label,
        "command": metric.command,
        "direction": metric.direction,
        "value": base.value,
        "samples": base.samples,
        "raw": base.raw_shown(),
        "commit": record.base_commit,
        "measured_at": journal.now(),
        "protected": values["protected"],
    }
    write_json(layout.baseline, baseline)
    log(f"aspiration metric {metric.label}: {base.value:g} on the base (samples {base.samples})")
    log(measured.said(watch.protected()))


def measure_tip(env) -> dict[str, Any] | None:
    """A track's end: the metric on its committed tip, in the jail, on a pristine tree.
    `value` is None and `error` says why when the measurement failed."""
    metric = metric_of(env.spec, env.layout.name)
    if metric is None:
        return None
    env.pristine()  # the committed tree alone; protected files as the base has them
    try:
        m = metric.measure(env.worktree, env.spec.secrets, env.jail)
    except metrics.MetricError as err:
        env.log(f"track {env.track}: aspiration metric failed: {err}")
        return {"value": None, "samples": [], "error": _one_line(str(err))}
    env.log(f"track {env.track}: aspiration metric {metric.label} {m.value:g}")
    return {"value": m.value, "samples": m.samples, "error": None}


def ranking_metric(env) -> dict[str, Any] | None:
    """What the comparison ranks by: label, command, direction and the base's value."""
    metric = metric_of(env.spec, env.layout.name)
    if metric is None:
        return None
    base = read_json(env.layout.baseline) or {}
    return {
        "label": metric.label,
        "command": metric.command,
        "direction": metric.direction,
        "base": base.get("value"),
    }


def _one_line(text: str, limit: int = 300) -> str:
    """The error and the output it quotes on one line, for a table cell."""
    line = " / ".join(part.strip() for part in text.splitlines() if part.strip()) or "failed"
    return line if len(line) <= limit else line[:limit] + "..."

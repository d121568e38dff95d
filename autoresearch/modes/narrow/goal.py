"""Narrow mode's goal gate: the goal (metric, command, target) and the ranked angles.

Nothing runs without a complete, measurable goal and an explicit ranking of angles: both
are checked before anything is written, and each error names the key to set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from autoresearch.measure import metrics
from autoresearch.safety.sandbox import check_glob, glob_match

from ...errors import SpecError

GOAL_DEFAULTS: dict[str, Any] = {
    "format": "last_line",
    "key": None,
    "repeats": 1,
    "timeout_s": 300,
    "protect_tests": True,
}


@dataclass(frozen=True)
class Angle:
    name: str
    hypothesis: str
    priority: int
    match: tuple[str, ...] = ()  # regexes on a finding's title; empty: any title
    paths: tuple[str, ...] = ()  # globs on a finding's file; empty: any file

    def covers(self, title: str, location: str) -> bool:
        """Whether a finding lies on this angle: its title and its file within the scope."""
        if self.match and not any(re.search(p, title) for p in self.match):
            return False
        if self.paths:
            path = location.rsplit(":", 1)[0] if ":" in location else location
            return any(glob_match(path.strip(), p) for p in self.paths)
        return True


@dataclass(frozen=True)
class Goal(metrics.MetricCommand):
    metric: str
    command: str
    target: metrics.Target
    target_text: str
    format: str = "last_line"
    key: str | None = None
    repeats: int = 1
    timeout_s: float = 300
    protect_tests: bool = True


# `autoresearch plan` without a target: this much better than the value measured now.
DEFAULT_GAIN = 0.10


def default_target(value: float, direction: str) -> str:
    """A goal target DEFAULT_GAIN better than `value` ('<= 90' for 100, minimizing)."""
    if direction == "minimize":
        if value <= 0:
            raise SpecError(
                f"the metric already reads {value:g} and cannot be minimized further; "
                "choose another metric or give the target yourself"
            )
        return f"<= {value * (1 - DEFAULT_GAIN):.4g}"
    wanted = value + abs(value) * DEFAULT_GAIN if value else 1.0
    return f">= {wanted:.4g}"


def spec_file(name: str) -> str:
    return f"config/sessions/{name}.yaml"


def goal_of(values: dict[str, Any], name: str = "<name>") -> Goal:
    where = spec_file(name)
    raw = values.get("goal")
    if not isinstance(raw, dict) or not raw:
        raise SpecError(
            f"{where}: narrow mode needs key 'goal' with metric, command and target, e.g.\n"
            "goal:\n  metric: lint warnings\n  command: ./count-warnings.sh\n  target: '<= 0'"
        )
    examples = {
        "metric": "a short label such as 'p99 latency' or 'lint warnings'",
        "command": "a shell command that prints the value when run in the target",
        "target": "a comparator and a number such as '<= 100' or '>= 80'",
    }
    for key, what in examples.items():
        value = raw.get(key)
        if value is None or not str(value).strip():
            raise SpecError(
                f"{where}: key 'goal.{key}' is not set: narrow mode needs {what}. "
                "No cycle runs without a measurable goal."
            )
    try:
        target = metrics.parse_target(str(raw["target"]))
    except ValueError as err:
        raise SpecError(f"{where}: key 'goal.target': {err}") from None
    merged = metrics.checked_settings(raw, GOAL_DEFAULTS, where, "goal")
    return Goal(
        metric=str(raw["metric"]).strip(),
        command=str(raw["command"]),
        target=target,
        target_text=str(raw["target"]).strip(),
        format=str(merged["format"]),
        key=merged.get("key"),
        repeats=merged["repeats"],
        timeout_s=float(merged["timeout_s"]),
        protect_tests=bool(merged["protect_tests"]),
    )


def angles_of(values: dict[str, Any], name: str = "<name>") -> list[Angle]:
    """The angles in the order they are worked: by explicit priority, never guessed."""
    where = spec_file(name)
    raw = values.get("angles")
    if not isinstance(raw, list) or not raw:
        raise SpecError(
            f"{where}: narrow mode needs key 'angles': at least one strategy for moving the "
            "metric, each {name, hypothesis, priority}"
        )
    angles: list[Angle] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise SpecError(f"{where}: key 'angles.{i}' must be a mapping")
        for key in ("name", "hypothesis"):
            if not str(item.get(key) or "").strip():
                raise SpecError(f"{where}: key 'angles.{i}.{key}' is not set")
        priority = item.get("priority")
        if priority is None and len(raw) > 1:
            raise SpecError(
                f"{where}: key 'angles.{i}.priority' is not set: with {len(raw)} angles each "
                "needs an explicit, distinct priority (1 is worked first); the ranking is "
                "never guessed"
            )
        priority = 1 if priority is None else priority
        if not isinstance(priority, int) or isinstance(priority, bool) or priority < 1:
            raise SpecError(f"{where}: key 'angles.{i}.priority' must be a whole number >= 1")
        match = tuple(str(p) for p in item.get("match") or ())
        for pattern in match:
            try:
                re.compile(pattern)
            except re.error as err:
                raise SpecError(
                    f"{where}: key 'angles.{i}.match': {pattern!r} is not a regular expression: "
                    f"{err}"
                ) from None
        paths = tuple(str(p) for p in item.get("paths") or ())
        for pattern in paths:
            problem = check_glob(pattern)
            if problem:
                raise SpecError(f"{where}: key 'angles.{i}.paths': glob {pattern!r}: {problem}")
        label, hypothesis = (str(item[key]).strip() for key in ("name", "hypothesis"))
        angles.append(Angle(label, hypothesis, priority, match, paths))
    for kind in ("name", "priority"):
        seen: dict[Any, str] = {}
        for angle in angles:
            value = getattr(angle, kind)
            if value in seen:
                raise SpecError(
                    f"{where}: key 'angles': angles {seen[value]!r} and {angle.name!r} share "
                    f"the {kind} {value!r}; every angle needs a distinct {kind}"
                )
            seen[value] = angle.name
    return sorted(angles, key=lambda a: a.priority)

"""The `script` backend: replays tool calls from a YAML file, no model involved.

For tests and rehearsals. The script maps team -> cycle -> a list of steps; the
cycle key is the number, `<track>/<number>` for a broad track, `<cK>/<number>` for a
candidate of an experiment batch, `<F-NNN>/<number>` for the group of findings led by
F-NNN of parallel Green, or `*` for any. A step is `{tool: NAME, args:
{...}}`, `{sleep: SECONDS}` to stand in for a slow model (cut off, like one, at the
stage's deadline), or `{wait_for: PATH}` to hold the stage until a test creates that
file. Every brief the backend is given is appended to `agent.transcript` (JSON lines)
when that key is set, so a test can assert on exactly what each team was told.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from autoresearch.agents.backends.base import StageBrief, StageFailed, StageRun, Toolbox, Usage


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> dict[str, Any]:
    """The script, parsed once per version of the file (the C loader where there is one):
    parsing a long script for every stage made benchmarks measure YAML, not the harness."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(Path(path).read_text(), Loader=loader) or {}  # noqa: S506 - a safe loader


def _wait_for(path: Path, timeout: float) -> None:
    """Hold the stage until `path` exists: a test's way to pause a run at a known point."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise StageFailed(f"script step wait_for: {path} did not appear in {timeout:g}s")
        time.sleep(0.1)


class ScriptBackend:
    name = "script"

    def __init__(self, agent_spec: dict[str, Any]):
        path = agent_spec.get("script")
        if not path:
            raise StageFailed("agent.backend is 'script' but agent.script names no file")
        file = Path(path)
        self.script = _load(str(file.resolve()), file.stat().st_mtime_ns)
        self.transcript = agent_spec.get("transcript")

    def steps_for(self, brief: StageBrief) -> list[dict[str, Any]]:
        by_cycle = self.script.get(brief.team) or {}
        cycle = brief.data.get("cycle")
        track = (
            brief.data.get("track") or brief.data.get("candidate") or brief.data.get("group") or ""
        )
        keys = [f"{track}/{cycle}" if track else cycle, str(cycle), "*"]
        for key in keys:
            if key in by_cycle:
                return by_cycle[key] or []
        return []

    def run(self, brief: StageBrief, toolbox: Toolbox, progress: Callable[[str], None]) -> StageRun:
        if self.transcript:
            with open(self.transcript, "a") as handle:
                record = {"team": brief.team, "system": brief.system, "task": brief.task}
                record["tools"] = [t["name"] for t in toolbox.definitions()]
                record["data"] = {k: v for k, v in brief.data.items() if k != "worktree"}
                handle.write(json.dumps(record) + "\n")
        turns = 0
        began = time.monotonic()
        deadline = brief.limits.deadline_s
        for step in self.steps_for(brief):
            if toolbox.finished:
                break
            if "sleep" in step:
                # A scripted pause is the fake model thinking: like a model, it is cut off at
                # the stage's deadline.
                wait = float(step["sleep"])
                if deadline is not None and time.monotonic() - began + wait >= deadline:
                    time.sleep(max(0.0, deadline - (time.monotonic() - began)))
                    return StageRun(Usage(), turns, "deadline", f"stopped after {deadline:g}s")
                time.sleep(wait)
                continue
            if "wait_for" in step:
                _wait_for(Path(step["wait_for"]), float(step.get("timeout", 600)))
                continue
            turns += 1
            result = toolbox.call(step["tool"], step.get("args") or {})
            first = result.content.splitlines()[0] if result.content else ""
            progress(
                f"turn {turns}: {step['tool']} -> {'ERROR ' if result.is_error else ''}{first}"
            )
        return StageRun(Usage(), turns, "end_turn", "scripted notes: " + brief.team)

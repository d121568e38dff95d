"""The end of a session: `done` says why it stopped and what it achieved."""

from __future__ import annotations

import json
from pathlib import Path

from . import journal, modes
from .session import write_text
from .stage import StageEnv


def write_done(env: StageEnv, out: Path) -> None:
    if modes.write_done(env, out):
        return
    decisions = journal.load_decisions(env.layout)
    last = decisions[-1] if decisions else {}
    fixed = sum(len(d.get("fixed", [])) for d in decisions)
    lines = [
        f"session: {env.layout.name}",
        f"mode: {env.spec['mode']}",
        f"stopped: {last.get('reason') or 'finished'}",
        f"cycles: {len(decisions)}",
        f"fixes kept: {fixed}",
        f"commits on {env.record.branch}: {last.get('commits_total', 0)}",
        f"tests: {'pass' if last.get('tests_pass') else 'FAIL'}",
        f"final commit: {last.get('end_commit', env.record.base_commit)}",
        f"review with: git -C {env.record.target} log --oneline "
        f"{env.record.base_commit[:12]}..{env.record.branch}",
    ]
    write_text(out, "\n".join(lines) + "\n")
    env.log(json.dumps({"done": env.layout.name, "reason": last.get("reason")}))

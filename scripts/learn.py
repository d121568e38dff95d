"""rules/learn.smk: the learn lens's one checkpoint per planned doc."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch import journal
from autoresearch.jobs import run_stage
from autoresearch.loop import write_decision

from . import cycle

LOOP = "learn"


def write_inputs(name: str, iteration: str) -> list[str]:
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return cycle.red_inputs(name, int(iteration), loop=LOOP)


def write(wildcards: Any, output: Any, log: Any) -> None:
    """Write, check, keep or drop the doc; the stop rule; the logs; decision.json last."""
    from autoresearch.modes.learn import stages

    def body(env, mode) -> None:
        decision = stages.write(env, mode, Path(output.record))
        mode.apply_policy(env, decision)
        writer = mode.writer(env.record)
        row = {
            "team": mode.team,
            "status": decision["status"],
            "tests_pass": "",
            "description": writer.line(f"{decision['doc']}: {decision['why']}"),
            "files_changed": 1 if decision["status"] == "kept" else 0,
            "timestamp": decision["timestamp"],
        }
        journal.upsert_results(env.layout, "", f"{env.cycle:03d}", [row])
        mode.write_summary(env, decision)
        write_decision(Path(output.decision), decision, writer)
        env.log(f"learn {env.cycle}: {decision['doc']}: {decision['status']} ({decision['why']})")

    run_stage(wildcards, log, body)

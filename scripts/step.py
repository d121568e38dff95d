"""The one job that ends a loop step, for every rule that decides one (evaluate,
broad_evaluate, experiment_decide, fix_decide, learn_write, ship_prepare, lens_check): the
mode's judge, then loop.decide's one order (stop rules, results, session.md, decision.json
last)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoresearch.engine.jobs import run_stage
from autoresearch.views import preload


def decide(wildcards: Any, input: Any, output: Any, log: Any) -> None:
    from autoresearch.engine import loop

    preload.start()  # the end's imports, while the judge waits on the target's commands
    run_stage(
        wildcards,
        input,
        output,
        log,
        lambda env, mode: loop.decide(
            env, mode, lambda: mode.judge(env, output), Path(output.decision)
        ),
    )

"""Where Snakemake comes in: open a stage's context, run it, log failures.

The cycle rules call these from `run:` blocks, in Snakemake's own process: a
script job would start a fresh Python and import Snakemake and this package again
for every stage (about 0.8 s each, most of a cycle's overhead). `stage_main` serves
rules that use `script:`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .stage import StageEnv
from .workflow_support import SESSIONS


def open_env(wildcards: Mapping[str, str], log_path: str) -> StageEnv:
    log = Path(log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")  # a rerun starts a fresh log
    return StageEnv.open(
        Path(SESSIONS) / wildcards["name"],
        cycle=wildcards.get("cycle", 0),
        track=wildcards.get("hid", ""),
        log_file=log,
    )


def run_logged(log_path: str, body: Callable[[], None]) -> None:
    """Run `body`; on failure put the traceback in the rule's log before re-raising."""
    try:
        body()
    except Exception:
        with open(log_path, "a") as handle:
            handle.write(traceback.format_exc())
        raise


def run_stage(wildcards: Any, log: Any, body: Callable[[StageEnv], None]) -> None:
    values = dict(wildcards.items())
    run_logged(log[0], lambda: body(open_env(values, log[0])))


def stage_main(smk: Any, body: Callable[[StageEnv], None]) -> None:
    """For `script:` rules: the same, from the `snakemake` object."""
    run_stage(smk.wildcards, smk.log, body)


# The cycle's stages, one call per rule.


def red(wildcards, output, log) -> None:
    from .teams import red as stage

    run_stage(wildcards, log, lambda env: stage(env, Path(output.findings), Path(output.record)))


def sanitize(wildcards, input, output, log) -> None:
    from .teams import sanitize as stage

    run_stage(wildcards, log, lambda env: stage(env, Path(input.findings), Path(output[0])))


def green(wildcards, input, output, log) -> None:
    from .teams import green as stage

    run_stage(
        wildcards,
        log,
        lambda env: stage(env, Path(input.findings), Path(output.patch), Path(output.record)),
    )


def refactor(wildcards, output, log) -> None:
    from .teams import refactor as stage

    run_stage(wildcards, log, lambda env: stage(env, Path(output.patch), Path(output.record)))


def evaluate(wildcards, output, log) -> None:
    from .evaluate import evaluate as stage

    run_stage(wildcards, log, lambda env: stage(env, Path(output.results), Path(output.decision)))


def session(wildcards, output, params, log, basedir: str) -> None:
    from .session import start

    run_logged(
        log[0],
        lambda: start(
            wildcards.name,
            Path(output.spec).parent,
            dict(params.overrides),
            log[0],
            root=Path(basedir),
        ),
    )


def done(wildcards, output, log) -> None:
    from .finish import write_done

    run_stage(wildcards, log, lambda env: write_done(env, Path(output[0])))


def example_repo(input, output, log) -> None:
    from .examples import make_example_repo

    run_logged(log[0], lambda: make_example_repo(Path(input[0]), Path(output.ready)))


def narrow_plot(wildcards, output, log) -> None:
    from .narrow import plot_progress

    run_stage(wildcards, log, lambda env: plot_progress(env.layout, env.spec, Path(output[0])))


# Broad mode's own stages (its cycles reuse the ones above).


def broad_strategist(wildcards, output, log) -> None:
    from .broad_stages import run_stage as broad_stage
    from .broad_stages import strategist

    broad_stage(
        wildcards, log, lambda env: strategist(env, Path(output.hypotheses), Path(output.record))
    )


def broad_approve(wildcards, output, log) -> None:
    from .broad import hypotheses_md
    from .broad_stages import approve
    from .broad_stages import run_stage as broad_stage

    broad_stage(
        wildcards, log, lambda env: approve(env, hypotheses_md(env.layout), Path(output[0]))
    )


def broad_track(wildcards, output, log) -> None:
    from .broad_stages import open_track
    from .broad_stages import run_stage as broad_stage

    broad_stage(wildcards, log, lambda env: open_track(env, Path(output[0])))


def broad_track_end(wildcards, output, log) -> None:
    from .broad_stages import end_track
    from .broad_stages import run_stage as broad_stage

    broad_stage(wildcards, log, lambda env: end_track(env, Path(output[0])))


def broad_comparison(wildcards, output, log) -> None:
    from .broad_stages import compare
    from .broad_stages import run_stage as broad_stage

    broad_stage(wildcards, log, lambda env: compare(env, Path(output.md), Path(output.data)))

from pathlib import Path

from autoresearch.broad_stages import run_stage, strategist

run_stage(
    snakemake,
    lambda env: strategist(env, Path(snakemake.output.hypotheses), Path(snakemake.output.record)),
)

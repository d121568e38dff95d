from pathlib import Path

from autoresearch.broad_stages import compare, run_stage

run_stage(
    snakemake,
    lambda env: compare(env, Path(snakemake.output.md), Path(snakemake.output.data)),
)

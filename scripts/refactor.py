from pathlib import Path

from autoresearch.entry import stage_main
from autoresearch.teams import refactor

stage_main(
    snakemake,
    lambda env: refactor(env, Path(snakemake.output.patch), Path(snakemake.output.record)),
)

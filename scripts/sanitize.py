from pathlib import Path

from autoresearch.entry import stage_main
from autoresearch.teams import sanitize

stage_main(
    snakemake,
    lambda env: sanitize(env, Path(snakemake.input.findings), Path(snakemake.output[0])),
)

from pathlib import Path

from autoresearch.entry import stage_main
from autoresearch.teams import red

stage_main(
    snakemake,
    lambda env: red(env, Path(snakemake.output.findings), Path(snakemake.output.record)),
)

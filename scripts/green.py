from pathlib import Path

from autoresearch.entry import stage_main
from autoresearch.teams import green

stage_main(
    snakemake,
    lambda env: green(
        env,
        Path(snakemake.input.findings),
        Path(snakemake.output.patch),
        Path(snakemake.output.record),
    ),
)

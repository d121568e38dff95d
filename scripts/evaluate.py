from pathlib import Path

from autoresearch.entry import stage_main
from autoresearch.evaluate import evaluate

stage_main(
    snakemake,
    lambda env: evaluate(env, Path(snakemake.output.results), Path(snakemake.output.decision)),
)

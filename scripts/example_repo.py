from pathlib import Path

from autoresearch.entry import run_logged
from autoresearch.examples import make_example_repo

run_logged(
    snakemake.log[0],
    lambda: make_example_repo(Path(snakemake.input[0]), Path(snakemake.output.ready)),
)

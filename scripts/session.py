from pathlib import Path

from autoresearch.entry import run_logged
from autoresearch.session import start

run_logged(
    snakemake.log[0],
    lambda: start(
        snakemake.wildcards.name,
        Path(snakemake.output.spec).parent,
        snakemake.params.overrides,
        snakemake.log[0],
        root=Path(snakemake.scriptdir).parent,
    ),
)

from pathlib import Path

from autoresearch.entry import stage_main
from autoresearch.narrow import plot_progress

stage_main(snakemake, lambda env: plot_progress(env.layout, env.spec, Path(snakemake.output[0])))

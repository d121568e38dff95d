from pathlib import Path

from autoresearch.entry import stage_main
from autoresearch.finish import write_done

stage_main(snakemake, lambda env: write_done(env, Path(snakemake.output[0])))

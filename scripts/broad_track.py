from pathlib import Path

from autoresearch.broad_stages import open_track, run_stage

run_stage(snakemake, lambda env: open_track(env, Path(snakemake.output[0])))

from pathlib import Path

from autoresearch.broad_stages import end_track, run_stage

run_stage(snakemake, lambda env: end_track(env, Path(snakemake.output[0])))

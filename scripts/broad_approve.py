from pathlib import Path

from autoresearch.broad import hypotheses_md
from autoresearch.broad_stages import approve, run_stage

run_stage(
    snakemake,
    lambda env: approve(env, hypotheses_md(env.layout), Path(snakemake.output[0])),
)

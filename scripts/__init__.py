"""The rules' Python half: `scripts/<x>.py` holds the input functions and job functions of
`rules/<x>.smk`. Jobs run in Snakemake's process; all logic is in the `autoresearch` package."""

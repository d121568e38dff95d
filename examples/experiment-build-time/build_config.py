"""How the build runs: the one file the experiments may change."""

JOBS = 1  # modules compiled at once

"""autoresearch: unattended codebase improvement as a Snakemake workflow."""

__version__ = "0.1.0"

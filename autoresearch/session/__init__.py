"""A session's life outside the loop: its spec, where its files live, preflight and
setup, the setup record, redo, verify, finalize's review branches, plan, Slurm
clean-up, the bundled examples, the target's stack and the safe writing of its files."""

"""The loop engine: the protocol every mode's loop follows (decide, stop, revert), the
stage context a job works in, the teams of a cycle, parallel Green's lanes, evaluate,
and the running summaries of a loop."""

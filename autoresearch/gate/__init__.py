"""The test gate: the target's test runs, the runners' own reports read into test ids,
the verdict on a change, the ledger of tested trees, and setup's baseline run."""

"""The lenses' deterministic parts: every rule a lens applies that code, not a model, decides.

severity         the shared severity scale (critical … info) and `at_or_above`
masking          the secret masker every written text passes (`mask`, `scan`)
finding_schema   per-lens finding schemas, `check` (drops with reasons), identity hash,
                 the `fail_on` gate and new/recurring/fixed labels
lens_log         `<lens>-results.tsv` rows, `run_id`, rerun-safe merge, seen hashes
saturation       coverage counters, the stop rule, security's next vector, scenario's next
                 dimension
votes            predict's merge, positions, labels, priority, groupthink, devil's advocate
reproduction     debug's confirmation of a bug by its failing reproduction test
suppressions     fix's anti-cheating check on a unified diff
error_counts     fix's error parsers, fixing order and keep/revert verdict
doc_checks       learn's validation of a doc, marker, score and staleness
command_checks   plan's safety screen and verdict on a candidate metric command
judge            stop condition 7 and the judge panel's maths
"""

"""The rules code (not a model) decides that several modes share; each module says who.

severity         the severity scale (critical … info) and `at_or_above`: every lens, stop 7
finding_schema   per-lens finding schemas, `check` (drops with reasons), identity hash,
                 the `fail_on` gate and new/recurring/fixed labels: the lenses, the CLI and
                 the agents' tool specs
votes            merge, positions, labels, priority, groupthink, devil's advocate: predict's
                 debate and broad's judges
judge            stop condition 7 and the judge panel's maths: every qualitative mode
                 (modes/base.py) and `autoresearch plan`
command_checks   plan's safety screen and verdict on a candidate metric command

A kit only one mode uses lives with it: the lens family's (masking, lens_log, saturation,
reproduction, suppressions, error_counts) in modes/lens/, learn's doc checks in
modes/learn/doc_checks.py.
"""

# The cycle: Red finds, sanitize filters, Green fixes, Refactor simplifies, evaluate decides.
# Sweep and narrow sessions run it under cycles/NNN/; broad tracks reuse these rules
# (rules/broad.smk) under cycles/<hid>/NNN/.


localrules:
    sanitize,


rule red:
    """Red team: find problems, change nothing."""
    input:
        unpack(state("cycles")),
        previous_step("cycles"),
    output:
        findings="sessions/{name}/cycles/{cycle}/red-findings.md",
        record="sessions/{name}/cycles/{cycle}/red.json",
    log:
        "sessions/{name}/logs/red/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/red/{cycle}.tsv"
    run:
        scripts.cycle.red(wildcards, input, output, log)


rule sanitize:
    """Deterministic: what, where and impact only; at most max_findings go on."""
    input:
        unpack(state("cycles")),
        findings="sessions/{name}/cycles/{cycle}/red-findings.md",
    output:
        "sessions/{name}/cycles/{cycle}/sanitized.md",
    log:
        "sessions/{name}/logs/sanitize/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/sanitize/{cycle}.tsv"
    run:
        scripts.cycle.sanitize(wildcards, input, output, log)


rule green_lane:
    """One lane of parallel Green (agent.parallel_green): its groups of findings, each
    from the stage's start commit in the lane's own worktree."""
    input:
        unpack(state("cycles")),
        # Clean room: sanitized findings only, never red-findings.md.
        findings="sessions/{name}/cycles/{cycle}/sanitized.md",
    output:
        "sessions/{name}/cycles/{cycle}/green-lanes/{lane}.json",
    log:
        "sessions/{name}/logs/green_lane/{cycle}-{lane}.log",
    benchmark:
        "sessions/{name}/benchmarks/green_lane/{cycle}-{lane}.tsv"
    wildcard_constraints:
        lane=r"g\d+",
    run:
        scripts.cycle.green_lane(wildcards, input, output, log)


rule green:
    """Green team: fix one sanitized finding at a time; tests gate every commit. Under
    agent.parallel_green, the lanes' commits are applied in finding order, then gated.
    """
    input:
        unpack(state("cycles")),
        # Clean room: sanitized findings (and the lanes' records of them), never
        # red-findings.md.
        unpack(green_inputs),
    output:
        patch="sessions/{name}/cycles/{cycle}/green-patch.md",
        record="sessions/{name}/cycles/{cycle}/green.json",
    log:
        "sessions/{name}/logs/green/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/green/{cycle}.tsv"
    run:
        scripts.cycle.green(wildcards, input, output, log)


rule refactor:
    """Refactor team: simplify the files Green changed, behaviour unchanged."""
    input:
        unpack(state("cycles")),
        # Waits on Green for order; the stage passes on only the changed-file list.
        green="sessions/{name}/cycles/{cycle}/green.json",
    output:
        patch="sessions/{name}/cycles/{cycle}/refactor-patch.md",
        record="sessions/{name}/cycles/{cycle}/refactor.json",
    log:
        "sessions/{name}/logs/refactor/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/refactor/{cycle}.tsv"
    run:
        scripts.cycle.refactor(wildcards, input, output, log)


checkpoint evaluate:
    """Full test run, the documented revert order, the mode's policy, whether to go on."""
    input:
        unpack(state("cycles")),
        unpack(evaluate_inputs),
    output:
        results="sessions/{name}/cycles/{cycle}/eval-results.md",
        decision="sessions/{name}/cycles/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/evaluate/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/evaluate/{cycle}.tsv"
    run:
        scripts.step.decide(wildcards, input, output, log)

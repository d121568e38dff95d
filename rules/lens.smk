# Loop lenses (security, debug, scenario): each iteration `lens_red` (the lens's team works
# one focus the harness picked) and the checkpoint `lens_check` (code checks the findings,
# logs the row, decides whether to go on), under lens/NNN/. Every lens, predict included,
# ends with `lens_report`: findings.md, the lens's other files, handoff.json.


# Cheap bookkeeping runs on the machine driving the workflow, never as a cluster job.
localrules:
    lens_check,
    lens_report,


rule lens_red:
    """The lens's team works this iteration's focus only; it changes nothing."""
    input:
        unpack(state("lens")),
        previous_step("lens"),
    output:
        "sessions/{name}/lens/{cycle}/raw.json",
    log:
        "sessions/{name}/logs/lens_red/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/lens_red/{cycle}.tsv"
    run:
        scripts.lens.red(wildcards, input, output, log)


checkpoint lens_check:
    """Deterministic: the finding schema, drops counted with reasons, the log, the stop rules."""
    input:
        unpack(state("lens")),
        "sessions/{name}/lens/{cycle}/raw.json",
    output:
        checked="sessions/{name}/lens/{cycle}/checked.json",
        decision="sessions/{name}/lens/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/lens_check/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/lens_check/{cycle}.tsv"
    run:
        scripts.step.decide(wildcards, input, output, log)


rule lens_report:
    """The lens's report files and handoff.json (what a chained lens takes on)."""
    input:
        unpack(state()),
        lens_report_inputs,
    output:
        findings="sessions/{name}/findings.md",
        handoff="sessions/{name}/handoff.json",
    log:
        "sessions/{name}/logs/lens_report.log",
    benchmark:
        "sessions/{name}/benchmarks/lens_report.tsv"
    run:
        scripts.lens.report(wildcards, input, output, log)

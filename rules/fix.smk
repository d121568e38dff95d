# The fix lens: each iteration `fix_attempt` (the agent fixes one error, handed in as a patch)
# and the checkpoint `fix_decide` (the diff checked for suppressions, the errors counted again,
# the guard run; kept only when the count fell), under fixes/NNN/. The report is the lens's
# (`lens_report`, rules/lens.smk): findings.md, summary.md, blocked.md, handoff.json.


rule fix_attempt:
    """The agent fixes the first error in fixing order that is not blocked; nothing is kept yet."""
    input:
        unpack(state("fixes")),
        previous_step("fixes"),
    output:
        attempt="sessions/{name}/fixes/{cycle}/attempt.md",
        record="sessions/{name}/fixes/{cycle}/attempt.json",
        patch="sessions/{name}/fixes/{cycle}/attempt.patch",
    log:
        "sessions/{name}/logs/fix_attempt/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/fix_attempt/{cycle}.tsv"
    run:
        scripts.fix.attempt(wildcards, input, output, log)


checkpoint fix_decide:
    """No model: suppressions refused, errors re-counted, guard; commit only if the count fell."""
    input:
        unpack(state("fixes")),
        record="sessions/{name}/fixes/{cycle}/attempt.json",
    output:
        results="sessions/{name}/fixes/{cycle}/evaluation.md",
        decision="sessions/{name}/fixes/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/fix_decide/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/fix_decide/{cycle}.tsv"
    run:
        scripts.step.decide(wildcards, input, output, log)

# The ship lens: one checkpoint `ship_prepare` per iteration (the agent fixes the most important
# failing gate; every gate runs again; kept only if more pass and none broke), under ship/NNN/.
# The report is the lens's (`lens_report`): ship-checklist.md, findings.md, handoff.json; `done`
# lists the shipping commands. Only `ship_execute`, asked for by name and never by `done`, runs
# them: it needs `approve: manual` and sessions/<name>/approved, and is a dry run by default.


checkpoint ship_prepare:
    """One failing gate fixed by the agent; all gates again; kept only if the score rose."""
    input:
        unpack(state("ship")),
        previous_step("ship"),
    output:
        record="sessions/{name}/ship/{cycle}/prepare.json",
        decision="sessions/{name}/ship/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/ship_prepare/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/ship_prepare/{cycle}.tsv"
    run:
        scripts.step.decide(wildcards, input, output, log)


rule ship_execute:
    """The shipping commands, after a person's approval; a dry run unless ship.dry_run: false."""
    input:
        unpack(state()),
        ship_execute_inputs,
    output:
        "sessions/{name}/shipped",
    log:
        "sessions/{name}/logs/ship_execute.log",
    benchmark:
        "sessions/{name}/benchmarks/ship_execute.tsv"
    run:
        scripts.ship.execute(wildcards, input, output, log)

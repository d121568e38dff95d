# The learn lens: with `learn.mode: init` or `update`, one checkpoint `learn_write` per planned
# doc (the agent writes it, code checks it, it is committed only when its score rose), under
# learn/NNN/. `check` plans no doc. The report is the lens's (`lens_report`, rules/lens.smk):
# docs-health.md, findings.md, handoff.json.


checkpoint learn_write:
    """The agent writes one doc; code checks it (up to 3 rounds); kept only if its score rose."""
    input:
        unpack(state(scripts.learn.LOOP)),
        previous_step(scripts.learn.LOOP),
    output:
        record="sessions/{name}/learn/{cycle}/write.json",
        decision="sessions/{name}/learn/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/learn_write/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/learn_write/{cycle}.tsv"
    run:
        scripts.step.decide(wildcards, input, output, log)

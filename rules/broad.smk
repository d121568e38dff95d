# Broad mode: strategist → approval → one independent track per hypothesis (its own branch
# and worktree from the base commit, cycles under cycles/<hid>/NNN/) → comparison → done.
# A track's cycle is rules/cycle.smk's: its rules are reused with a {hid} wildcard, so
# there is one loop, not a copy.


# Cheap bookkeeping runs on the machine driving the workflow, never as a cluster job.
localrules:
    broad_approve,
    broad_track,
    broad_sanitize,
    broad_track_end,
    broad_comparison,


rule broad_strategist:
    """Hypotheses from the aspiration (an agent), or from the spec's `hypotheses`."""
    input:
        unpack(state("cycles")),
        spec="sessions/{name}/session.yaml",
    output:
        hypotheses="sessions/{name}/hypotheses.md",
        record="sessions/{name}/strategist.json",
    log:
        "sessions/{name}/logs/strategist.log",
    benchmark:
        "sessions/{name}/benchmarks/strategist.tsv"
    run:
        scripts.broad.strategist(wildcards, input, output, log)


checkpoint broad_approve:
    """Validate hypotheses.md into the approved set; `approve: manual` waits for a person."""
    input:
        unpack(state("cycles")),
        approve_inputs,
    output:
        "sessions/{name}/hypotheses.json",
    log:
        "sessions/{name}/logs/approve.log",
    benchmark:
        "sessions/{name}/benchmarks/approve.tsv"
    run:
        scripts.broad.approve(wildcards, input, output, log)


rule broad_track:
    """The track's branch, fresh from the base commit, in its own worktree."""
    input:
        unpack(state("cycles")),
        "sessions/{name}/hypotheses.json",
    output:
        "sessions/{name}/tracks/{hid}/track.json",
    log:
        "sessions/{name}/logs/track/{hid}.log",
    benchmark:
        "sessions/{name}/benchmarks/track/{hid}.tsv"
    run:
        scripts.broad.track(wildcards, input, output, log)


use rule red as broad_red with:
    input:
        unpack(state("cycles")),
        broad_red_inputs,
    output:
        findings="sessions/{name}/cycles/{hid}/{cycle}/red-findings.md",
        record="sessions/{name}/cycles/{hid}/{cycle}/red.json",
    log:
        "sessions/{name}/logs/red/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/red/{hid}/{cycle}.tsv"


use rule sanitize as broad_sanitize with:
    input:
        unpack(state("cycles")),
        findings="sessions/{name}/cycles/{hid}/{cycle}/red-findings.md",
    output:
        "sessions/{name}/cycles/{hid}/{cycle}/sanitized.md",
    log:
        "sessions/{name}/logs/sanitize/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/sanitize/{hid}/{cycle}.tsv"


use rule green as broad_green with:
    input:
        unpack(state("cycles")),
        # Clean room: sanitized findings only, never red-findings.md.
        findings="sessions/{name}/cycles/{hid}/{cycle}/sanitized.md",
        red="sessions/{name}/cycles/{hid}/{cycle}/red.json",
    output:
        patch="sessions/{name}/cycles/{hid}/{cycle}/green-patch.md",
        record="sessions/{name}/cycles/{hid}/{cycle}/green.json",
    log:
        "sessions/{name}/logs/green/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/green/{hid}/{cycle}.tsv"


use rule refactor as broad_refactor with:
    input:
        unpack(state("cycles")),
        green="sessions/{name}/cycles/{hid}/{cycle}/green.json",
    output:
        patch="sessions/{name}/cycles/{hid}/{cycle}/refactor-patch.md",
        record="sessions/{name}/cycles/{hid}/{cycle}/refactor.json",
    log:
        "sessions/{name}/logs/refactor/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/refactor/{hid}/{cycle}.tsv"


# Declared rather than `use rule evaluate as ...`: Snakemake 9 makes a `use rule` copy of a
# checkpoint a plain rule (workflow.userule does not pass checkpoint=True), and the loop
# needs a checkpoint here. Same stage function, track paths.
checkpoint broad_evaluate:
    """Full test run, the documented revert order, logs, and whether the track goes on."""
    input:
        unpack(state("cycles")),
        unpack(broad_evaluate_inputs),
    output:
        results="sessions/{name}/cycles/{hid}/{cycle}/eval-results.md",
        decision="sessions/{name}/cycles/{hid}/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/evaluate/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/evaluate/{hid}/{cycle}.tsv"
    run:
        scripts.step.decide(wildcards, input, output, log)


rule broad_track_end:
    """Record how the track ended and what it did, for the comparison."""
    input:
        unpack(state()),
        decision=final_decision("tracks/{hid}/result.json"),
    output:
        "sessions/{name}/tracks/{hid}/result.json",
    log:
        "sessions/{name}/logs/track-end/{hid}.log",
    benchmark:
        "sessions/{name}/benchmarks/track-end/{hid}.tsv"
    run:
        scripts.broad.track_end(wildcards, input, output, log)


rule broad_comparison:
    """Rank the tracks, name the winner and how to merge it; keep every branch."""
    input:
        unpack(state()),
        track_results,
    output:
        md=report(
            "sessions/{name}/comparison.md",
            caption="../report/broad-comparison.rst",
            category="{name}",
            subcategory="summary",
            labels={"file": "comparison.md"},
        ),
        data="sessions/{name}/comparison.json",
    log:
        "sessions/{name}/logs/comparison.log",
    benchmark:
        "sessions/{name}/benchmarks/comparison.tsv"
    run:
        scripts.broad.comparison(wildcards, input, output, log)

# Broad mode (seed 000): strategist → approval → one independent track per hypothesis
# (its own branch and worktree from the base commit, cycles under cycles/<hid>/NNN/) →
# comparison → done. The cycle is the sweep's own: the rules of cycle.smk are reused
# with a {hid} wildcard, so there is one loop, not a copy (DESIGN §2).
from autoresearch import broad_flow


wildcard_constraints:
    hid=r"h\d+",


# Cheap bookkeeping runs on the machine driving the workflow, never as a cluster job.
localrules:
    sanitize,
    done,
    broad_approve,
    broad_track,
    broad_sanitize,
    broad_track_end,
    broad_comparison,


# `done` of a broad session waits on comparison.md (see done_inputs in common.smk).
MODE_DONE_INPUTS["broad"] = lambda wildcards: broad_flow.comparison(wildcards.name)


rule broad_strategist:
    """Hypotheses from the aspiration (an agent), or from the spec's `hypotheses`."""
    input:
        spec="sessions/{name}/session.yaml",
    output:
        hypotheses="sessions/{name}/hypotheses.md",
        record="sessions/{name}/strategist.json",
    log:
        "sessions/{name}/logs/strategist.log",
    benchmark:
        "sessions/{name}/benchmarks/strategist.tsv"
    run:
        stages.broad_strategist(wildcards, output, log)


checkpoint broad_approve:
    """Validate hypotheses.md into the approved set; `approve: manual` waits for a person."""
    input:
        # hypotheses.md, until the approved set exists (a later edit reruns nothing).
        lambda wildcards: broad_flow.approve_inputs(wildcards.name),
    output:
        "sessions/{name}/hypotheses.json",
    log:
        "sessions/{name}/logs/approve.log",
    benchmark:
        "sessions/{name}/benchmarks/approve.tsv"
    run:
        stages.broad_approve(wildcards, output, log)


rule broad_track:
    """The track's branch, fresh from the base commit, in its own worktree."""
    input:
        "sessions/{name}/hypotheses.json",
    output:
        "sessions/{name}/tracks/{hid}/track.json",
    log:
        "sessions/{name}/logs/track/{hid}.log",
    benchmark:
        "sessions/{name}/benchmarks/track/{hid}.tsv"
    run:
        stages.broad_track(wildcards, output, log)


use rule red as broad_red with:
    input:
        # Spec, the track's branch, its previous decision (parallel: false: the previous
        # track's end too).
        lambda wildcards: broad_flow.red_inputs(
            wildcards.name, wildcards.hid, int(wildcards.cycle)
        ),
    output:
        findings="sessions/{name}/cycles/{hid}/{cycle}/red-findings.md",
        record="sessions/{name}/cycles/{hid}/{cycle}/red.json",
    log:
        "sessions/{name}/logs/red/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/red/{hid}/{cycle}.tsv"


use rule sanitize as broad_sanitize with:
    input:
        findings="sessions/{name}/cycles/{hid}/{cycle}/red-findings.md",
    output:
        "sessions/{name}/cycles/{hid}/{cycle}/sanitized.md",
    log:
        "sessions/{name}/logs/sanitize/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/sanitize/{hid}/{cycle}.tsv"


use rule green as broad_green with:
    input:
        # Clean room: sanitized findings only, never red-findings.md.
        findings="sessions/{name}/cycles/{hid}/{cycle}/sanitized.md",
    output:
        patch="sessions/{name}/cycles/{hid}/{cycle}/green-patch.md",
        record="sessions/{name}/cycles/{hid}/{cycle}/green.json",
    log:
        "sessions/{name}/logs/green/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/green/{hid}/{cycle}.tsv"


use rule refactor as broad_refactor with:
    input:
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
    """Full test run, the seed's revert order, logs, and whether the track goes on."""
    input:
        unpack(
            lambda wildcards: broad_flow.evaluate_inputs(
                wildcards.name, wildcards.hid, wildcards.cycle
            )
        ),
    output:
        results="sessions/{name}/cycles/{hid}/{cycle}/eval-results.md",
        decision="sessions/{name}/cycles/{hid}/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/evaluate/{hid}/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/evaluate/{hid}/{cycle}.tsv"
    run:
        stages.evaluate(wildcards, output, log)


rule broad_track_end:
    """Record how the track ended and what it did, for the comparison."""
    input:
        # The decision that ended the track; asks the checkpoint only for the next cycle.
        lambda wildcards: broad_flow.track_end_inputs(checkpoints, wildcards),
    output:
        "sessions/{name}/tracks/{hid}/result.json",
    log:
        "sessions/{name}/logs/track-end/{hid}.log",
    benchmark:
        "sessions/{name}/benchmarks/track-end/{hid}.tsv"
    run:
        stages.broad_track_end(wildcards, output, log)


rule broad_comparison:
    """Rank the tracks, name the winner and how to merge it; keep every branch."""
    input:
        # Every approved track's end record, known once the approval checkpoint ran.
        lambda wildcards: broad_flow.track_results(checkpoints, wildcards.name),
    output:
        md=report(
            "sessions/{name}/comparison.md",
            caption="../report/broad-comparison.rst",
            category="broad",
        ),
        data="sessions/{name}/comparison.json",
    log:
        "sessions/{name}/logs/comparison.log",
    benchmark:
        "sessions/{name}/benchmarks/comparison.tsv"
    run:
        stages.broad_comparison(wildcards, output, log)

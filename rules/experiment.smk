# Experiment mode (seeds 001, 003, 004): each iteration is `experiment_propose` (the agent
# makes one change, saved as a patch) and the checkpoint `experiment_decide` (measure,
# guard, keep or reset, stop rules). At the end, report.md and progress.png.
from autoresearch import experiment_flow


# Both the sweep `evaluate` checkpoint and `experiment_decide` write cycles/NNN/decision.json.
# experiment_decide goes first; in sessions of other modes one of its inputs is missing, so
# Snakemake falls back to `evaluate`.
ruleorder: experiment_decide > evaluate


MODE_DONE_INPUTS["experiment"] = lambda wildcards: experiment_flow.done_inputs(
    checkpoints, wildcards.name
)


rule experiment_propose:
    """The agent makes one atomic change and hands it in; nothing is committed here."""
    input:
        lambda wildcards: experiment_flow.propose_inputs(
            wildcards.name, wildcards.cycle
        ),
    output:
        proposal="sessions/{name}/cycles/{cycle}/proposal.md",
        record="sessions/{name}/cycles/{cycle}/proposal.json",
        patch="sessions/{name}/cycles/{cycle}/proposal.patch",
    log:
        "sessions/{name}/logs/experiment_propose/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_propose/{cycle}.tsv"
    run:
        experiment_flow.propose(wildcards, output, log)


checkpoint experiment_decide:
    """Measure and guard the change: commit it if strictly better, else reset; stop rules."""
    input:
        unpack(
            lambda wildcards: experiment_flow.decide_inputs(
                wildcards.name, wildcards.cycle
            )
        ),
    output:
        results="sessions/{name}/cycles/{cycle}/evaluation.md",
        decision="sessions/{name}/cycles/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/experiment_decide/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_decide/{cycle}.tsv"
    run:
        experiment_flow.decide(wildcards, output, log)


rule experiment_report:
    """Seed 004's "Autoresearch Complete" summary."""
    input:
        decision=lambda wildcards: experiment_flow.last_decision(
            checkpoints, wildcards.name
        ),
    output:
        report(
            "sessions/{name}/report.md",
            caption="../report/experiment-report.rst",
            category="Experiment",
        ),
    log:
        "sessions/{name}/logs/experiment_report.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_report.tsv"
    run:
        experiment_flow.report(wildcards, output, log)


rule experiment_plot:
    """Metric per iteration, kept changes highlighted, running best."""
    input:
        decision=lambda wildcards: experiment_flow.last_decision(
            checkpoints, wildcards.name
        ),
    output:
        report(
            "sessions/{name}/progress.png",
            caption="../report/experiment-progress.rst",
            category="Experiment",
        ),
    log:
        "sessions/{name}/logs/experiment_plot.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_plot.tsv"
    run:
        experiment_flow.plot(wildcards, output, log)

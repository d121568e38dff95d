# Experiment mode: each iteration is `experiment_propose` (the agent makes one change, saved
# as a patch) and the checkpoint `experiment_decide` (measure, guard, keep or reset, stop
# rules), under iterations/NNN/. At the end, report.md and progress.png.


localrules:
    experiment_report,
    experiment_plot,


rule experiment_propose:
    """The agent makes one atomic change and hands it in; nothing is committed here."""
    input:
        propose_inputs,
    output:
        proposal="sessions/{name}/iterations/{cycle}/proposal.md",
        record="sessions/{name}/iterations/{cycle}/proposal.json",
        patch="sessions/{name}/iterations/{cycle}/proposal.patch",
    log:
        "sessions/{name}/logs/experiment_propose/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_propose/{cycle}.tsv"
    run:
        scripts.experiment.propose(wildcards, output, log)


checkpoint experiment_decide:
    """Measure and guard the change: commit it if strictly better, else reset; stop rules."""
    input:
        proposal="sessions/{name}/iterations/{cycle}/proposal.json",
    output:
        results="sessions/{name}/iterations/{cycle}/evaluation.md",
        decision="sessions/{name}/iterations/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/experiment_decide/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_decide/{cycle}.tsv"
    run:
        scripts.experiment.decide(wildcards, output, log)


rule experiment_report:
    """The "Autoresearch Complete" summary: what was tried, kept and learned."""
    input:
        decision=experiment_final_decision,
    output:
        report(
            "sessions/{name}/report.md",
            caption="../report/experiment-report.rst",
            category="{name}",
            subcategory="summary",
            labels={"file": "report.md"},
        ),
    log:
        "sessions/{name}/logs/experiment_report.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_report.tsv"
    run:
        scripts.experiment.report(wildcards, output, log)


rule experiment_plot:
    """Metric per iteration, kept changes highlighted, running best."""
    input:
        decision=experiment_final_decision,
    output:
        report(
            "sessions/{name}/progress.png",
            caption="../report/experiment-progress.rst",
            category="{name}",
            subcategory="summary",
            labels={"file": "metric per iteration"},
        ),
    log:
        "sessions/{name}/logs/experiment_plot.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_plot.tsv"
    run:
        scripts.experiment.plot(wildcards, output, log)

# Experiment mode: each iteration is `experiment_propose` (the agent makes one change, saved
# as a patch) and the checkpoint `experiment_decide` (measure, guard, keep or reset, stop
# rules), under iterations/NNN/. With `experiment.parallel: k`, an iteration is instead k
# `experiment_candidate` jobs (iterations/NNN/cK/, each in its own worktree) and k
# `experiment_measure` jobs, which run at once on cores or cluster nodes, before the one
# decide. At the end, report.md and progress.png.


localrules:
    experiment_report,
    experiment_plot,


rule experiment_propose:
    """The agent makes one atomic change and hands it in; nothing is committed here."""
    input:
        unpack(state("iterations")),
        previous_step("iterations"),
    output:
        proposal="sessions/{name}/iterations/{cycle}/proposal.md",
        record="sessions/{name}/iterations/{cycle}/proposal.json",
        patch="sessions/{name}/iterations/{cycle}/proposal.patch",
    log:
        "sessions/{name}/logs/experiment_propose/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_propose/{cycle}.tsv"
    run:
        scripts.experiment.propose(wildcards, input, output, log)


rule experiment_candidate:
    """One candidate of a batch: one change made in the candidate's own worktree from the
    incumbent commit, its hypothesis distinct from its siblings'; nothing is committed.
    """
    input:
        unpack(state("iterations")),
        previous_step("iterations"),
    output:
        proposal="sessions/{name}/iterations/{cycle}/{cand}/proposal.md",
        record="sessions/{name}/iterations/{cycle}/{cand}/proposal.json",
        patch="sessions/{name}/iterations/{cycle}/{cand}/proposal.patch",
    log:
        "sessions/{name}/logs/experiment_candidate/{cycle}-{cand}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_candidate/{cycle}-{cand}.tsv"
    wildcard_constraints:
        cand=r"c\d+",
    run:
        scripts.experiment.propose_candidate(wildcards, input, output, log)


rule experiment_measure:
    """Measure and guard one candidate in its worktree, with the spec's resources."""
    input:
        unpack(state("iterations")),
        record="sessions/{name}/iterations/{cycle}/{cand}/proposal.json",
    output:
        measurement="sessions/{name}/iterations/{cycle}/{cand}/measurement.json",
    log:
        "sessions/{name}/logs/experiment_measure/{cycle}-{cand}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_measure/{cycle}-{cand}.tsv"
    wildcard_constraints:
        cand=r"c\d+",
    resources:
        **scripts.experiment.measuring_resources(
            "experiment_measure", frozen_specs.read
        ),
    run:
        scripts.experiment.measure(wildcards, input, output, log)


checkpoint experiment_decide:
    """Measure and guard the change (or read the batch's measurements): commit the best
    strictly better one, else reset; stop rules."""
    input:
        unpack(state("iterations")),
        unpack(experiment_decide_inputs),
    output:
        results="sessions/{name}/iterations/{cycle}/evaluation.md",
        decision="sessions/{name}/iterations/{cycle}/decision.json",
    log:
        "sessions/{name}/logs/experiment_decide/{cycle}.log",
    benchmark:
        "sessions/{name}/benchmarks/experiment_decide/{cycle}.tsv"
    resources:
        **scripts.experiment.measuring_resources("experiment_decide", frozen_specs.read),
    run:
        scripts.step.decide(wildcards, input, output, log)


rule experiment_report:
    """The "Autoresearch Complete" summary: what was tried, kept and learned."""
    input:
        unpack(state()),
        decision=final_decision("report.md"),
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
        scripts.experiment.report(wildcards, input, output, log)


rule experiment_plot:
    """Metric per iteration, kept changes highlighted, running best."""
    input:
        unpack(state()),
        decision=final_decision("progress.png"),
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
        scripts.experiment.plot(wildcards, input, output, log)

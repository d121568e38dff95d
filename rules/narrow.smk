# Narrow mode: the cycle loop is sweep's (rules/cycle.smk, one loop, DESIGN §2); narrow adds
# the goal-progress plot, drawn once the loop has stopped, and makes `done` wait for it.


# Cheap bookkeeping runs on the machine driving the workflow, never as a cluster job.
localrules:
    goal_progress_plot,


# `done` of a narrow session: the loop's final decision, then the plot drawn from it.
MODE_DONE_INPUTS["narrow"] = lambda wildcards: [
    cycle_loop_inputs(wildcards),
    f"sessions/{wildcards.name}/goal-progress.png",
]


rule goal_progress_plot:
    """Narrow: the metric per cycle with baseline and target lines, reverted cycles marked."""
    input:
        # The decision that stopped the loop: the plot is drawn once, from every cycle.
        decision=cycle_loop_inputs,
    output:
        report(
            "sessions/{name}/goal-progress.png",
            caption="../report/goal-progress.rst",
            category="narrow",
        ),
    log:
        "sessions/{name}/logs/goal_progress_plot.log",
    benchmark:
        "sessions/{name}/benchmarks/goal_progress_plot.tsv"
    run:
        stages.narrow_plot(wildcards, output, log)

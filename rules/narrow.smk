# Narrow mode: the cycle loop is rules/cycle.smk's; narrow adds the goal-progress plot,
# drawn once the loop has stopped (its mode makes `done` wait for it).


# Cheap bookkeeping runs on the machine driving the workflow, never as a cluster job.
localrules:
    goal_progress_plot,


rule goal_progress_plot:
    """Narrow: the metric per cycle with baseline and target lines, reverted cycles marked."""
    input:
        unpack(state()),
        decision=final_decision("goal-progress.png"),
    output:
        report(
            "sessions/{name}/goal-progress.png",
            caption="../report/goal-progress.rst",
            category="{name}",
            subcategory="summary",
            labels={"file": "goal progress"},
        ),
    log:
        "sessions/{name}/logs/goal_progress_plot.log",
    benchmark:
        "sessions/{name}/benchmarks/goal_progress_plot.tsv"
    run:
        scripts.narrow.goal_progress_plot(wildcards, input, output, log)

# The report a user opens: `snakemake --report sessions/<name>/report.html sessions/<name>/done`.
# session.md, results.tsv and usage.tsv are rewritten by many rules, so none can be one
# rule's report() output: once the session has ended, session_report renders them (and every
# cycle's evaluation with its kept diffs, a plot per cycle, and the outcome the landing page
# states) under sessions/<name>/report/, and `done` waits for it. The modes' own plots and
# documents are marked for the report by their rules.


# Cheap bookkeeping runs on the machine driving the workflow, never as a cluster job.
localrules:
    session_report,


rule session_report:
    """session.md, the tables, every evaluation and a plot, as pages of the report."""
    input:
        unpack(state()),
        session_report_inputs,
    output:
        summary=report(
            "sessions/{name}/report/session.html",
            caption="../report/session.rst",
            category="{name}",
            subcategory="summary",
            labels={"file": "session.md"},
        ),
        results=report(
            "sessions/{name}/report/results.html",
            caption="../report/results.rst",
            category="{name}",
            subcategory="summary",
            labels={"file": "results.tsv, usage.tsv"},
        ),
        plot=report(
            "sessions/{name}/report/cycles.png",
            caption="../report/cycles.rst",
            category="{name}",
            subcategory="summary",
            labels={"file": "kept, tests and cost per cycle"},
        ),
        evaluations=report(
            directory("sessions/{name}/report/evaluations"),
            patterns=["{step}.html"],
            caption="../report/evaluation.rst",
            category="{name}",
            subcategory="evaluations",
            labels=evaluation_labels,
        ),
        # outcome.html, the fragment the landing page embeds (report/workflow.rst), and the
        # review sets `autoresearch finalize` adds later: in a folder, whose timestamp
        # Snakemake keeps in the folder, so adding them leaves `done` up to date.
        outcome=report(
            directory("sessions/{name}/report/outcome"),
            patterns=["review-{number}.html"],
            caption="../report/review.rst",
            category="{name}",
            subcategory="review sets",
            labels=review_labels,
        ),
    log:
        "sessions/{name}/logs/session_report.log",
    benchmark:
        "sessions/{name}/benchmarks/session_report.tsv"
    run:
        scripts.report.session_report(wildcards, input, output, log)

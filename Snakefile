# autoresearch: agents find and fix problems in a target git repository; its tests
# decide what is kept. Run a session to its end (or resume it) with:
#
#     snakemake --cores 1 sessions/<name>/done
#
# The spec of session <name> is config/sessions/<name>.yaml (see README.md).


from snakemake.utils import min_version

min_version("9.0")


# What `snakemake --report sessions/<name>/report.html sessions/<name>/done` opens with.
report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/examples.smk"
include: "rules/session.smk"
include: "rules/cycle.smk"
include: "rules/experiment.smk"
include: "rules/broad.smk"
include: "rules/narrow.smk"
include: "rules/lens.smk"
include: "rules/predict.smk"
include: "rules/fix.smk"
include: "rules/learn.smk"
include: "rules/ship.smk"
include: "rules/report.smk"
include: "rules/security.smk"

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
include: "rules/lens.smk"
include: "rules/report.smk"


# Each mode's own rules file, rules/<mode>.smk, for every mode in the registry that has
# one (modes.MODES): a new mode adds its file and its registry line, nothing here.
for mode_rules in scripts.common.mode_rules(workflow.basedir):

    include: mode_rules

# What every rules file shares: the Python half of the rules (scripts/), wildcard
# patterns, the input functions, and the per-session run lock. Kept cheap and free of side
# effects: cluster jobs re-parse it.
import sys

sys.path.insert(0, workflow.basedir)

import scripts.common
import scripts.session
import scripts.cycle
import scripts.narrow
import scripts.broad
import scripts.experiment
import scripts.examples
import scripts.lens
import scripts.predict
import scripts.fix
import scripts.learn
import scripts.ship
import scripts.report
import scripts.security
import scripts.step

from autoresearch.session.spec import FrozenSpecs

scripts.common.install_error_filter()
one_line_errors = scripts.common.one_line_errors
# The frozen specs this run's input functions read, each parsed once (not the jobs': each
# job parses its own).
frozen_specs = FrozenSpecs()


wildcard_constraints:
    name=scripts.common.NAME_PATTERN,
    cycle=r"\d\d\d+",  # 001 ... 999, then 1000 ... (no braces: Snakemake reads {3,} as a wildcard)
    hid=r"h\d+",
    example=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    persona=r"[a-z][a-z0-9-]*",
    round=r"[1-9][0-9]*",
    # Any session path whose name breaks the naming rule (the lookahead leaves valid
    # names to the real rules), so it gets the rule's message instead of "no rule".
    badname=rf"(?!(?:{scripts.common.NAME_PATTERN})/done$).+",


# --- input functions (each calls the rules' Python half in scripts/) ---------------------


# every mode's loop


def final_decision(product):
    """The input function of `product`, a file made once from every step (experiment's
    report and plot, narrow's plot, a track's end, security's fixes): the decision that
    ended the session's loop (broad: the track's, `hid`), as the session's mode says."""

    @one_line_errors
    def decision(wildcards):
        return scripts.common.final_decision_of(
            wildcards.name,
            checkpoints,
            product.format(**wildcards),
            wildcards.get("hid", ""),
            frozen_specs.read,
        )

    return decision


def previous_step(loop):
    """The input function of a loop's first stage: the frozen spec, and the previous
    step's decision of `loop` (its folder) until it is on disk (so a finished session's
    DAG stays a few jobs long)."""

    @one_line_errors
    def files(wildcards):
        return scripts.cycle.red_inputs(wildcards.name, int(wildcards.cycle), loop=loop)

    return files


def state(loop=None):
    """The input function of every stage, for what its job reads of the session
    besides its stage's files (the spec, the setup records, the loop's history);
    `loop` is the rule's loop folder, None for a rule made once at the end."""

    @one_line_errors
    def files(wildcards):
        return scripts.common.state_of(wildcards.name, loop, wildcards.get("hid", ""))

    return files


# rules/session.smk


@one_line_errors
def session_inputs(wildcards):
    """Check the spec before anything runs (a bad spec fails here, nothing written)."""
    return scripts.session.session_inputs(
        wildcards.name,
        workflow.basedir,
        config,
        scripts.common.override_origins(workflow),
        dry_run=workflow.dryrun,
    )


@one_line_errors
def done_inputs(wildcards):
    """What ends the session, as its mode says."""
    return scripts.session.done_inputs(
        wildcards.name, checkpoints, config, frozen_specs.read
    )


@one_line_errors
def invalid_session_name(wildcards):
    """Only reached for names the other rules refuse: explain instead of 'no rule'."""
    return scripts.session.invalid_session_name(wildcards.badname)


# rules/cycle.smk


@one_line_errors
def green_inputs(wildcards):
    """sanitized.md, and the lanes' records under agent.parallel_green."""
    return scripts.cycle.green_inputs(
        wildcards.name, wildcards.cycle, frozen_specs.read
    )


@one_line_errors
def evaluate_inputs(wildcards):
    """Green's record, and Refactor's unless the spec's teams leave it out."""
    return scripts.cycle.evaluate_inputs(
        wildcards.name, wildcards.cycle, read_spec=frozen_specs.read
    )


# rules/experiment.smk


@one_line_errors
def experiment_decide_inputs(wildcards):
    """The proposal, or every candidate's measurement (`experiment.parallel`)."""
    return scripts.experiment.decide_inputs(
        wildcards.name, wildcards.cycle, frozen_specs.read
    )


# rules/lens.smk and rules/predict.smk


@one_line_errors
def lens_report_inputs(wildcards):
    """What the lens's report waits for, as the lens says."""
    return scripts.lens.report_inputs(wildcards.name, checkpoints)


def debate_inputs(wildcards):
    """Every persona's previous round: a debate round sees all of them."""
    return scripts.predict.debate_inputs(wildcards.name, int(wildcards.round))


# rules/ship.smk


@one_line_errors
def ship_execute_inputs(wildcards):
    """`done` and a person's approval file (approve: manual), never asked for by `done`."""
    return scripts.ship.execute_inputs(wildcards.name)


# rules/broad.smk


@one_line_errors
def approve_inputs(wildcards):
    """hypotheses.md, until the approved set exists (a later edit reruns nothing)."""
    return scripts.broad.approve_inputs(wildcards.name)


@one_line_errors
def broad_red_inputs(wildcards):
    """Spec, the track's branch, its previous decision (`parallel: false`: the previous
    track's end too)."""
    return scripts.broad.red_inputs(wildcards.name, wildcards.hid, int(wildcards.cycle))


@one_line_errors
def broad_evaluate_inputs(wildcards):
    return scripts.cycle.evaluate_inputs(
        wildcards.name, wildcards.cycle, wildcards.hid, frozen_specs.read
    )


@one_line_errors
def track_results(wildcards):
    """Every approved track's end record, known once the approval checkpoint ran."""
    return scripts.broad.track_results(wildcards.name, checkpoints)


# rules/report.smk


def session_report_inputs(wildcards):
    """The mode's end products: the report is drawn once they exist."""
    return scripts.report.report_inputs(wildcards.name, checkpoints, frozen_specs.read)


def evaluation_labels(wildcards):
    """How the report lists one evaluation page."""
    return scripts.report.evaluation_labels(wildcards.step)


def review_labels(wildcards):
    """How the report lists one review set's page."""
    return scripts.report.review_labels(wildcards.number)


# `snakemake --report` shows each rule's run: block and the job function it calls.
scripts.report.show_job_code(workflow)


# Open lock files, held for the life of this process (see hold_session_locks).
HELD_LOCKS = []


onstart:
    scripts.common.start_run(workflow, HELD_LOCKS)

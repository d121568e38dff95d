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
import scripts.security


wildcard_constraints:
    name=scripts.common.NAME_PATTERN,
    cycle=r"\d{3}",
    hid=r"h\d+",
    example=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    badname=r"(.*/.*|.*\s.*|[^A-Za-z0-9].*)",
    persona=r"[a-z][a-z0-9-]*",
    round=r"[1-9][0-9]*",


# --- input functions (each calls the rules' Python half in scripts/) ---------------------


# rules/session.smk


def session_inputs(wildcards):
    """Check the spec before anything runs (a bad spec fails here, nothing written)."""
    return scripts.session.session_inputs(wildcards.name, workflow.basedir, config)


def done_inputs(wildcards):
    """What ends the session, as its mode says."""
    return scripts.session.done_inputs(wildcards.name, checkpoints, config)


def invalid_session_name(wildcards):
    """Only reached for names the other rules refuse: explain instead of 'no rule'."""
    return scripts.session.invalid_session_name(wildcards.badname)


# rules/cycle.smk


def red_inputs(wildcards):
    """The frozen spec, and the previous cycle's decision until it is on disk."""
    return scripts.cycle.red_inputs(wildcards.name, int(wildcards.cycle))


def evaluate_inputs(wildcards):
    """Green's record, and Refactor's unless the spec's teams leave it out."""
    return scripts.cycle.evaluate_inputs(wildcards.name, wildcards.cycle)


# rules/narrow.smk


def narrow_final_decision(wildcards):
    """The decision that stopped the loop: the plot is drawn once, from every cycle."""
    return scripts.narrow.final_decision(wildcards.name, checkpoints)


# rules/experiment.smk


def propose_inputs(wildcards):
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return scripts.experiment.propose_inputs(wildcards.name, wildcards.cycle)


def experiment_final_decision(wildcards):
    """The decision that stopped the loop."""
    return scripts.experiment.final_decision(wildcards.name, checkpoints)


# rules/lens.smk and rules/predict.smk


def lens_red_inputs(wildcards):
    """The frozen spec, and the previous iteration's decision until it is on disk."""
    return scripts.lens.red_inputs(wildcards.name, int(wildcards.cycle))


def lens_report_inputs(wildcards):
    """What the lens's report waits for, as the lens says."""
    return scripts.lens.report_inputs(wildcards.name, checkpoints)


def security_fix_inputs(wildcards):
    """The audit's final decision: fixes start once the audit is over."""
    return scripts.security.fix_inputs(wildcards.name, checkpoints)


def debate_inputs(wildcards):
    """Every persona's previous round: a debate round sees all of them."""
    return scripts.predict.debate_inputs(wildcards.name, int(wildcards.round))


# rules/broad.smk


def approve_inputs(wildcards):
    """hypotheses.md, until the approved set exists (a later edit reruns nothing)."""
    return scripts.broad.approve_inputs(wildcards.name)


def broad_red_inputs(wildcards):
    """Spec, the track's branch, its previous decision (`parallel: false`: the previous
    track's end too)."""
    return scripts.broad.red_inputs(wildcards.name, wildcards.hid, int(wildcards.cycle))


def broad_evaluate_inputs(wildcards):
    return scripts.cycle.evaluate_inputs(wildcards.name, wildcards.cycle, wildcards.hid)


def track_end_inputs(wildcards):
    """The decision that ended the track; asks the checkpoint only for the next cycle."""
    return scripts.broad.track_end_inputs(wildcards.name, wildcards.hid, checkpoints)


def track_results(wildcards):
    """Every approved track's end record, known once the approval checkpoint ran."""
    return scripts.broad.track_results(wildcards.name, checkpoints)


# Open lock files, held for the life of this process (see hold_session_locks).
HELD_LOCKS = []


onstart:
    scripts.common.start_run(workflow, HELD_LOCKS)

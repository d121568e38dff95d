# Helpers for the rules: paths, input functions, the per-session run lock.
# Kept cheap and free of side effects: cluster jobs re-parse this file.
import json
import os
import sys

sys.path.insert(0, workflow.basedir)

from autoresearch import commands
from autoresearch import workflow_support as support


class LazyStages:
    """autoresearch.entry, imported on first use: keeps parsing (and -n) cheap."""

    def __getattr__(self, name):
        from autoresearch import entry

        return getattr(entry, name)


stages = LazyStages()


wildcard_constraints:
    name=support.NAME_PATTERN,
    cycle=r"\d{3}",
    example=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    badname=r"(.*/.*|.*\s.*|[^A-Za-z0-9].*)",


def session_inputs(wildcards):
    """Check the spec before anything runs (a bad spec fails here, nothing written)."""
    return support.session_inputs(wildcards.name, workflow.basedir, config)


def invalid_session_name(wildcards):
    """Only reached for names the other rules refuse: explain instead of 'no rule'."""
    support.check_name(wildcards.badname)
    return []


def red_inputs(wildcards):
    """The frozen spec, and the previous cycle's decision until it is on disk."""
    return support.red_inputs(wildcards.name, int(wildcards.cycle))


def evaluate_inputs(wildcards):
    """Green's record, and Refactor's unless the spec's teams leave it out."""
    return support.evaluate_inputs(wildcards.name, wildcards.cycle)


# Modes with their own loop (broad, experiment) register their `done` inputs here.
MODE_DONE_INPUTS = {}


def done_inputs(wildcards):
    """What ends the session; the cycle loop asks the checkpoint only for the next cycle."""
    checkpoints.session.get(name=wildcards.name)
    frozen = support.frozen_spec(wildcards.name)
    support.check_agent_ready(frozen)
    support.check_version(wildcards.name, config)
    mode = frozen["mode"]
    if mode in MODE_DONE_INPUTS:
        return MODE_DONE_INPUTS[mode](wildcards)
    return cycle_loop_inputs(wildcards)


def cycle_loop_inputs(wildcards):
    """Sweep and narrow: the decision of the first cycle that is open or said stop."""
    cycle = support.next_open_cycle(wildcards.name)
    return checkpoints.evaluate.get(
        name=wildcards.name, cycle=f"{cycle:03d}"
    ).output.decision


onstart:
    support.hold_session_locks(workflow)
    commands.end_commands_on_interrupt()

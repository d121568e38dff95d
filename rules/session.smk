# A session's start and end: the setup checkpoint and `done`, the target of every run.


# Cheap bookkeeping runs on the machine driving the workflow, never as a cluster job.
localrules:
    done,


# No params: Snakemake imports pandas, when it is installed, to record any job's params (a
# third of a second of CPU at every session's start); the run reads the same config.
checkpoint session:
    """Validate and freeze the spec, open the worktree, run the baseline tests."""
    input:
        unpack(session_inputs),
    output:
        spec="sessions/{name}/session.yaml",
        setup="sessions/{name}/setup.json",
    log:
        "sessions/{name}/logs/session.log",
    benchmark:
        "sessions/{name}/benchmarks/session.tsv"
    run:
        scripts.session.setup(wildcards, input, output, log, workflow, config)


rule done:
    """Write why the session stopped; the target of every run."""
    input:
        unpack(state()),
        done_inputs,
    output:
        "sessions/{name}/done",
    log:
        "sessions/{name}/logs/done.log",
    benchmark:
        "sessions/{name}/benchmarks/done.tsv"
    run:
        scripts.session.done(wildcards, input, output, log)


rule invalid_session_name:
    """Any session path that is not a valid name: fail with a message saying why."""
    input:
        invalid_session_name,
    output:
        "sessions/{badname}/done",
    log:
        "sessions/_invalid/{badname}.log",
    run:
        raise ValueError(f"invalid session name {wildcards.badname!r}")

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
    params:
        overrides=config,
    run:
        stages.session(wildcards, output, params, log, workflow.basedir)


rule done:
    """Write why the session stopped; the target of every run."""
    input:
        done_inputs,
    output:
        "sessions/{name}/done",
    log:
        "sessions/{name}/logs/done.log",
    benchmark:
        "sessions/{name}/benchmarks/done.tsv"
    run:
        stages.done(wildcards, output, log)


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

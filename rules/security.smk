# security's `fix: true`: after the audit, confirmed critical and high findings go to Green
# one at a time (tests gate each commit), each fix re-checked by the auditor.


rule security_fix:
    """Fix the confirmed critical and high findings on the session branch, re-checked."""
    input:
        unpack(state()),
        decision=final_decision("security-fix.json"),
    output:
        md="sessions/{name}/security-fix.md",
        data="sessions/{name}/security-fix.json",
    log:
        "sessions/{name}/logs/security_fix.log",
    benchmark:
        "sessions/{name}/benchmarks/security_fix.tsv"
    run:
        scripts.security.fix(wildcards, input, output, log)

# Predict: every persona analyses the target as its own job, with no view of the others
# (parallel under --cores N, one cluster job each), then debates in rounds that each see
# every finding; `lens_report` (rules/lens.smk) counts the vote.


rule predict_analysis:
    """One persona's independent review; its brief holds no other persona's work."""
    input:
        unpack(state()),
        "sessions/{name}/session.yaml",
    output:
        "sessions/{name}/predict/{persona}/round-0.json",
    log:
        "sessions/{name}/logs/predict/{persona}/round-0.log",
    benchmark:
        "sessions/{name}/benchmarks/predict/{persona}/round-0.tsv"
    run:
        scripts.predict.analysis(wildcards, input, output, log)


rule predict_debate:
    """One persona's positions in a debate round, after every persona's previous round."""
    input:
        unpack(state()),
        debate_inputs,
    output:
        "sessions/{name}/predict/{persona}/round-{round}.json",
    log:
        "sessions/{name}/logs/predict/{persona}/round-{round}.log",
    benchmark:
        "sessions/{name}/benchmarks/predict/{persona}/round-{round}.tsv"
    run:
        scripts.predict.debate(wildcards, input, output, log)

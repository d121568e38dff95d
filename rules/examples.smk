rule example_repo:
    """Turn a bundled example project into a throwaway git repository to improve."""
    input:
        "examples/{example}",
    output:
        ready="sessions/_examples/{example}.ready",
    log:
        "sessions/_examples/logs/{example}.log",
    benchmark:
        "sessions/_examples/benchmarks/{example}.tsv"
    run:
        scripts.examples.example_repo(input, output, log)

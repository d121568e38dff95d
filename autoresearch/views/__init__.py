"""What a user reads: session.md, results.tsv and ideas.md, `autoresearch status`, and the
report's pages."""

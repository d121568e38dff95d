"""Sanitize keeps a finding's what, where and impact, and drops how to fix it and how it
was found, by the shape of each sentence (advice, a remedy, first-person narrative), not
by a list of phrases: these sets are written apart from the rule, to hold it to them."""

from __future__ import annotations

import pytest

from autoresearch.engine.findings import Finding, clean_text, sanitize

# How to fix it: imperatives, modal advice, a remedy as the subject, labelled fixes.
ADVICE = [
    "A guard clause resolves this.",
    "Wrapping it in try/except would help.",
    "Consider caching the compiled pattern.",
    "Use a context manager for the file handle.",
    "The fix is to check for an empty list first.",
    "Adding a None check before indexing prevents the crash.",
    "It would be better to validate the input at the boundary.",
    "You could memoize the lookup.",
    "Replace the bare except with except ValueError.",
    "A simple `if not values: return 0` would do.",
    "Suggested fix: return early when the list is empty.",
    "This can be fixed by passing a timeout.",
    "Switching to a set would make the lookup O(1).",
    "Ideally the function would raise a ValueError.",
    "One option is to hold the lock for the whole update.",
    "Better to escape the parameters with the driver's placeholders.",
    "Instead of string formatting, use parameterized queries.",
    "Make sure the socket is closed in a finally block.",
    "Parameterized queries eliminate this class of bug.",
    "The simplest remedy is an explicit length check.",
    "Moving the write inside the lock avoids the race.",
    "It's worth adding a timeout here.",
    "Callers ought to pass a copy instead.",
    "Don't reuse the mutable default.",
    "Prefer pathlib over string concatenation.",
    "Recommendation: cap the retry count at five.",
    "An early return for empty input is all that is needed.",
    "Guarding the division with a zero check fixes it.",
    "A lock around the counter is the obvious solution.",
    "Perhaps a bounded queue would be safer.",
    "To avoid this, validate the port before binding.",
    "mean() should check its argument first.",
    "The handler needs to close the connection on every path.",
    "Lowering the limit to 100 would mitigate the memory growth.",
]
# How it was found: first-person and exploration narrative.
NARRATIVE = [
    "I first looked at parser.py, then at the tokenizer.",
    "After running the tests with -k empty, the traceback pointed at mean().",
    "Looking through the call sites, none of them check the result.",
    "We traced the request from the handler down to the query builder.",
    "My first guess was a race, but the logs ruled it out.",
    "On closer inspection the loop runs one time too many.",
    "Grepping for `open(` turned up three unclosed handles.",
    "Initially this looked like a typo.",
    "Running `python -m pytest tests/test_stats.py` reproduces the crash.",
    "I'm fairly sure the cache is never cleared.",
    "This was found while reviewing the retry logic.",
    "Reading the docstring and then the body, the two disagree.",
    "Let me note that the handler reads the body twice.",
    "At first glance the lock seemed to cover the write.",
]
# What is wrong, where, and what it does: each must survive whole.
FACTS = [
    "mean() divides by zero when the list is empty.",
    "parse() returns None for an empty string, and every caller indexes into the result.",
    "The lock is released before the counter is written, so two threads can lose an update.",
    "User input reaches the SQL string unescaped.",
    "The retry loop never sleeps; it spins at full CPU.",
    "Passing None crashes the parser.",
    "Using a mutable default argument shares one list between calls.",
    "The function should return an empty list but raises IndexError.",
    "Callers must hold the lock, but refresh() calls it without.",
    "The cache is never invalidated, so stale prices are served after an update.",
    "Any user can delete another user's files.",
    "An attacker could read any file on the host.",
    "A request with no body would crash the handler.",
    "No timeout is set on the HTTP request, so a slow server hangs the worker.",
    "The error is swallowed by a bare except.",
    "Without a lock, concurrent writes corrupt the file.",
    "Cache entries never expire, so memory grows without bound.",
    "Lock contention stalls the workers under load.",
    "Running two workers at once corrupts the index.",
    "Searching an empty tree raises KeyError.",
    "The guard clause in load() checks the wrong variable.",
    "Check is skipped when the flag is false.",
    "The retry handles the timeout by returning stale data.",
    "Set membership is tested against a list, which is quadratic here.",
    "The fix for CVE-2021-1234 in parse_header() does not cover the second call site.",
    "Data is lost when the process is killed during the write.",
    "I/O errors in read_block() are swallowed.",
    "Users should never see a stack trace, but /login returns one.",
    "Handle leaks on error paths exhaust the file descriptors.",
    "Return value of write() is ignored.",
    "Log messages include the password.",
    "Update of the counter is not atomic.",
    "add() overflows for large integers.",
    "Use after free in the parser corrupts memory.",
    "Escape sequences are passed through unescaped.",
    "The only way to trigger this is to send an empty header.",
    "A single request would be enough to crash the server.",
    "The exploit would work on every release since 2.0.",
    "The header is decoded as US-ASCII, so names with accents are garbled.",
    "The loop variable i is never incremented when `my_list` is empty.",
]


@pytest.mark.parametrize("sentence", ADVICE)
def test_how_to_fix_it_never_reaches_green(sentence):
    assert clean_text(sentence) == "", sentence


@pytest.mark.parametrize("sentence", NARRATIVE)
def test_how_it_was_found_never_reaches_green(sentence):
    assert clean_text(sentence) == "", sentence


@pytest.mark.parametrize("sentence", FACTS)
def test_what_is_wrong_where_and_its_impact_survive(sentence):
    assert clean_text(sentence) == sentence


def test_the_sets_are_large_enough_to_mean_something():
    assert len(ADVICE) + len(NARRATIVE) >= 30 and len(FACTS) >= 15


def test_a_fact_keeps_its_sentences_and_loses_the_advice_between_them():
    text = " ".join([FACTS[0], ADVICE[0], NARRATIVE[0], FACTS[4], ADVICE[1]])
    assert clean_text(text) == f"{FACTS[0]} {FACTS[4]}"


def test_a_clause_of_advice_after_a_fact_is_cut_and_the_fact_kept():
    assert clean_text("mean() divides by zero on []; wrap it in a check.") == (
        "mean() divides by zero on []."
    )
    assert clean_text("The port is never range-checked - validate it at startup.") == (
        "The port is never range-checked."
    )


def test_green_gets_no_advice_in_any_field_of_a_finding():
    finding = Finding(
        id="F-001",
        severity="high",
        title="mean crashes on an empty list",
        location="calc.py:5",
        issue=f"{FACTS[0]} {ADVICE[0]} {NARRATIVE[1]}",
        impact=f"{FACTS[10]} {ADVICE[5]}",
    )
    [passed], _ = sanitize([finding])
    assert passed.issue == FACTS[0] and passed.impact == FACTS[10]
    assert passed.title == "mean crashes on an empty list"


def test_a_fact_after_a_clause_of_advice_is_kept():
    assert clean_text("Wrap it in a check; mean() divides by zero.") == "mean() divides by zero."
    assert clean_text("Fix: mean() divides by zero; add a check.") == ""


def test_a_title_cut_at_its_label_is_never_cut_inside_its_code():
    # A linter's title reads as advice ("should be"), so only the part before a label would
    # be kept; the colon of the code it quotes is no label.
    title = "E713 Test should be `not in` in `if not n in (0, 1):`"
    passed, _ = sanitize([Finding("F-001", "low", title, "a.py:3", "", "")])
    assert clean_text(title) == ""
    assert passed[0].title == title


def test_a_sentence_never_ends_inside_code():
    # `from . import patterns` is one piece of code: split after its ". ", sanitize kept
    # "… unused. import patterns`", a span left open in session.md and the report.
    title = "F401 `.patterns` imported but unused in `from . import patterns`"
    assert clean_text(title) == title
    advised = "F401 `.patterns` imported but unused; consider removing it in `from . import x`"
    assert clean_text(advised) == "F401 `.patterns` imported but unused."
    assert clean_text("It fails. `a. b` is wrong.") == "It fails. `a. b` is wrong."

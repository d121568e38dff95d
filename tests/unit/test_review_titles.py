"""A review set's title says what the set does (`autoresearch finalize`, docs/finalize.md)."""

from __future__ import annotations

from autoresearch.session import finalize
from autoresearch.session.changesets import REFACTOR, ChangeNote, Commit, ReviewLoop
from autoresearch.session.finalize import ReviewSet, set_title
from autoresearch.views.session_report import size_of


def commit(n: int, title: str, kind: str = "", path: str = "") -> Commit:
    files = (path or f"f{n}.py",)
    return Commit(f"{n:040x}", f"fix: [F-{n:03d}] {title}", "", files, ChangeNote(title, (), kind))


def title(*commits: Commit) -> str:
    return set_title(ReviewSet(ReviewLoop("", "b", "0" * 40), list(commits)))


def test_one_rules_fixes_are_named_by_their_purpose_rule_and_count():
    got = title(
        commit(1, "Remove unused import: `os`", "F401"),
        commit(2, "Remove unused import: `sys`", "F401", "f1.py"),
    )
    assert got == "Remove unused import (F401: 2 changes in 1 file)"


def test_the_ruff_backends_reformats_are_called_a_reformat():
    got = title(
        commit(1, "format a.py with ruff format", REFACTOR),
        commit(2, "format b.py with ruff format", REFACTOR),
        commit(3, "Remove unused import: `os`", "F401"),
    )
    assert (
        got == "Reformat with ruff format; remove unused import: `os` (F401: 3 changes in 3 files)"
    )


def test_behaviour_changes_are_each_named_and_never_hidden_behind_a_count():
    got = title(*(commit(n, f"change {n}") for n in range(1, 6)))
    assert got == "change 1; change 2; and 3 other changes"
    assert "more commit" not in got
    mixed = title(commit(1, "guard empty mean"), commit(2, "Remove unused import: `os`", "F401"))
    assert mixed == "guard empty mean; lint fixes (F401)"


def test_a_rules_fixes_whose_titles_say_nothing_without_their_names_say_the_rule():
    got = title(
        commit(1, "Replace with `cond is None`", "E711"),
        commit(2, "Replace with `x is None`", "E711"),
    )
    assert got == "Fix what E711 flags (E711: 2 changes in 2 files)"


def test_a_diffs_size_counts_lines_and_files_and_a_binary_file_as_no_line():
    size = size_of("3\t1\ta.py\n-\t-\tlogo.png\n0\t7\tb.py\n")
    assert (size.added, size.deleted, size.files) == (3, 8, 3)
    assert size.text == "+3 \u22128"


def test_a_rules_fixes_whose_quoted_words_are_their_object_keep_them():
    # `elif` is what is removed, not a name listed after a colon: without it the title
    # read "Remove unnecessary (RET505: ...)" (python-tabulate's narrow session).
    got = title(
        commit(1, "Remove unnecessary `elif`", "RET505"),
        commit(2, "Remove unnecessary `else`", "RET505"),
        commit(3, "Remove unnecessary `elif`", "RET505"),
    )
    assert got == "Remove unnecessary `elif` or `else` (RET505: 3 changes in 3 files)"
    kinds = ["if", "elif", "else", "for", "while"]
    many = title(*(commit(n, f"Remove unnecessary `{k}`", "X1") for n, k in enumerate(kinds, 1)))
    assert many == "Fix what X1 flags (X1: 5 changes in 5 files)"
    # a name quoted at the end is one of those a set lists, not the phrase's object
    names = title(
        commit(1, "Remove unused variable `a`", "F841"),
        commit(2, "Remove unused variable `b`", "F841"),
    )
    assert names == "Remove unused variable (F841: 2 changes in 2 files)"


def test_a_review_commit_carries_the_findings_id_as_a_trailer_not_in_its_subject():
    assert finalize.for_review("fix: [F-003] guard empty mean") == (
        "fix: guard empty mean\n\nAutoresearch-Finding: F-003\n"
    )
    assert finalize.for_review("fix(calc): [F-001, F-002] bound add\n\nwhy it was wrong") == (
        "fix(calc): bound add\n\nwhy it was wrong\n\nAutoresearch-Finding: F-001, F-002\n"
    )
    # A message the harness did not write as `<kind>: [<id>]` is left as it is.
    for message in ("refactor: split imports", "Merge branch 'x'", "fix: [x"):
        assert finalize.for_review(message) == message


def test_rules_whose_fixes_read_alike_are_told_once():
    # more-itertools: "Remove unnecessary `else` or `elif`; remove unnecessary `elif`; remove
    # unnecessary `else` (RET505, RET506, RET508: …)".
    got = title(
        commit(1, "Remove unnecessary `else`", "RET505"),
        commit(2, "Remove unnecessary `elif`", "RET506"),
        commit(3, "Remove unnecessary `elif`", "RET505"),
        commit(4, "Remove unnecessary `else`", "RET508"),
    )
    assert (
        got == "Remove unnecessary `else` or `elif` (RET505, RET506, RET508: 4 changes in 4 files)"
    )


def test_a_change_a_later_commit_wrote_over_whole_is_neither_titled_nor_hidden(tmp_path):
    # isodate's experiment kept a speed-up, then a "comment only" change written over a
    # stale copy of the file, which put the old code back: the pull request was titled after
    # both, for a diff of one comment line.
    from conftest import git, make_repo

    old = "def parse(s):\n    return slow(s)\n"
    repo = make_repo(tmp_path / "r", {"iso.py": old})
    shas = []
    for text in ("def parse(s):\n    return fast(s)\n", "# entry point\n" + old):
        (repo / "iso.py").write_text(text)
        git(repo, "commit", "-qam", "exp")
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    faster = Commit(shas[0], "exp 1", "", ("iso.py",), ChangeNote("Faster parse", ("m: 10 → 6",)))
    comment = Commit(shas[1], "exp 2", "", ("iso.py",), ChangeNote("A comment", ("m: 6 → 4",)))
    landed = {c.sha: c.sha for c in (faster, comment)}  # already replayed: the repo's HEAD
    undone = finalize.undone_in(repo, landed, [faster, comment])
    assert undone == {faster.sha}
    loop = ReviewLoop("", "b", "0" * 40)
    assert set_title(ReviewSet(loop, [faster, comment], undone=undone)) == "A comment"
    assert set_title(ReviewSet(loop, [faster, comment])) == "Faster parse; A comment"


def test_a_change_a_later_commit_built_on_keeps_its_title(tmp_path):
    from conftest import git, make_repo

    repo = make_repo(tmp_path / "r", {"iso.py": "a = 1\nb = 2\n"})
    shas = []
    for text in ("a = 10\nb = 2\n", "a = 10\nb = 20\n"):
        (repo / "iso.py").write_text(text)
        git(repo, "commit", "-qam", "exp")
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    commits = [Commit(s, "x", "", ("iso.py",), ChangeNote(f"c{i}", ())) for i, s in enumerate(shas)]
    assert finalize.undone_in(repo, {s: s for s in shas}, commits) == set()

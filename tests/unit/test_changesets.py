"""The grouping rule of `autoresearch finalize`: which kept commits stay together."""

from __future__ import annotations

from pathlib import Path

from conftest import git, make_repo

from autoresearch.session.changesets import (
    REFACTOR,
    ChangeNote,
    Commit,
    Groups,
    collided_with,
    family,
    group,
    grouped,
    rule_of,
    session_commits,
)

LINES = "".join(f"line {n}\n" for n in range(1, 21))


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def edit(repo: Path, name: str, number: int, text: str) -> str:
    lines = (repo / name).read_text().splitlines(keepends=True)
    lines[number - 1] = text + "\n"
    return "".join(lines)


def sets_of(repo: Path, base: str) -> list[list[str]]:
    commits = session_commits(repo, base, "HEAD")
    return [[commits[i].subject for i in members] for members in group(repo, commits).sets()]


def repo_with(tmp_path: Path) -> tuple[Path, str]:
    repo = make_repo(tmp_path / "r", {"a.txt": LINES, "b.txt": LINES})
    return repo, git(repo, "rev-parse", "HEAD")


def test_commits_in_different_files_are_separate_sets(tmp_path):
    repo, base = repo_with(tmp_path)
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "A")}, "one")
    commit(repo, {"b.txt": edit(repo, "b.txt", 3, "B")}, "two")
    assert sets_of(repo, base) == [["one"], ["two"]]


def test_far_apart_lines_of_one_file_are_separate_sets(tmp_path):
    repo, base = repo_with(tmp_path)
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "top")}, "one")
    commit(repo, {"a.txt": edit(repo, "a.txt", 15, "bottom")}, "two")
    assert sets_of(repo, base) == [["one"], ["two"]]


def test_a_commit_changing_a_line_an_earlier_one_wrote_joins_its_set(tmp_path):
    repo, base = repo_with(tmp_path)
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "first")}, "one")
    commit(repo, {"b.txt": edit(repo, "b.txt", 3, "B")}, "two")
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "second")}, "three")
    assert sets_of(repo, base) == [["one", "three"], ["two"]]


def test_a_change_next_to_an_earlier_one_joins_its_set(tmp_path):
    # A 3-way merge treats neighbouring lines as one change: neither applies alone.
    repo, base = repo_with(tmp_path)
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "first")}, "one")
    commit(repo, {"a.txt": edit(repo, "a.txt", 4, "next")}, "two")
    assert sets_of(repo, base) == [["one", "two"]]


def test_a_pure_insertion_after_an_earlier_change_joins_its_set(tmp_path):
    repo, base = repo_with(tmp_path)
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "first")}, "one")
    lines = (repo / "a.txt").read_text().splitlines(keepends=True)
    commit(repo, {"a.txt": "".join(lines[:3] + ["inserted\n"] + lines[3:])}, "two")
    assert sets_of(repo, base) == [["one", "two"]]


def test_an_edit_of_a_file_an_earlier_commit_created_joins_its_set(tmp_path):
    repo, base = repo_with(tmp_path)
    commit(repo, {"new.txt": LINES}, "create")
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "A")}, "other")
    commit(repo, {"new.txt": edit(repo, "new.txt", 18, "edited")}, "edit")
    assert sets_of(repo, base) == [["create", "edit"], ["other"]]


def test_dependence_is_transitive(tmp_path):
    repo, base = repo_with(tmp_path)
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "x")}, "one")
    commit(repo, {"b.txt": edit(repo, "b.txt", 10, "y")}, "two")
    # Touches a line "one" wrote and a line "two" wrote: all three are one set.
    commit(
        repo,
        {"a.txt": edit(repo, "a.txt", 3, "x2"), "b.txt": edit(repo, "b.txt", 10, "y2")},
        "three",
    )
    assert sets_of(repo, base) == [["one", "two", "three"]]


def test_a_binary_change_joins_every_earlier_commit_of_its_file(tmp_path):
    repo, base = repo_with(tmp_path)
    (repo / "blob.bin").write_bytes(b"\0\1\2")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add blob")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "blob.bin").write_bytes(b"\0\1\3")
    git(repo, "commit", "-qam", "blob one")
    commit(repo, {"a.txt": edit(repo, "a.txt", 3, "A")}, "text")
    (repo / "blob.bin").write_bytes(b"\0\1\4")
    git(repo, "commit", "-qam", "blob two")
    assert sets_of(repo, base) == [["blob one", "blob two"], ["text"]]


def test_the_grouping_is_the_same_on_every_run(tmp_path):
    repo, base = repo_with(tmp_path)
    for n in range(1, 6):
        commit(repo, {"a.txt": edit(repo, "a.txt", 4 * n - 3, f"c{n}")}, f"c{n}")
    commit(repo, {"a.txt": edit(repo, "a.txt", 5, "again")}, "again")
    first = sets_of(repo, base)
    assert first == sets_of(repo, base)
    assert ["c2", "again"] in first


def test_a_commit_that_does_not_apply_is_joined_with_the_latest_one_of_its_files():
    from autoresearch.session.changesets import Commit

    commits = [
        Commit("a", "a", "a", ("x.py",)),
        Commit("b", "b", "b", ("y.py",)),
        Commit("c", "c", "c", ("x.py", "z.py")),
    ]
    assert collided_with(commits, 2, [2]) == 0  # the last earlier commit touching x.py
    assert collided_with(commits, 1, [1]) == 0  # nothing shares y.py: the one before
    assert collided_with(commits, 1, [0, 1]) is None


# --- the sets a reviewer gets (grouped) ------------------------------------------------------


def kept(*kinds: str) -> list[Commit]:
    """Commits with notes of these kinds ("" a behaviour change), no git needed."""
    return [
        Commit(f"{i:040x}", f"c{i}", "", (), ChangeNote(f"c{i}", (), kind))
        for i, kind in enumerate(kinds)
    ]


def grouped_sets(kinds: tuple[str, ...], joined=(), how: str = "kind") -> list[list[int]]:
    groups = Groups(len(kinds))
    for a, b in joined:  # what the lines (or the replay) joined
        groups.join(a, b)
    return grouped(groups, kept(*kinds), how).sets()


def test_fixes_of_one_rule_are_one_set_and_a_behaviour_change_stays_alone():
    assert grouped_sets(("F401", "", "F401", "E711", "")) == [[0, 2], [1], [3], [4]]


def test_a_refactor_that_only_applies_with_a_fix_takes_that_fixs_kind():
    # Boltons: a whole-file format joined with the fix it reformatted must not link every
    # set of refactors into one chain with every fix.
    kinds = ("F811", REFACTOR, "F401", REFACTOR, "F841", "F401")
    assert grouped_sets(kinds, joined=[(0, 1)]) == [[0, 1], [2, 5], [3], [4]]


def test_more_than_four_sets_join_by_rule_family_then_all_mechanical_ones():
    by_family = grouped_sets(("F401", "F841", "E711", "E712", ""))
    assert by_family == [[0, 1], [2, 3], [4]]
    families = ("F401", "E711", "W605", "UP035", "B006", "")
    assert grouped_sets(families) == [[0, 1, 2, 3, 4], [5]]
    # Behaviour changes are never joined to reach four.
    assert len(grouped_sets(("", "", "", "", "", "F401"))) == 6


def noted(*said: tuple[str, str]) -> list[Commit]:
    """Commits with notes of these (kind, title), no git needed."""
    return [
        Commit(f"{i:040x}", f"c{i}", "", (), ChangeNote(title, (), kind))
        for i, (kind, title) in enumerate(said)
    ]


def test_rules_of_one_family_whose_fixes_read_alike_are_one_set():
    # more-itertools' narrow: RET505, RET506 and RET508 ("Remove unnecessary `else`" or
    # "`elif`", after a return, a raise, a break) were three pull requests beside PIE808's.
    commits = noted(
        ("RET505", "Remove unnecessary `else`"),
        ("RET506", "Remove unnecessary `elif`"),
        ("RET505", "Remove unnecessary `elif`"),
        ("RET508", "Remove unnecessary `else`"),
        ("PIE808", "Remove `start` argument"),
    )
    assert grouped(Groups(len(commits)), commits).sets() == [[0, 1, 2, 3], [4]]
    # Another family's fix in the same words is another review.
    commits = noted(
        ("RET505", "Remove unnecessary `else`"), ("SIM300", "Remove unnecessary `else`")
    )
    assert grouped(Groups(2), commits).sets() == [[0], [1]]


def test_one_set_and_per_commit():
    assert grouped_sets(("F401", "", "E711"), how="one") == [[0, 1, 2]]
    assert grouped_sets(("F401", "F401", ""), how="commit") == [[0], [1], [2]]


def test_a_rule_code_opens_a_finding_title_or_there_is_none():
    assert rule_of("F401 `os` imported but unused") == "F401"
    assert rule_of("UP035 Import from `collections.abc`") == "UP035"
    assert rule_of("mean crashes on an empty list") == ""
    assert rule_of("Fix F401 somewhere") == ""
    assert family("UP035") == "UP" and family(REFACTOR) == REFACTOR

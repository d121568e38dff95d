"""Which files the gate's decisive run takes from the change's start (overlay.py), and that
laying them over a worktree and taking them back leaves the index (a staged change) as it was."""

from __future__ import annotations

from pathlib import Path

from conftest import git, make_repo

from autoresearch.gate import overlay
from autoresearch.gate.testrun import PASSED, TestRun
from autoresearch.safety import git as harness_git

START_FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "def test_add():\n    assert 1 + 1 == 2\n",
    "tests/data/expected.txt": "2\n",
    "pkg/test_beside.py": "def test_beside():\n    assert True\n",
    "pkg/mod.py": "X = 1\n",
    "conftest.py": "pytest_plugins = ['plugins.outcomes']\n",
    "plugins/outcomes.py": "# a plugin the conftest names\n",
    "pytest.ini": "[pytest]\naddopts = -p myplug\n",
    "myplug.py": "# a plugin the config names\n",
}


def reference() -> TestRun:
    ids = frozenset({"tests/test_calc.py::test_add", "pkg/test_beside.py::test_beside"})
    return TestRun("pytest", "pytest", PASSED, "", 2, 0, 0, 0, frozenset(), ids, 0, 1.0, "", "s")


def worktree(tmp_path: Path) -> tuple[Path, str]:
    repo = make_repo(tmp_path / "repo", START_FILES)
    place = tmp_path / "wt"
    harness_git.add_detached_worktree(repo, place, "HEAD")
    return place, git(place, "rev-parse", "HEAD")


def change(place: Path, files: dict[str, str | None]) -> None:
    """Stage a change, as per_fix's gate tests one."""
    for path, text in files.items():
        if text is None:
            (place / path).unlink()
        else:
            (place / path).parent.mkdir(parents=True, exist_ok=True)
            (place / path).write_text(text)
    git(place, "add", "-A")


def test_an_untouched_tree_needs_nothing_laid_over_it(tmp_path):
    place, start = worktree(tmp_path)
    change(place, {"calc.py": "def add(a, b):\n    return b + a\n", "pkg/mod.py": "X = 2\n"})
    laid = overlay.plan(place, start, reference())
    assert laid is not None and laid.empty


def test_every_file_that_defines_or_configures_the_start_tests_is_taken_from_the_start(tmp_path):
    place, start = worktree(tmp_path)
    edits = {p: "# edited\n" for p in START_FILES if p not in ("calc.py", "pkg/mod.py")}
    change(place, edits | {"calc.py": "# source\n", "pkg/mod.py": "# source beside a test\n"})
    laid = overlay.plan(place, start, reference())
    assert sorted(laid.restore) == sorted(edits)  # source, even beside a test, is the change's


def test_what_the_change_added_that_runs_by_itself_is_taken_away_and_new_source_stays(tmp_path):
    # The change's new tests run in the second run, as it left them; in the start's run a new
    # test module would run first and could rebind the code the start's tests call.
    place, start = worktree(tmp_path)
    added = {
        "tests/conftest.py": "# new\n",
        "sub/setup.cfg": "[tool:pytest]\n",
        "tox.ini": "[pytest]\n",
        "tests/test_new.py": "def test_new():\n    pass\n",
        "tests/data/more.txt": "3\n",
        "test_top.py": "import calc\n",
        "pkg/__init__.py": "import calc\n",
        "passer.dist-info/entry_points.txt": "[pytest11]\np = passer\n",
        "sitecustomize.py": "import calc\n",
        "lib/helper.py": "X = 1\n",
        "lib/__init__.py": "",
    }
    change(place, added)
    laid = overlay.plan(place, start, reference())
    assert laid.remove == (
        "passer.dist-info/entry_points.txt",
        "pkg/__init__.py",  # above the start's pkg/test_beside.py: run when it is imported
        "sitecustomize.py",
        "sub/setup.cfg",
        "test_top.py",
        "tests/conftest.py",
        "tests/data/more.txt",
        "tests/test_new.py",
        "tox.ini",
    )
    assert laid.restore == {}


def test_a_deleted_test_file_comes_back_for_the_run(tmp_path):
    place, start = worktree(tmp_path)
    change(place, {"tests/test_calc.py": None})
    laid = overlay.plan(place, start, reference())
    assert list(laid.restore) == ["tests/test_calc.py"]
    overlay.apply(place, laid)
    assert (place / "tests/test_calc.py").read_text() == START_FILES["tests/test_calc.py"]
    overlay.take_back(place, laid)
    assert not (place / "tests/test_calc.py").exists()


def test_laying_over_and_taking_back_leaves_the_staged_change_as_it_was(tmp_path):
    place, start = worktree(tmp_path)
    change(place, {"tests/test_calc.py": "def test_add():\n    assert True\n", "pytest.ini": ""})
    change(place, {"conftest.py": "# new\n", "tests/conftest.py": "# added\n"})
    staged = git(place, "write-tree")
    laid = overlay.plan(place, start, reference())
    overlay.apply(place, laid)
    assert (place / "pytest.ini").read_text() == START_FILES["pytest.ini"]
    assert not (place / "tests/conftest.py").exists()
    assert git(place, "write-tree") == staged  # the index never moved
    overlay.take_back(place, laid)
    # Nothing differs from the index and nothing is left outside it.
    assert git(place, "diff", "--name-only") == ""
    assert git(place, "ls-files", "--others") == ""
    assert (place / "tests/conftest.py").read_text() == "# added\n"


def test_an_edited_test_is_named_and_a_new_one_beside_it_is_not(tmp_path):
    place, start = worktree(tmp_path)
    edited = "def test_add():\n    assert 1 + 1 == 3 or True\n\n\ndef test_more():\n    assert 1\n"
    change(place, {"tests/test_calc.py": edited})
    laid = overlay.plan(place, start, reference())
    assert laid.edited == {"tests/test_calc.py::test_add": "its code differs from the start's"}
    allowed = overlay.plan(place, start, reference(), allow_edits=True)
    assert "tests/test_calc.py" not in allowed.restore
    assert allowed.edited == laid.edited


def test_a_reformatted_test_is_no_edit(tmp_path):
    place, start = worktree(tmp_path)
    change(place, {"tests/test_calc.py": "def test_add():\n\n    assert 1+1 == 2  # same\n"})
    laid = overlay.plan(place, start, reference())
    assert laid.edited == {}
    assert list(laid.restore) == ["tests/test_calc.py"]


def test_a_start_run_that_names_no_test_lays_nothing(tmp_path):
    # A runner read by its exit code alone names no file: nothing can be laid (Go's, Jest's
    # and cargo's runs are test_runner_overlay.py's).
    place, start = worktree(tmp_path)
    change(place, {"tests/test_calc.py": "def test_add():\n    assert True\n"})
    unnamed = TestRun(
        "make check",
        "make check",
        PASSED,
        "",
        None,
        None,
        None,
        None,
        None,
        None,
        0,
        1.0,
        "",
        "exit-code-only",
    )
    assert overlay.plan(place, start, unnamed) is None

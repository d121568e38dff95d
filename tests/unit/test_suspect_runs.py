"""A batch gate's bisection step, and its early run, run only some tests through pytest's
`--lf` (StageEnv.measure_only): what it runs, how it is filed, and when the stack cannot
tell; which tests touch a change (stack.touching_tests)."""

from __future__ import annotations

import pytest
from conftest import git
from test_tested_trees import Session

from autoresearch.engine import stage as stages
from autoresearch.session.stack import last_failed_command, touching_tests

SECOND = "def test_other():\n    assert True\n"


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = Session(tmp_path)
    s.write("tests/test_other.py", SECOND)
    git(s.wt, "add", "-A")
    s.commit()
    return s


def test_only_the_chosen_tests_run_filed_under_the_tree_and_the_choice_never_as_the_suite(
    session,
):
    run = session.env.measure_only(frozenset({"tests/test_other.py::test_other"}))
    assert run is not None and run.ok
    assert run.passing_ids == {"tests/test_other.py::test_other"}  # test_value did not run
    assert "--lf" in run.ran
    [entry] = session.recorded()
    assert entry["tree"] == git(session.wt, "rev-parse", "HEAD^{tree}")
    assert entry["selection"] and "--lf" in entry["command"]
    # A run of some tests never stands for the suite's run of the same tree.
    assert session.env.tested_before() is None
    assert session.env.measure_tests(uncached=True, reuse=True).passed == 2
    assert len(session.runs) == 1


def test_the_same_tests_on_the_same_tree_are_not_run_again(session, monkeypatch):
    ran: list[str] = []
    real = stages.testrun.run_tests

    def counted(command, *args, **options):
        ran.append(command)
        return real(command, *args, **options)

    monkeypatch.setattr(stages.testrun, "run_tests", counted)
    chosen = frozenset({"tests/test_other.py::test_other"})
    first = session.env.measure_only(chosen)
    again = session.env.measure_only(chosen)
    assert len(ran) == 1 and again.passing_ids == first.passing_ids
    # Another choice on that tree is another run.
    session.env.measure_only(chosen | {"tests/test_value.py::test_value"})
    assert len(ran) == 2


def test_a_committed_pytest_cache_is_never_written_through(session, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (session.wt / ".pytest_cache").symlink_to(outside)
    git(session.wt, "add", "-f", ".pytest_cache")
    session.commit()
    assert session.env.measure_only(frozenset({"tests/test_other.py::test_other"})) is None
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        "make test",
        "python -m pytest -q -p no:cacheprovider",
        "pytest --lf",  # the command picks tests by the cache itself
        "pytest --cache-clear",
    ],
)
def test_a_command_whose_tests_cannot_be_picked_by_the_cache_gets_none(command):
    assert last_failed_command(command) is None


def test_pytest_gets_lf_with_nothing_run_when_nothing_is_listed():
    assert last_failed_command("python -m pytest -q tests") == (
        "python -m pytest --lf --lfnf=none -q tests"
    )


IDS = [
    "tests/test_calc.py::test_add",
    "tests/test_calc.py::TestMean::test_empty",
    "pkg/calc.py::pkg.calc.add",  # a doctest of the module itself
    "tests/test_io.py::test_read",
    "tests/unit/parse_test.py::test_parse",
    "tests/test_init.py::test_import",
]


def test_the_tests_of_a_change_are_its_own_file_and_the_files_named_for_its_modules():
    assert touching_tests(["pkg/calc.py", "pkg/parse.py"], IDS) == {
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::TestMean::test_empty",
        "pkg/calc.py::pkg.calc.add",
        "tests/unit/parse_test.py::test_parse",
    }
    assert touching_tests(["tests/test_io.py", "README.md"], IDS) == {"tests/test_io.py::test_read"}
    # A package's __init__ names no test file (test___init__.py is nobody's).
    assert touching_tests(["pkg/__init__.py"], IDS) == set()

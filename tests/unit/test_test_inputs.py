"""What the start's tests read outside their folders is graded as the start had it: the report
plugin logs each file a test (or a test helper) reads and each module a test imports
(report_plugin._Inputs), and the overlay lays the start's version of each over a change
(overlay.inputs); and code under test cannot tell a test run by pytest's variables.

Each attack is a broken function plus an edit to what its test reads, so that the change as it
left its files passes; the graded run (the start's inputs laid over it) must fail. Each honest
change (the code under test, its own package data) must keep passing. Real pytest on temp
repositories, unjailed.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, make_repo

from autoresearch.gate import overlay, testrun
from autoresearch.gate.testrun import FAILED, PASSED, TestRun
from autoresearch.safety import git as harness_git
from autoresearch.session import spec

PYTEST = f"{sys.executable} -m pytest -q"

CALC = """\
import json
import os


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def total(values):
    return sum(values)


def load_case(name):
    with open(os.path.join("fix" + "tures", name)) as f:
        return json.load(f)
"""
BROKEN = CALC.replace("ordered[len(ordered) // 2]", "ordered[-1]").replace(
    "return sum(values)", "return sum(values) + 1"
)
DATA = '{"values": [3, 1, 2], "expected": 2}\n'
WRONG_DATA = '{"values": [3, 1, 2], "expected": 3}\n'
SUPPORT = """\
import json


def close(a, b):
    return abs(a - b) < 1e-9


def case(name):
    return json.loads(open("fixtures/" + name).read())
"""
WEAK_SUPPORT = SUPPORT.replace("return abs(a - b) < 1e-9", "return True")

# One test per way a test reaches what it reads.
READERS = {
    "pathlib": (
        "import json, pathlib\nfrom calc import median\n\n\ndef test_it():\n"
        "    case = json.loads(pathlib.Path('fixtures/median.json').read_text())\n"
        "    assert median(case['values']) == case['expected']\n"
    ),
    "os-open-built-path": (
        "import json, os\nfrom calc import median\n\n\ndef test_it():\n"
        "    fd = os.open(os.path.join('fix' + 'tures', 'med' + 'ian.json'), os.O_RDONLY)\n"
        "    case = json.loads(os.read(fd, 4096))\n    os.close(fd)\n"
        "    assert median(case['values']) == case['expected']\n"
    ),
    "package-loader": (
        "from calc import load_case, median\n\n\ndef test_it():\n"
        "    case = load_case('median.json')\n"
        "    assert median(case['values']) == case['expected']\n"
    ),
    "test-helper-reads": (
        "from calc import median\nfrom testing_support import case\n\n\ndef test_it():\n"
        "    data = case('median.json')\n    assert median(data['values']) == data['expected']\n"
    ),
}
HELPERS = {
    "imported-at-the-top": (
        "from calc import total\nfrom testing_support import close\n\n\ndef test_it():\n"
        "    assert close(total([1, 2]), 3)\n"
    ),
    "imported-inside-the-test": (
        "from calc import total\n\n\ndef test_it():\n"
        "    from testing_support import close\n\n    assert close(total([1, 2]), 3)\n"
    ),
    "imported-by-a-computed-name": (
        "import importlib\n\nfrom calc import total\n\n\ndef test_it():\n"
        "    close = importlib.import_module('testing_' + 'support').close\n"
        "    assert close(total([1, 2]), 3)\n"
    ),
}


def start_place(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str, TestRun]:
    """A worktree of a repository holding `files`, and the run at the change's start."""
    repo = make_repo(tmp_path / "repo", files)
    place = tmp_path / "wt"
    harness_git.add_detached_worktree(repo, place, "HEAD")
    reference = run(place)
    assert reference.ok, reference.tail
    return place, git(place, "rev-parse", "HEAD"), reference


def run(place: Path) -> TestRun:
    return testrun.run_tests(PYTEST, place, stack="Python", timeout_s=300)


def graded(place: Path, start: str, reference: TestRun, files: dict[str, str]):
    """The change staged (as per_fix's gate tests one), its run as it left its files, and
    the run with the start's files laid over it."""
    for path, text in files.items():
        (place / path).parent.mkdir(parents=True, exist_ok=True)
        (place / path).write_text(text)
    git(place, "add", "-A")
    as_left = run(place)
    laid = overlay.plan(place, start, reference)
    assert laid is not None
    return as_left, laid, overlay.run_laid(place, laid, lambda: run(place), PYTEST)


def base(test: str) -> dict[str, str]:
    return {
        "calc.py": CALC,
        "testing_support.py": SUPPORT,
        "fixtures/median.json": DATA,
        "tests/test_it.py": test,
    }


def test_expected_data_a_test_reads_is_laid_over_however_it_is_opened(tmp_path):
    for way, test in READERS.items():
        place, start, reference = start_place(tmp_path / way, base(test))
        assert any(path == "fixtures/median.json" for _, path in reference.test_inputs), way
        change = {"calc.py": BROKEN, "fixtures/median.json": WRONG_DATA}
        as_left, laid, run_ = graded(place, start, reference, change)
        assert as_left.ok, way  # the attack: the edited data hides the break
        assert "fixtures/median.json" in laid.inputs, way
        assert run_.outcome == FAILED and run_.failing_ids == {"tests/test_it.py::test_it"}, way


def test_a_test_helper_outside_the_test_folders_is_laid_over_however_it_is_imported(tmp_path):
    for way, test in HELPERS.items():
        place, start, reference = start_place(tmp_path / way, base(test))
        change = {"calc.py": BROKEN, "testing_support.py": WEAK_SUPPORT}
        as_left, laid, run_ = graded(place, start, reference, change)
        assert as_left.ok, way
        assert laid.inputs == ("testing_support.py",), way
        assert run_.outcome == FAILED and run_.failing_ids == {"tests/test_it.py::test_it"}, way


def test_the_code_under_test_is_never_laid_over_though_the_tests_import_it(tmp_path):
    place, start, reference = start_place(tmp_path, base(HELPERS["imported-at-the-top"]))
    assert ("import", "calc.py") in reference.test_inputs  # logged, and still editable
    fixed = CALC.replace("return sum(values)", "return sum(values[:])")
    _, laid, run_ = graded(place, start, reference, {"calc.py": fixed})
    assert laid.empty
    broken = {"calc.py": BROKEN}
    _, laid, run_ = graded(place, start, reference, broken)
    assert laid.empty and run_.outcome == FAILED  # graded on the change's calc, not the start's


PACKAGE = {
    "pkg/__init__.py": (
        "import json, os\n\n\ndef rate():\n"
        "    here = os.path.dirname(__file__)\n"
        "    return json.load(open(os.path.join(here, 'table.json')))['rate'] * 2\n"
    ),
    "pkg/table.json": '{"rate": 2}\n',
    "tests/test_pkg.py": "from pkg import rate\n\n\ndef test_rate():\n    assert rate() == 4\n",
}


def test_a_packages_own_data_changed_with_its_code_stays_the_changes(tmp_path):
    place, start, reference = start_place(tmp_path, PACKAGE)
    assert ("read-via-code", "pkg/table.json") in reference.test_inputs
    honest = {
        "pkg/__init__.py": PACKAGE["pkg/__init__.py"].replace("['rate'] * 2", "['rate']"),
        "pkg/table.json": '{"rate": 4}\n',
    }
    as_left, laid, run_ = graded(place, start, reference, honest)
    assert as_left.ok and laid.empty and run_.ok


def test_a_file_a_test_writes_is_no_input(tmp_path):
    test = (
        "from pathlib import Path\n\n\ndef test_it():\n"
        "    Path('out.txt').write_text('x')\n    with open('notes.md', 'a') as f:\n"
        "        f.write('more')\n"
    )
    _, _, reference = start_place(tmp_path, {"notes.md": "hi\n", "tests/test_w.py": test})
    assert reference.test_inputs == frozenset()


def test_a_run_records_its_inputs_and_reads_them_back(tmp_path):
    _, _, reference = start_place(tmp_path, base(READERS["pathlib"]))
    again = TestRun.from_record(reference.to_record())
    assert again.test_inputs == reference.test_inputs
    assert ("read", "fixtures/median.json") in again.test_inputs


RIGHT_ONLY_UNDER_PYTEST = """\
import os


def half(x):
    if "PYTEST_CURRENT_TEST" in os.environ or os.environ.get("PYTEST_VERSION"):
        return x / 2
    return x / 3
"""


def test_code_cannot_tell_a_test_run_by_pytests_variables(tmp_path):
    test = "from calc import half\n\n\ndef test_half():\n    assert half(4) == 2\n"
    repo = make_repo(tmp_path / "r", {"calc.py": RIGHT_ONLY_UNDER_PYTEST, "tests/test_h.py": test})
    bare = subprocess.run([sys.executable, "-m", "pytest", "-q"], cwd=repo, check=False)
    assert bare.returncode == 0  # the attack works where pytest runs by itself
    run_ = run(repo)
    assert run_.outcome == FAILED and run_.failing_ids == {"tests/test_h.py::test_half"}


def test_hiding_pytests_variables_is_no_changed_runner(tmp_path):
    test = "import os\n\n\ndef test_env():\n    assert 'PYTEST_CURRENT_TEST' not in os.environ\n"
    repo = make_repo(tmp_path / "r", {"tests/test_env.py": test})
    assert run(repo).outcome == PASSED


def test_a_helper_named_in_test_support_is_laid_over_and_one_not_named_is_not(tmp_path):
    test = (
        "from calc import total\nfrom helpers import close\n\n\ndef test_it():\n"
        "    assert close(total([1, 2]), 3)\n"
    )
    files = {"calc.py": CALC, "helpers.py": SUPPORT, "tests/test_it.py": test}
    place, start, reference = start_place(tmp_path, files)
    change = {"calc.py": BROKEN, "helpers.py": WEAK_SUPPORT}
    for path, text in change.items():
        (place / path).write_text(text)
    git(place, "add", "-A")
    # `helpers` says nothing of tests: the code under test is imported the same way.
    assert overlay.plan(place, start, reference).empty
    laid = overlay.plan(place, start, reference, support=("helpers.py",))
    assert laid.inputs == ("helpers.py",)
    run_ = overlay.run_laid(place, laid, lambda: run(place), PYTEST)
    assert run_.outcome == FAILED and run_.failing_ids == {"tests/test_it.py::test_it"}


def test_test_support_is_a_list_of_globs_checked_like_protected():
    spec.check_values(spec.Spec(values={"test_support": ["helpers.py", "golden/**"]}))
    with pytest.raises(spec.SpecError, match="key 'test_support': pattern '../x.py' points"):
        spec.check_values(spec.Spec(values={"test_support": ["../x.py"]}))
    with pytest.raises(spec.SpecError, match="key 'test_support': pattern '.z-a..py' is not"):
        spec.check_values(spec.Spec(values={"test_support": ["[z-a].py"]}))


def test_with_allow_test_edits_edited_expected_data_runs_as_the_change_left_it_and_is_named(
    tmp_path,
):
    place, start, reference = start_place(tmp_path, base(READERS["pathlib"]))
    honest = {
        "calc.py": CALC.replace("ordered[len(ordered) // 2]", "ordered[-1]"),
        "fixtures/median.json": WRONG_DATA,  # a new expectation, as a test edit would make
    }
    as_left, _, strict = graded(place, start, reference, honest)
    assert as_left.ok and strict.outcome == FAILED
    laid = overlay.plan(place, start, reference, allow_edits=True)
    assert laid.empty
    assert "fixtures/median.json" in laid.edited


SQLITE_TEST = """\
import json
import sqlite3

from calc import median


def test_it():
    row = sqlite3.connect("fixtures/cases.db").execute("select v from c").fetchone()
    case = json.loads(row[0])
    assert median(case["values"]) == case["expected"]
"""


def _database(path: Path, case: str) -> None:
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("create table c (v text)")
        db.execute("insert into c values (?)", (case,))
    db.close()


def test_expected_data_in_a_database_sqlite_opens_is_laid_over(tmp_path):
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "tests/test_it.py": SQLITE_TEST})
    _database(repo / "fixtures/cases.db", DATA)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "cases")
    place = tmp_path / "wt"
    harness_git.add_detached_worktree(repo, place, "HEAD")
    reference = run(place)
    assert ("read", "fixtures/cases.db") in reference.test_inputs
    _database(place / "fixtures/cases.db", WRONG_DATA)
    as_left, laid, run_ = graded(
        place, git(place, "rev-parse", "HEAD"), reference, {"calc.py": BROKEN}
    )
    assert as_left.ok and laid.inputs == ("fixtures/cases.db",)
    assert run_.outcome == FAILED


APP = {
    "app.py": (
        "def page(name):\n    with open('templates/page.txt') as f:\n"
        "        return f.read().format(who=name)\n"
    ),
    "templates/page.txt": "hello {who}\n",
    "tests/test_app.py": "from app import page\n\n\ndef test_page():\n"
    "    assert page('x') == 'hello x\\n'\n",
}


def test_a_template_the_code_reads_for_users_changed_with_the_code_stays_the_changes(tmp_path):
    place, start, reference = start_place(tmp_path, APP)
    assert ("read-via-code", "templates/page.txt") in reference.test_inputs
    honest = {
        "app.py": APP["app.py"].replace("who=name", "person=name"),
        "templates/page.txt": "hello {person}\n",
    }
    as_left, laid, run_ = graded(place, start, reference, honest)
    assert as_left.ok and laid.empty and run_.ok


def test_an_xdist_worker_hides_pytests_variables_too(tmp_path):
    pytest.importorskip("xdist")
    test = "from calc import half\n\n\ndef test_half():\n    assert half(4) == 2\n"
    repo = make_repo(tmp_path / "r", {"calc.py": RIGHT_ONLY_UNDER_PYTEST, "tests/test_h.py": test})
    command = f"{sys.executable} -m pytest -q -n 2 -p xdist"
    run_ = testrun.run_tests(command, repo, stack="Python", timeout_s=300)
    assert run_.outcome == FAILED, run_.tail

"""The tamper screen every mode runs (tamper.Screen, profiles `gate` and `measure`): what
can turn a test run's verdict or a metric is flagged in every file; what honest library
and test code does (printing in a test, mocking, importing inspect, a dependency bumped in
pyproject.toml) is not. The experiment profile (`full`) is tested in test_tamper_flags.py."""

from __future__ import annotations

import pytest
from conftest import make_repo

from autoresearch.safety import git as ar_git
from autoresearch.safety import tamper
from autoresearch.safety.protect import Protection, TamperFlagged
from autoresearch.safety.tamper import FULL, GATE, MEASURE, Screen, check_file

LIB = "def mean(values):\n    return sum(values) / len(values)\n"


def flags(new: str, path: str = "lib.py", old: str | None = LIB, profile: str = GATE, **kw):
    return [f.describe() for f in check_file(path, old, new, profile=profile, **kw)]


RUNNER_ATTACKS = [
    # The runner's reports rewritten from the code under test.
    "import sys\nr = sys.modules.get('_pytest.reports')\n",
    "import _pytest.reports\n",
    "from _pytest import runner\n",
    "import pluggy\n",
    "import pytest\npytest.TestReport.outcome = 'passed'\n",
    "def pytest_runtest_makereport(item, call):\n    pass\n",
    "pytest_plugins = ['evil']\n",
    "import unittest\nunittest.TestResult.wasSuccessful = lambda self: True\n",
    "import importlib\nm = importlib.import_module('_pytest.junitxml')\n",
]


@pytest.mark.parametrize("profile", [GATE, MEASURE, FULL])
@pytest.mark.parametrize("source", RUNNER_ATTACKS)
def test_code_that_reaches_the_test_runner_is_flagged_in_every_profile(source, profile):
    found = check_file("lib.py", LIB, LIB + source, profile=profile)
    assert "runner" in {f.check for f in found}, source


@pytest.mark.parametrize("path", ["lib.py", "tests/test_lib.py"])
@pytest.mark.parametrize(
    "source",
    [
        "import atexit\natexit.register(lambda: None)\n",
        "import os\nos._exit(0)\n",
        "import builtins\nbuiltins.print = len\n",
        "import sys\nsys.settrace(lambda *a: None)\n",
        "import gc\nx = gc.get_objects()\n",
        "import sys\nf = sys._getframe(1).f_globals\n",
        "import sys\nsys.meta_path.insert(0, object())\n",
    ],
)
def test_a_test_gate_flags_exit_builtins_and_frames_in_code_and_tests(source, path):
    assert flags(LIB + source, path=path, old=LIB), (path, source)


@pytest.mark.parametrize(
    "source",
    [
        "import json\njson.dumps = str\n",
        "import time\ntime.perf_counter = lambda: 0.0\n",
        "import sys\nsys.modules['json'] = object()\n",
        "exec('x = 1')\n",
    ],
)
def test_a_test_gate_flags_patching_modules_and_clocks_in_library_code(source):
    assert flags(LIB + source), source
    assert not flags(LIB + source, path="tests/test_lib.py"), "a test may patch"


HONEST = [
    "import inspect\nSIG = inspect.signature(sum)\n",
    "import subprocess\n\ndef run():\n    return subprocess.run(['ls'])\n",
    "import sys\n\ndef main():\n    print('done')\n    sys.stdout.write('x')\n    sys.exit(1)\n",
    "import importlib\nm = importlib.import_module('json')\n",
    "import importlib.metadata\nV = importlib.metadata.version('lib')\n",
    "import os\nHOME = os.environ.get('HOME')\n",
    "import sys\nARGS = sys.argv[1:]\n",
    "import builtins\nB = builtins.len\n",
    "import gc\ngc.collect()\n",
]


@pytest.mark.parametrize("source", HONEST)
def test_honest_library_code_passes_the_test_gate(source):
    assert flags(LIB + source) == []


@pytest.mark.parametrize(
    "source",
    [
        "from unittest import mock\n\n\ndef test_x():\n    with mock.patch('json.dumps'):\n"
        "        print('hi')\n",
        "import os\nimport sys\n\n\ndef test_x(monkeypatch):\n    os.environ['A'] = '1'\n"
        "    sys.modules.pop('json', None)\n",
        "import pytest\n\n\ndef pytest_generate_tests(metafunc):\n    pass\n",
        "import pytest\n\n\n@pytest.fixture\ndef f():\n    return 1\n",
    ],
)
def test_honest_test_code_passes_the_test_gate(source):
    assert flags(source, path="tests/test_lib.py", old="") == []


def test_the_measure_profile_also_flags_output_and_the_environment_of_library_code():
    printing = LIB + "print(0)\n"
    assert flags(printing, profile=MEASURE) == ["lib.py:3: prints (output)"]
    assert flags(printing, profile=GATE) == []
    env = LIB + "import os\nos.environ['N'] = '1'\n"
    assert flags(env, profile=MEASURE) and not flags(env, profile=GATE)


PYPROJECT = """\
[project]
name = "lib"
version = "1.0"
dependencies = ["attrs"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def test_a_shared_config_is_flagged_only_where_it_configures_the_runner():
    bumped = PYPROJECT.replace('"1.0"', '"1.1"').replace('["attrs"]', '["attrs", "pytest>=8"]')
    assert flags(bumped, path="pyproject.toml", old=PYPROJECT) == []
    addopts = PYPROJECT + 'addopts = "-p evil"\n'
    assert flags(addopts, path="pyproject.toml", old=PYPROJECT) == [
        "pyproject.toml:8: pyproject.toml is loaded without being imported (startup)"
    ]
    entry = PYPROJECT + '\n[project.entry-points.pytest11]\nevil = "lib.evil"\n'
    assert flags(entry, path="pyproject.toml", old=PYPROJECT)
    assert flags(PYPROJECT, path="pyproject.toml", old=None), "a new one is flagged whole"
    # Experiment's profile flags any change to it, as before.
    assert flags(bumped, path="pyproject.toml", old=PYPROJECT, profile=FULL)


@pytest.mark.parametrize(
    "path,evaluator",
    [
        ("statistics.py", []),
        ("pytest.py", []),
        ("_pytest/__init__.py", []),
        ("tests/json.py", []),
        ("bench/statistics.py", ["bench/measure.py"]),
    ],
)
def test_a_new_file_shadowing_a_standard_or_runner_module_where_it_is_imported_is_flagged(
    path, evaluator
):
    found = check_file(path, None, "x = 1\n", evaluator, profile=GATE)
    assert [f.check for f in found] == ["shadowing"], found


def test_a_module_inside_a_package_named_like_a_standard_one_shadows_nothing():
    assert check_file("lib/json.py", None, "x = 1\n", profile=GATE) == []
    assert check_file("lib/json.py", None, "x = 1\n", ["bench/measure.py"], profile=GATE) == []


def test_a_module_named_like_an_installed_one_the_process_imports_is_flagged():
    found = check_file("numpy.py", None, "x = 1\n", profile=GATE, installed=frozenset({"numpy"}))
    assert [f.detail for f in found] == ["adds 'numpy', an installed module it imports"]


def session_worktree(tmp_path):
    repo = make_repo(tmp_path / "r", {"lib.py": LIB})
    wt = tmp_path / "wt"
    ar_git.open_worktree(repo, wt, "autoresearch/improve", ar_git.head(repo))
    return wt


def test_protection_refuses_a_flagged_staged_change_naming_line_and_check(tmp_path):
    repo = session_worktree(tmp_path)
    base = ar_git.head(repo)
    guarded = Protection(base, (), Screen(GATE))
    (repo / "lib.py").write_text(LIB + "import os\nos._exit(0)\n")
    with pytest.raises(TamperFlagged) as err:
        guarded.commit(repo, "fix")
    assert "lib.py:4: uses os._exit (output)" in err.value.reason
    assert "allow_tamper_flags: [output]" in err.value.reason
    assert ar_git.head(repo) == base and (repo / "lib.py").read_text() == LIB


def test_protection_keeps_an_allowed_flag_and_says_so(tmp_path):
    repo = session_worktree(tmp_path)
    said: list[str] = []
    allowing = Protection(ar_git.head(repo), (), Screen(GATE, frozenset({"output"})), said.append)
    (repo / "lib.py").write_text(LIB + "import os\nos._exit(0)\n")
    assert allowing.commit(repo, "fix") == ar_git.head(repo)
    assert said == ["kept although flagged (allow_tamper_flags): lib.py:4: uses os._exit (output)"]


class EmptiedOnAsking(dict):
    """The screen's cache as another job's thread leaves it: emptied (it kept the 4096th
    answer) right after this one asked whether it holds a key."""

    def __contains__(self, key: object) -> bool:
        held = super().__contains__(key)
        self.clear()
        return held


def test_a_change_screened_again_while_another_thread_empties_the_cache_is_flagged_again(
    tmp_path, monkeypatch
):
    repo = session_worktree(tmp_path)
    (repo / "lib.py").write_text(LIB + "import os\nos._exit(0)\n")
    ar_git.worktree_git(repo, "add", "lib.py")
    screen = Screen(GATE)
    first = screen.flags(repo)
    cache = EmptiedOnAsking(tamper._SCREENED)
    monkeypatch.setattr(tamper, "_SCREENED", cache)
    assert screen.flags(repo) == first and [f.check for f in first] == ["output"]


def test_every_mode_but_experiment_screens_its_changes_through_the_commit_door():
    from autoresearch import modes

    profiles = {name: modes.get(name).tamper_profile for name in modes.MODES}
    assert profiles.pop("experiment") is None  # it screens each proposal with every check
    assert profiles.pop("narrow") == MEASURE and profiles.pop("broad") == MEASURE
    assert set(profiles.values()) == {GATE}, profiles


def test_a_stage_env_hands_its_screen_and_the_specs_allowances_to_the_protection(tmp_path):
    from autoresearch.engine.stage import StageEnv
    from autoresearch.session.spec import SessionSpec

    spec = SessionSpec(
        {"mode": "fix", "protected": ["bench.py", "tests/**"], "allow_tamper_flags": ["output"]}
    )
    env = StageEnv(layout=None, spec=spec, record=None, cycle=1)  # type: ignore[arg-type]
    screen = env.screen
    assert screen.profile == GATE and screen.allowed == frozenset({"output"})
    assert screen.evaluator == ("bench.py",)  # literal paths only: a glob names no file
    assert StageEnv(None, spec, None, 1, tamper_profile=None).screen is None  # type: ignore[arg-type]


def test_a_module_reached_by_a_name_built_at_run_time_is_flagged_its_own_is_not():
    computed = LIB + "import sys\nm = getattr(sys.modules['_py' + 'test.reports'], 'TestReport')\n"
    assert "lib.py:4: uses sys.modules (modules)" in flags(computed)
    own = LIB + "import sys\nthis = sys.modules[__name__]\n"
    assert flags(own) == []

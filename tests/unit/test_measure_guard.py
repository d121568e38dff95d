"""The guard of a Python measurement (measure/guard.py): code under test that changes what the
measuring script measures with, however it reaches it, makes the measurement tampered.

Each test measures a small project whose script computes `statistics.median(work())` and prints
it, with `src.py` (the code under test) written as an attacker would, unjailed and in the bwrap
jail where it works.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_repo

from autoresearch.measure import guard, metrics
from autoresearch.safety import jail

MEASURE = "import statistics\n\nfrom src import work\n\nprint(statistics.median(work()))\n"
COMMAND = "PYTHONPATH=. python bench/measure.py"
HONEST = "def work():\n    return [3, 3, 3]\n"

KINDS = [
    "none",
    pytest.param("bwrap", marks=pytest.mark.skipif(not jail.probe().works, reason="no bwrap")),
]


def measure(tmp_path: Path, src: str, kind: str = "none", command: str = COMMAND, files=None):
    files = {"bench/measure.py": MEASURE, "src.py": src, **(files or {})}
    repo = make_repo(tmp_path / "repo", files)
    box = jail.build_jail({"sandbox": "bwrap"}, repo) if kind == "bwrap" else None
    return metrics.measure(command, repo, jail=box, timeout_s=60)


def tampered(tmp_path: Path, src: str, kind: str = "none") -> str:
    with pytest.raises(metrics.Tampered) as caught:
        measure(tmp_path, src, kind)
    return str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_an_honest_measurement_reads_its_value(tmp_path, kind):
    assert measure(tmp_path, HONEST, kind).value == 3


@pytest.mark.parametrize("kind", KINDS)
def test_a_stdlib_function_patched_through_a_computed_import_is_tampered(tmp_path, kind):
    src = HONEST + (
        "\nimport importlib as _il\n\n"
        '_il.import_module("statis" + "tics").median = lambda values: 0\n'
    )
    said = tampered(tmp_path, src, kind)
    assert "statistics.median (src.py:6)" in said


@pytest.mark.parametrize("kind", KINDS)
def test_print_rebound_through_computed_builtins_is_tampered(tmp_path, kind):
    src = HONEST + (
        "\nimport importlib as _il\n\n"
        '_b = _il.import_module("built" + "ins")\n_p = _b.print\n'
        "_b.print = lambda *a, **k: _p(0)\n"
    )
    assert "builtins.print (src.py:8)" in tampered(tmp_path, src, kind)


def test_a_patch_taken_back_right_after_its_use_is_seen_when_it_is_made(tmp_path):
    # A median that answers once and puts the real one back: at the print and at exit
    # everything is as it was.
    src = HONEST + (
        "\nimport statistics\n\n_real = statistics.median\n\n\n"
        "def _once(values):\n"
        "    statistics.median = _real\n"
        "    return 0\n\n\n"
        "statistics.median = _once\n"
    )
    said = tampered(tmp_path, src)
    assert "statistics.median (src.py:14)" in said
    assert "statistics.median (src.py:10)" in said  # the restore is the code's set too


def test_a_patch_written_into_the_modules_dict_is_seen_at_exit(tmp_path):
    src = HONEST + (
        "\nimport importlib as _il\n\n"
        'vars(_il.import_module("statis" + "tics"))["median"] = lambda values: 0\n'
    )
    assert "statistics.median" in tampered(tmp_path, src)


def test_a_functions_code_swapped_in_place_is_seen(tmp_path):
    src = HONEST + "\nimport statistics\n\nstatistics.median.__code__ = (lambda data: 0).__code__\n"
    assert "statistics.median" in tampered(tmp_path, src)


def test_a_global_that_shadows_a_builtin_inside_a_stdlib_module_is_seen(tmp_path):
    # median calls sorted(); a module global of that name comes first.
    src = HONEST + "\nimport statistics\n\nvars(statistics)['sorted'] = lambda v: [0] * len(v)\n"
    assert "statistics.sorted" in tampered(tmp_path, src)


def test_the_stdlib_module_replaced_in_sys_modules_is_seen(tmp_path):
    src = (
        "import sys, types\n\nfake = types.ModuleType('statistics')\n"
        "fake.median = lambda values: 0\nsys.modules['statistics'] = fake\n\n" + HONEST
    )
    # the script imported the real module first; the guard sees the swap either way
    said = tampered(tmp_path, src)
    assert "sys.modules['statistics']" in said


def test_a_library_helper_setting_the_codes_own_function_is_the_codes_patch(tmp_path):
    src = (
        "import statistics\nfrom unittest import mock\n\n"
        "mock.patch.object(statistics, 'median', lambda values: 0).start()\n\n" + HONEST
    )
    assert "statistics.median (src.py:4)" in tampered(tmp_path, src)


def test_a_stdlib_callable_left_in_place_by_a_library_helper_is_seen_at_exit(tmp_path):
    src = (
        "import statistics\nfrom unittest import mock\n\n"
        "mock.patch.object(statistics, 'median', any).start()\n\n" + HONEST
    )
    assert "statistics.median" in tampered(tmp_path, src)


def test_ending_the_process_before_the_guards_check_is_not_a_pass(tmp_path):
    src = (
        "import atexit, os, sys\n\n"
        "atexit.register(lambda: (sys.stdout.flush(), os._exit(0)))\n\n" + HONEST
    )
    assert "ended without the guard's check" in tampered(tmp_path, src)


def test_a_second_end_written_into_the_guards_pipe_is_not_a_pass(tmp_path):
    src = (
        "import os\n\nfd = int(os.environ['AUTORESEARCH_GUARD_FD'].split(':')[0])\n"
        "os.write(fd, b'end\\t%d\\t\\n' % os.getpid())\n\n" + HONEST
    )
    assert "reported two ends" in tampered(tmp_path, src)


def test_a_temporary_set_by_the_stdlib_itself_is_no_tamper(tmp_path):
    # warnings.catch_warnings rebinds warnings.showwarning and puts it back: honest code.
    src = (
        "import warnings\n\n\ndef work():\n"
        "    with warnings.catch_warnings():\n"
        "        warnings.simplefilter('ignore')\n"
        "    return [3, 3, 3]\n"
    )
    assert measure(tmp_path, src).value == 3


# The script prints through sys.stdout: a stream whose class the code under test wrote, or a
# real text stream over a buffer it wrote, rewrites the figure without rebinding any function.
REWRITING_WRITE = "    def write(self, t):\n        return self.o.write(t.replace('3', '1'))\n"
STREAMS = {
    "its-own-stream": (
        "import importlib\n\n_s = importlib.import_module('s' + 'ys')\n\n\nclass W:\n"
        "    def __init__(self, o):\n        self.o = o\n\n"
        + REWRITING_WRITE
        + "\n    def flush(self):\n        self.o.flush()\n\n\n"
        "setattr(_s, 'std' + 'out', W(_s.stdout))\n"
    ),
    "a-real-stream-over-its-own-buffer": (
        "import importlib\nimport io\n\n_s = importlib.import_module('s' + 'ys')\n\n\n"
        "class B(io.RawIOBase):\n    def writable(self):\n        return True\n\n"
        "    def write(self, b):\n"
        "        return _s.__stdout__.buffer.write(bytes(b).replace(b'3', b'1')) or len(b)\n\n\n"
        "_stream = io.TextIOWrapper(io.BufferedWriter(B()), line_buffering=True)\n"
        "setattr(_s, 'std' + 'out', _stream)\n"
    ),
}


@pytest.mark.parametrize("src", STREAMS.values(), ids=STREAMS)
def test_a_stdout_that_rewrites_what_the_script_prints_is_tampered(tmp_path, src):
    assert "sys.stdout" in tampered(tmp_path, src + "\n\n" + HONEST)


def test_hooks_made_to_be_set_and_a_plain_stdout_rewrapped_are_no_tamper(tmp_path):
    src = (
        "import io\nimport logging\nimport sys\n\n"
        "sys.excepthook = lambda *a: None\n"
        "logging.captureWarnings(True)\n"
        "sys.stdout = io.TextIOWrapper(sys.stdout.buffer, line_buffering=True)\n\n\n" + HONEST
    )
    assert measure(tmp_path, src).value == 3


def test_a_command_that_runs_no_python_is_measured_as_before(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.txt": "x\n"})
    assert metrics.measure("echo 7", repo).value == 7


def test_the_report_reads_each_process_and_every_name_changed():
    data = b"start\t5\nchanged\t5\tstatistics.median\tsrc.py:3\nend\t5\tbuiltins.print\nstart\t6\n"
    verdict = guard.read(data)
    assert verdict.changed == ["statistics.median (src.py:3)", "builtins.print"]
    assert verdict.unchecked == 1
    assert guard.read(b"start\t5\nend\t5\t\n").tampered is False
    assert guard.read(b"start\t5\nend\t5\t\nnoise\n").problem
    assert guard.read(None).problem


def test_an_exec_the_code_under_test_makes_replaces_the_measurement_and_is_tampered(tmp_path):
    src = "import os\n\nos.execv('/bin/echo', ['echo', '0'])\n" + HONEST
    assert "an exec of /bin/echo (src.py:3)" in tampered(tmp_path, src)


def test_the_commands_own_python_that_execs_a_program_is_measured(tmp_path):
    # `python -m ruff` runs the ruff binary by an exec: the command's own code, not the
    # worktree's, so the value stands.
    repo = make_repo(tmp_path / "repo", {"a.txt": "x\n"})
    command = "python -c \"import os; os.execv('/bin/echo', ['echo', '5'])\""
    assert metrics.measure(command, repo).value == 5


def test_code_the_measured_script_runs_itself_may_set_what_it_likes(tmp_path):
    script = "import statistics\n\nstatistics.median = min\nprint(statistics.median([4, 5]))\n"
    repo = make_repo(tmp_path / "repo", {"bench/measure.py": script})
    assert metrics.measure("python bench/measure.py", repo).value == 4


def test_the_guards_exit_check_taken_away_is_not_a_pass(tmp_path):
    src = "import atexit\n\natexit._clear()\n" + HONEST
    assert "ended without the guard's check" in tampered(tmp_path, src)


def test_a_finder_put_before_the_guards_is_seen(tmp_path):
    # Imports it answers would never be held.
    src = "import sys\n\n\nclass Mine:\n    find_spec = staticmethod(lambda *a: None)\n\n\n"
    src += "sys.meta_path.insert(0, Mine)\n" + HONEST
    assert "sys.meta_path" in tampered(tmp_path, src)

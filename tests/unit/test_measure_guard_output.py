"""Output the code under test writes after the measured script's own (measure/guard.py): the
metric's format reads the last line, so a number printed by an `atexit` handler or a thread
once `__main__` has finished would win. The guard seals the script's stdout when `__main__`
ends (before the threads are joined and the `atexit` handlers run): what comes after goes
nowhere, and a way back to the output opened after that point is a change.

Each test measures a small project whose script prints `statistics.median(work())` (3), with
`src.py` written as an attacker would; every name the attack uses is built at run time, so no
screen of the diff reads it.
"""

from __future__ import annotations

import pytest
from conftest import make_repo
from test_measure_guard import COMMAND, HONEST, KINDS, measure, tampered

from autoresearch.measure import metrics

# The module an attack reaches by a name built at run time (the tamper screen's flags miss it).
REACH = "import importlib as _il\n\n_m = _il.import_module\n"

ATTACKS = {
    # an atexit handler registered through a computed name prints the fake figure
    "atexit-print": REACH + "_m('ate' + 'xit').register(print, 0)\n",
    # the same through the descriptor itself, past sys.stdout
    "atexit-os-write": REACH + "_m('ate' + 'xit').register(_m('o' + 's').write, 1, b'0\\n')\n",
    # a copy of the descriptor taken while the script runs, written at exit
    "atexit-saved-descriptor": REACH
    + "_os = _m('o' + 's')\n_fd = _os.dup(1)\n"
    + "_m('ate' + 'xit').register(_os.write, _fd, b'0\\n')\n",
    # a reopened copy of the output, by its /proc name, taken while the script runs
    "atexit-reopened-early": REACH
    + "_out = open('/proc/self/fd/1', 'w')\n"
    + "_m('ate' + 'xit').register(lambda: (_out.write('0\\n'), _out.flush()))\n",
    # a thread (not a daemon: the interpreter joins it) that waits for the main thread's end
    "thread-after-main": REACH
    + "_t = _m('thre' + 'ading')\n"
    + "_t.Thread(target=lambda: (_t.main_thread().join(), print(0, flush=True))).start()\n",
}


@pytest.mark.parametrize("src", ATTACKS.values(), ids=ATTACKS)
def test_a_figure_printed_after_the_script_ends_is_not_read(tmp_path, src):
    assert measure(tmp_path, src + "\n\n" + HONEST).value == 3


@pytest.mark.parametrize("kind", KINDS)
def test_an_atexit_print_is_not_read_in_the_jail_or_out(tmp_path, kind):
    src = ATTACKS["atexit-print"] + "\n\n" + HONEST
    assert measure(tmp_path, src, kind).value == 3


@pytest.mark.parametrize("kind", KINDS)
def test_the_output_opened_again_after_the_script_ended_is_tampered(tmp_path, kind):
    # The sealed process's own descriptors go nowhere; the shell above it still holds the
    # output, reachable by its /proc name.
    src = (
        REACH
        + "_os = _m('o' + 's')\n\n\ndef _late():\n"
        + "    with open('/proc/%d/fd/1' % _os.getppid(), 'w') as f:\n"
        + "        f.write('0\\n')\n\n\n"
        + "_m('ate' + 'xit').register(_late)\n\n\n"
        + HONEST
    )
    assert "output opened again after the script ended" in tampered(tmp_path, src, kind)


def test_the_output_opened_again_through_a_path_object_is_tampered(tmp_path):
    # A path object (pathlib's, or a class of the code's own that could name one file to the
    # guard and another to the open) reaches the guard as the name the open used.
    name = "'/proc/%d/fd/1' % _os.getppid()"
    late = "    _os.write(_os.open(_P(" + name + "), _os.O_WRONLY), b'0\\n')\n"
    own = (
        "\n\nclass _P:\n    def __init__(self, p):\n        self.p = p\n\n"
        "    def __fspath__(self):\n        return self.p\n"
    )
    for n, path_class in enumerate(("_P = _m('path' + 'lib').Path\n", own)):
        src = REACH + "_os = _m('o' + 's')\n" + path_class + "\n\ndef _late():\n" + late
        src += "\n\n_m('ate' + 'xit').register(_late)\n\n\n" + HONEST
        assert "output opened again" in tampered(tmp_path / str(n), src)


def test_the_output_opened_again_from_a_folder_held_open_is_tampered(tmp_path):
    # `os.open` relative to a folder descriptor taken while the script ran: the audit event
    # names the relative path only.
    src = (
        REACH
        + "_os = _m('o' + 's')\n_d = _os.open('/proc/%d' % _os.getppid(), _os.O_RDONLY)\n\n\n"
        + "def _late():\n    _os.write(_os.open('fd/1', _os.O_WRONLY, dir_fd=_d), b'0\\n')\n\n\n"
        + "_m('ate' + 'xit').register(_late)\n\n\n"
        + HONEST
    )
    assert "output opened again" in tampered(tmp_path, src)


def test_a_process_started_after_the_script_ended_is_tampered(tmp_path):
    src = (
        REACH
        + "_m('ate' + 'xit').register(_m('subpro' + 'cess').run, ['echo', '0'])\n\n\n"
        + HONEST
    )
    assert "a process started after the script ended" in tampered(tmp_path, src)


def test_a_patch_taken_back_by_an_atexit_handler_is_seen_when_the_script_ends(tmp_path):
    # Written into the module's namespace (no set to see) and put back before the exit check.
    src = (
        REACH
        + "_s = _m('statis' + 'tics')\n_real = _s.median\nvars(_s)['median'] = min\n"
        + "_m('ate' + 'xit').register(vars(_s).__setitem__, 'median', _real)\n\n\n"
        + "def work():\n    return [1, 3, 3]\n"
    )
    assert "statistics.median" in tampered(tmp_path, src)


# Honest commands: the figure is the script's last line, as before.


@pytest.mark.parametrize("kind", KINDS)
def test_a_python_piped_through_tail_is_measured(tmp_path, kind):
    command = "PYTHONPATH=. python bench/measure.py | tail -1"
    assert measure(tmp_path, HONEST, kind, command).value == 3


def test_a_piped_python_whose_atexit_prints_is_not_read_through_the_pipe(tmp_path):
    command = "PYTHONPATH=. python bench/measure.py | grep -v x"
    src = ATTACKS["atexit-print"] + "\n\n" + HONEST
    assert measure(tmp_path, src, command=command).value == 3


def test_each_python_of_a_shell_seals_only_its_own_output(tmp_path):
    # The later process's figure is read, whichever Python ran first.
    first = "python -c 'print(1)'; " + COMMAND
    assert measure(tmp_path / "a", HONEST, command=first).value == 3
    second = COMMAND + "; python -c 'print(4)'"
    assert measure(tmp_path / "b", HONEST, command=second).value == 4


def test_a_program_after_the_python_prints_the_figure(tmp_path):
    assert measure(tmp_path, HONEST, command=COMMAND + " >/dev/null; echo 6").value == 6


def test_a_script_that_prints_nothing_after_its_figure_and_threads_it_joins(tmp_path):
    # A thread the script starts and joins itself prints before __main__ ends: read as ever.
    script = (
        "import threading\n\nout = []\n"
        "t = threading.Thread(target=lambda: print(8, flush=True))\nt.start()\nt.join()\n"
    )
    repo = make_repo(tmp_path / "repo", {"bench/measure.py": script})
    assert metrics.measure("python bench/measure.py", repo, timeout_s=60).value == 8


def test_stderr_after_the_script_is_left_alone(tmp_path):
    # A warning at shutdown goes to stderr, which the figure is not read from.
    src = REACH + "_m('ate' + 'xit').register(_m('s' + 'ys').stderr.write, 'bye\\n')\n\n\n"
    assert measure(tmp_path, src + HONEST).value == 3


# How the code could take the seal away.

SEAL_TAKEN_AWAY = {
    # the interpreter calls threading._shutdown once __main__ ends: replaced in its namespace
    "shutdown-replaced": REACH
    + "vars(_m('thre' + 'ading'))['_shut' + 'down'] = lambda: None\n"
    + "_m('ate' + 'xit').register(print, 0)\n",
    # the interpreter finds threading in sys.modules: without it, it calls nothing
    "threading-unlisted": REACH
    + "_m('s' + 'ys').modules.pop('thre' + 'ading')\n"
    + "_m('ate' + 'xit').register(print, 0)\n",
}


@pytest.mark.parametrize("src", SEAL_TAKEN_AWAY.values(), ids=SEAL_TAKEN_AWAY)
def test_the_seal_taken_away_is_tampered(tmp_path, src):
    said = tampered(tmp_path, src + "\n\n" + HONEST)
    assert "threading._shutdown" in said or "the output left open" in said

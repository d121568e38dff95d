"""run_tests shows an agent what it acts on: the lines of passing tests are left out (with
their count), never a failure, its traceback or the summary (autoresearch/gate/run_output.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from autoresearch.agents.tools import TEST_OUTPUT_TAIL, Toolbox
from autoresearch.gate.run_output import condense

FAILING = """\
..........s.....x....................................................... [ 40%]
.....F..........................................................E....... [ 80%]
................................                                         [100%]
==================================== ERRORS ====================================
_________________________ ERROR at setup of test_db __________________________
E   fixture 'db' not found
=================================== FAILURES ===================================
__________________________________ test_total __________________________________
    def test_total():
>       assert total([1, 2]) == 3
E       assert 4 == 3
tests/test_shop.py:7: AssertionError
=========================== short test summary info ============================
FAILED tests/test_shop.py::test_total - assert 4 == 3
ERROR tests/test_db.py::test_db
1 failed, 174 passed, 1 skipped, 1 xfailed, 1 error in 0.52s
"""


def test_rows_of_passing_tests_are_left_out_with_their_count():
    out = condense("." * 70 + " [ 50%]\n" + "." * 70 + " [100%]\n140 passed in 0.3s\n")
    assert out == "[2 lines of passing or skipped tests left out]\n140 passed in 0.3s\n"


def test_a_row_showing_a_failure_and_every_failure_line_are_kept_in_place():
    out = condense(FAILING).splitlines()
    assert out[0] == "[2 lines of passing or skipped tests left out]"
    assert out[1].startswith(".....F....") and out[1].endswith("[ 80%]")
    assert out[2:] == FAILING.splitlines()[3:]


def test_verbose_passed_lines_are_left_out_and_failed_and_xpass_kept():
    text = (
        "tests/test_a.py::test_one PASSED                                  [ 25%]\n"
        "tests/test_a.py::test_two[case 1] SKIPPED (no db)                 [ 50%]\n"
        "tests/test_a.py::test_three FAILED                                [ 75%]\n"
        "tests/test_a.py::test_four XPASS                                  [100%]\n"
        "1 failed, 1 passed, 1 skipped, 1 xpassed in 0.1s\n"
    )
    assert condense(text).splitlines() == [
        "[2 lines of passing or skipped tests left out]",
        *text.splitlines()[2:],
    ]


def test_output_without_progress_lines_is_unchanged():
    text = "ok  \texample.com/shop\t0.012s\nFAIL\texample.com/cart\t0.020s\n"
    assert condense(text) == text


def test_run_tests_keeps_an_early_failure_that_passing_lines_would_push_out_of_the_tail(
    tmp_path: Path,
):
    # A -v run: the failure comes first, then enough PASSED lines to fill the tail.
    script = tmp_path / "suite.py"
    passed = "".join(f"tests/test_x.py::test_{n} PASSED{' ' * 40}[ 99%]\\n" for n in range(200))
    script.write_text(
        "import sys\n"
        "print('tests/test_x.py::test_early FAILED')\n"
        "print('E   assert 1 == 2')\n"
        f"sys.stdout.write('{passed}')\n"
        "print('1 failed, 200 passed in 0.2s')\n"
        "sys.exit(1)\n"
    )
    assert len(passed) > TEST_OUTPUT_TAIL
    toolbox = Toolbox("green", tmp_path, test_command=f"{sys.executable} suite.py")
    out = toolbox.call("run_tests", {}).content
    assert "exit code: 1" in out
    assert "test_early FAILED" in out and "E   assert 1 == 2" in out
    assert "[200 lines of passing or skipped tests left out]" in out
    assert out.rstrip().endswith("1 failed, 200 passed in 0.2s")

"""The debug lens confirms a bug only when its reproduction test, run with the target's runner,
fails on the current tree; here on real pytest runs in a temp target."""

from __future__ import annotations

import subprocess
import sys

from autoresearch.modes.lens.reproduction import (
    hypothesis_key,
    judge_reproduction,
)

BUGGY = "def mean(values):\n    return sum(values) / len(values)\n"


def run_reproduction(target, test_source: str):
    scratch = target / ".autoresearch-scratch"
    scratch.mkdir(exist_ok=True)
    (scratch / "test_repro.py").write_text(test_source)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(scratch)],
        cwd=target,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    )
    return judge_reproduction(result.stdout + result.stderr, result.returncode)


def test_a_failing_reproduction_confirms_the_bug(tmp_path):
    (tmp_path / "calc.py").write_text(BUGGY)
    verdict = run_reproduction(
        tmp_path,
        "import pytest\nfrom calc import mean\n\n\ndef test_mean_of_nothing_is_an_error():\n"
        "    with pytest.raises(ValueError):\n        mean([])\n",
    )
    assert verdict.confirmed
    assert verdict.reason.startswith("the reproduction fails: 0 passed, 1 failed")


def test_a_passing_reproduction_leaves_a_lead(tmp_path):
    (tmp_path / "calc.py").write_text(BUGGY)
    verdict = run_reproduction(
        tmp_path, "from calc import mean\n\n\ndef test_mean():\n    assert mean([2, 4]) == 3\n"
    )
    assert verdict.verdict == "not-reproduced"


def test_a_reproduction_that_does_not_load_is_inconclusive(tmp_path):
    (tmp_path / "calc.py").write_text(BUGGY)
    verdict = run_reproduction(tmp_path, "from calc import median\n\n\ndef test_x():\n    pass\n")
    assert verdict.verdict == "inconclusive"
    assert verdict.reason.startswith("the reproduction did not load")


def test_a_timed_out_reproduction_is_inconclusive():
    assert judge_reproduction("", None).verdict == "inconclusive"


def test_a_non_zero_exit_without_a_failed_test_is_inconclusive():
    assert judge_reproduction("Segmentation fault\n", 139).verdict == "inconclusive"


def test_a_reworded_hypothesis_has_the_same_key():
    key = hypothesis_key("I think mean([]) crashes because len is 0; test by mean([]).")
    assert hypothesis_key("i think MEAN([]) crashes, because len is 0 — test by mean([])") == key
    assert hypothesis_key("I think add overflows because of ints; test by add(2**63, 1)") != key

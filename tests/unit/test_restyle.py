"""A change that is mostly a reformat is told apart from one that changes code."""

from __future__ import annotations

import subprocess
import sys

from autoresearch.safety.restyle import MAX_LINES, restyled

# boltons' style: single quotes, hand-wrapped lists, no formatter.
HAND = (
    "import os\nimport re\n\n"
    + "".join(
        f"def f{n}(x, y={{'a': 1, 'b': [1, 2,\n                    3]}}):\n"
        f"    return x + y['a'] + {n}  # keep\n\n\n"
        for n in range(12)
    )
    + "NUMBERS = [1, 2, 3, 4, 5,\n           6, 7, 8]\n"
)


def ruff_format(text: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "-"], input=text, capture_output=True, text=True
    )
    return proc.stdout


def test_a_one_line_fix_with_the_whole_file_formatted_is_a_reformat():
    fixed = HAND.replace("import os\n", "")
    found = restyled("app.py", HAND, ruff_format(fixed))
    assert found is not None and found.lines > MAX_LINES and found.code < found.lines / 3
    assert "rewrites" in found.reason() and "app.py" in found.reason()


def test_the_one_line_fix_alone_is_not():
    assert restyled("app.py", HAND, HAND.replace("import os\n", "")) is None


def test_code_moved_or_rewritten_at_length_is_not_a_reformat():
    lines = HAND.splitlines(True)
    moved = "".join(lines[len(lines) // 2 :] + lines[: len(lines) // 2])
    assert restyled("app.py", HAND, moved) is None
    renamed = HAND.replace("return x + y['a']", "total = x + y['b'][0]\n    return total")
    assert restyled("app.py", HAND, renamed) is None


def test_a_file_that_does_not_tokenize_is_left_to_the_tests():
    assert restyled("app.py", HAND, ruff_format(HAND) + "def (:\n") is None

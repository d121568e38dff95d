"""What a test run's output shows an agent: the lines it acts on, not one per passing test.

Every token a tool returns is paid for again on each later turn (docs/cost.md), and a
suite's progress lines (pytest's `....s..` rows, its `-v` `PASSED` lines, unittest's dots)
say only that tests passed, which the summary line says too. They are left out, with the
count said; every other line is kept as it was, in its place: failures, errors, their
tracebacks, warnings, the summary. A progress row that shows a failure (F, E, X) is kept.
"""

from __future__ import annotations

import re

# A row of passes, skips and expected failures, with pytest's optional file and percentage.
_PROGRESS = re.compile(r"(?:\S+\.py )?[.sx]+(?: *\[ *\d+%\])?")
# `-v`: one passing, skipped or xfailed test, with the optional percentage.
_VERBOSE = re.compile(r"\S+::\S.*? (?:PASSED|SKIPPED|XFAIL)(?: \(.*\))?(?: *\[ *\d+%\])?")


def _passing(line: str) -> bool:
    text = line.strip()
    return bool(text) and bool(_PROGRESS.fullmatch(text) or _VERBOSE.fullmatch(text))


def condense(output: str) -> str:
    """The output less its lines of passing tests, with a note where the first was."""
    kept: list[str] = []
    left_out = 0
    at = -1
    for line in output.splitlines():
        if _passing(line):
            if not left_out:
                at = len(kept)
                kept.append("")
            left_out += 1
            continue
        kept.append(line)
    if not left_out:
        return output
    plural = "s" if left_out > 1 else ""
    kept[at] = f"[{left_out} line{plural} of passing or skipped tests left out]"
    return "\n".join(kept) + ("\n" if output.endswith("\n") else "")

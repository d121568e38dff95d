"""The ruff backend's teams on a real worktree: what it changes is what ruff's own fix
changes, byte for byte, and nothing a maintainer would refuse."""

from __future__ import annotations

import subprocess
from pathlib import Path

from autoresearch.agents.backends.base import StageBrief
from autoresearch.agents.backends.ruff import RuffBackend, apply_edits
from autoresearch.agents.tools import Toolbox
from autoresearch.engine import findings


def repo_with(tmp_path: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    return tmp_path


def run_team(repo: Path, team: str, settings: dict | None = None, **data) -> list[tuple]:
    """One stage of `team`, its harness calls recorded instead of tested and committed."""
    calls: list[tuple] = []

    def record(name):
        def hook(**args):
            calls.append((name, args))
            return "recorded"

        return hook

    names = ("report_finding", "finish_fix", "skip_finding", "finish_refactor")
    toolbox = Toolbox(team, repo, hooks={n: record(n) for n in names})
    tidy = bool(data.pop("tidy", False))
    brief = StageBrief(team, "", "", data={"worktree": str(repo), **data}, tidy=tidy)
    RuffBackend(settings).run(brief, toolbox, lambda _: None)
    return calls


def red(repo: Path, settings: dict | None = None, tried: list[str] | None = None) -> list[dict]:
    return [args for _, args in run_team(repo, "red", settings, tried=tried or [])]


def green(repo: Path, findings: list[dict], team: str = "green") -> list[tuple]:
    return run_team(repo, team, findings=findings)


def finding(fid: str, reported: dict) -> dict:
    return {"id": fid, **reported}


# --- the bytes of a file outside the fix ----------------------------------------------------


def test_edits_keep_crlf_a_byte_order_mark_and_a_missing_final_newline():
    text = "\ufeffy = f'a'\r\nz = 3"
    edit = {
        "content": "'a'",
        "location": {"row": 1, "column": 5},
        "end_location": {"row": 1, "column": 9},
    }
    assert apply_edits(text, [edit]) == "\ufeffy = 'a'\r\nz = 3"


def test_a_form_feed_does_not_end_a_line_for_the_edits():
    # ruff's rows end at \n, \r\n and \r only; str.splitlines also splits at \f.
    text = "x = 1\f\ny = f'a'\n"
    edit = {
        "content": "'a'",
        "location": {"row": 2, "column": 5},
        "end_location": {"row": 2, "column": 9},
    }
    assert apply_edits(text, [edit]) == "x = 1\f\ny = 'a'\n"


CRLF_SOURCE = b"def greet():\r\n    return f'hello'\r\n\r\n\r\nNAME = 'x'"


def test_green_changes_only_the_fixed_line_of_a_crlf_file_without_final_newline(tmp_path):
    repo = repo_with(tmp_path, {"app.py": CRLF_SOURCE})
    [report] = red(repo)
    calls = green(repo, [finding("F-001", report)])
    assert calls[-1][0] == "finish_fix"
    assert (repo / "app.py").read_bytes() == CRLF_SOURCE.replace(b"f'hello'", b"'hello'")


def test_refactor_formats_a_crlf_file_as_ruff_format_would_in_place(tmp_path):
    ugly = b"x = [1,2]\r\ny = {'a':1}\r\n"
    repo = repo_with(tmp_path, {"app.py": ugly, "same.py": ugly})
    run_team(repo, "refactor", changed_files=["app.py"])
    subprocess.run(["python", "-m", "ruff", "format", "same.py"], cwd=repo, check=True)
    assert (repo / "app.py").read_bytes() == (repo / "same.py").read_bytes()
    assert b"\r\n" in (repo / "app.py").read_bytes()


# --- suppressions that belong to the target's other linters -----------------------------------

RUFF_WITH_RUF100 = b'[tool.ruff.lint]\nselect = ["F", "RUF100"]\n'


def fix_all(repo: Path) -> list[tuple]:
    """Red's findings, then Green on all of them."""
    reports = red(repo)
    return green(repo, [finding(f"F-{n:03d}", r) for n, r in enumerate(reports, 1)])


def test_a_noqa_for_a_rule_the_target_ruff_does_not_enable_is_kept(tmp_path):
    source = b"import os  # noqa: E501\n\nprint(os)\nX = 1  # noqa: E501\n"
    repo = repo_with(tmp_path, {"app.py": source, "pyproject.toml": RUFF_WITH_RUF100})
    calls = fix_all(repo)
    assert [name for name, _ in calls] == ["skip_finding", "skip_finding"]
    assert "E501" in calls[0][1]["reason"] and "another linter" in calls[0][1]["reason"]
    assert (repo / "app.py").read_bytes() == source


def test_of_a_mixed_noqa_only_the_codes_ruff_calls_unused_go(tmp_path):
    source = b"X = 1  # noqa: F841, A003, WPS110 reason\n"
    repo = repo_with(tmp_path, {"app.py": source, "pyproject.toml": RUFF_WITH_RUF100})
    assert [name for name, _ in fix_all(repo)] == ["finish_fix"]
    assert (repo / "app.py").read_bytes() == b"X = 1  # noqa: A003, WPS110 reason\n"


def test_a_noqa_the_target_ruff_needs_is_kept_whatever_rules_the_finding_came_from(tmp_path):
    # A count run with `--select RUF100` alone calls this F401 "non-enabled"; under the
    # target's config it suppresses a real unused import.
    source = b"import os  # noqa: F401\n"
    repo = repo_with(
        tmp_path, {"app.py": source, "pyproject.toml": b'[tool.ruff.lint]\nselect = ["F"]\n'}
    )
    report = {
        "severity": "low",
        "title": "RUF100 Unused `noqa` directive (non-enabled: `F401`)",
        "location": "app.py:1",
        "issue": "",
        "impact": "",
    }
    calls = green(repo, [finding("E-001", report)], team="fix")
    assert calls[-1][0] == "skip_finding"
    assert (repo / "app.py").read_bytes() == source


UP006_APP = b"import typing\n\nX: typing.List[int] = []\n"
UP006_CONFIG = b'[tool.ruff]\ntarget-version = "py311"\n[tool.ruff.lint]\nselect = ["F", "UP006"]\n'
UP006 = {
    "severity": "low",
    "title": "UP006 Use `list` instead of `typing.List` for type annotation",
    "location": "app.py:3",
    "issue": "",
    "impact": "",
}


def test_a_tidy_brief_drops_the_import_its_fix_left_unused(tmp_path):
    repo = repo_with(tmp_path, {"app.py": UP006_APP, "pyproject.toml": UP006_CONFIG})
    calls = run_team(repo, "green", findings=[finding("F-001", UP006)], tidy=True)
    assert calls[-1][0] == "finish_fix"
    assert (repo / "app.py").read_bytes() == b"\nX: list[int] = []\n"


def test_a_brief_that_is_not_tidy_leaves_other_imports_alone_whatever_its_team(tmp_path):
    # The team "fix" without the brief's word is not tidied: no name stands in for it.
    for team in ("green", "fix"):
        repo = repo_with(tmp_path / team, {"app.py": UP006_APP, "pyproject.toml": UP006_CONFIG})
        run_team(repo, team, findings=[finding("F-001", UP006)])
        assert (repo / "app.py").read_bytes() == b"import typing\n\nX: list[int] = []\n", team


# --- which rules: the target's own, plus what the spec adds ----------------------------------


def test_red_reports_the_target_ruff_rules_and_agent_ruff_select_adds_to_them(tmp_path):
    source = b"import os\n\n\ndef f(x=[]):\n    return f'{x}' + f'y'\n"
    config = b'[tool.ruff.lint]\nselect = ["B"]\n'
    repo = repo_with(tmp_path, {"app.py": source, "pyproject.toml": config})
    assert {r["title"].split()[0] for r in red(repo)} == {"B006"}
    assert {r["title"].split()[0] for r in red(repo, {"select": ["F541"]})} == {"B006", "F541"}


# --- a diagnostic's identity across cycles ----------------------------------------------------


def tried_line(fid: str, report: dict, outcome: str) -> str:
    """A finding as the tried list shows Red the next cycle (journal.tried_line)."""
    return f"{fid} {report['title']} ({report['location']}) ({outcome})"


def test_after_one_of_a_rule_in_a_file_was_fixed_the_others_are_still_reported(tmp_path):
    source = b"import os\n\nl = 1\nA = f'a'\nB = f'b'\n"
    repo = repo_with(tmp_path, {"app.py": source})
    first = {r["title"].split()[0] + r["location"]: r for r in red(repo)}
    fixed, given_up = first["F541app.py:4"], first["E741app.py:3"]
    # Cycle 1 fixed A and the unused import (every line moved up) and gave up on `l`.
    (repo / "app.py").write_bytes(b"\nl = 1\nA = 'a'\nB = f'b'\n")
    tried = [
        tried_line("F-001", first["F401app.py:1"], "fixed"),
        tried_line("F-002", given_up, "skipped: ruff has no automatic fix for E741"),
        tried_line("F-003", fixed, "fixed"),
    ]
    again = red(repo, tried=tried)
    assert [(r["title"].split()[0], r["location"]) for r in again] == [("F541", "app.py:4")]


def test_twins_on_one_line_are_two_findings(tmp_path):
    repo = repo_with(tmp_path, {"app.py": b"X = f'a' + f'a'\n"})
    reports = red(repo)
    # The harness refuses a second finding with the same title and location.
    assert len({findings.identity(r["title"], r["location"]) for r in reports}) == 2
    calls = green(repo, [finding(f"F-{n}", r) for n, r in enumerate(reports, 1)])
    assert [name for name, _ in calls] == ["finish_fix", "finish_fix"]
    assert (repo / "app.py").read_bytes() == b"X = 'a' + 'a'\n"


# --- only the fixes the target's own `ruff check --fix` applies --------------------------------

NONE_COMPARISON = b"def f(a):\n    return a == None\n"  # E711's fix is unsafe: __eq__ may differ


def test_an_unsafe_fix_is_applied_only_where_the_target_enables_unsafe_fixes(tmp_path):
    plain = repo_with(tmp_path / "plain", {"app.py": NONE_COMPARISON})
    [(name, args)] = fix_all(plain)
    assert name == "skip_finding" and "unsafe" in args["reason"]
    assert (plain / "app.py").read_bytes() == NONE_COMPARISON
    config = b"[tool.ruff]\nunsafe-fixes = true\n"
    opted = repo_with(tmp_path / "opted", {"app.py": NONE_COMPARISON, "pyproject.toml": config})
    assert [name for name, _ in fix_all(opted)] == ["finish_fix"]
    assert (opted / "app.py").read_bytes() == b"def f(a):\n    return a is None\n"

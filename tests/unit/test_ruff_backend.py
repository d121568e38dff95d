"""The ruff backend's teams on a real worktree: what it changes is what ruff's own fix
changes, byte for byte, and nothing a maintainer would refuse."""

from __future__ import annotations

import subprocess
from pathlib import Path

from autoresearch.backends.base import StageBrief
from autoresearch.backends.ruff import RuffBackend, apply_edits
from autoresearch.tools import Toolbox


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
    brief = StageBrief(team, "", "", data={"worktree": str(repo), **data})
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

"""The ruff backend's teams on a real worktree: what it changes is what ruff's own fix
changes, byte for byte, and nothing a maintainer would refuse."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from functools import partial
from pathlib import Path

from autoresearch.agents.backends.base import NOTHING_TO_TOUCH, StageBrief
from autoresearch.agents.backends.ruff import RuffBackend, apply_edits
from autoresearch.agents.tools import Toolbox
from autoresearch.engine import findings


def repo_with(tmp_path: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    return tmp_path


def run_team(
    repo: Path, team: str, settings: dict | None = None, progress: list | None = None, **data
) -> list[tuple]:
    """One stage of `team`, its harness calls recorded instead of tested and committed
    (its progress lines into `progress`)."""
    calls: list[tuple] = []
    said = progress if progress is not None else []

    def record(name):
        def hook(**args):
            calls.append((name, args))
            return "recorded"

        return hook

    names = ("report_finding", "finish_fix", "skip_finding", "finish_refactor")
    toolbox = Toolbox(team, repo, hooks={n: record(n) for n in names})
    tidy = bool(data.pop("tidy", False))
    brief = StageBrief(team, "", "", data={"worktree": str(repo), **data}, tidy=tidy)
    RuffBackend(settings).run(brief, toolbox, said.append)
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


def committed(repo: Path, files: dict[str, bytes]) -> str:
    """`files` written and committed in `repo` (a new repository if need be): the base."""
    repo_with(repo, files)
    run = partial(subprocess.run, cwd=repo, check=True, capture_output=True)
    run(["git", "init", "-q"])
    run(["git", "add", "-A"])
    run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"])
    return run(["git", "rev-parse", "HEAD"], text=True).stdout.strip()


def test_refactor_formats_a_crlf_file_as_ruff_format_would_in_place(tmp_path):
    base = committed(tmp_path, {"app.py": b"x = [1, 2]\r\n"})  # as ruff format writes it
    changed = b"x = [1,2]\r\ny = {'a':1}\r\n"
    repo = repo_with(tmp_path, {"app.py": changed, "same.py": changed})
    run_team(repo, "refactor", changed_files=["app.py"], base_commit=base)
    subprocess.run([sys.executable, "-m", "ruff", "format", "same.py"], cwd=repo, check=True)
    assert (repo / "app.py").read_bytes() == (repo / "same.py").read_bytes()
    assert b"\r\n" in (repo / "app.py").read_bytes()


# A file of a target that does not use ruff's formatter: single quotes, a hand-wrapped list.
HAND_STYLE = b"import os\n\nNUMBERS = [1, 2, 3,\n           4, 5]\nNAME = 'x'\n"


def test_refactor_leaves_a_file_the_target_never_formatted_as_it_is(tmp_path):
    base = committed(tmp_path, {"app.py": HAND_STYLE})
    fixed = HAND_STYLE.replace(b"import os\n\n", b"")  # Green's fix, one line
    repo_with(tmp_path, {"app.py": fixed})
    progress: list[str] = []
    calls = run_team(repo_with(tmp_path, {}), "refactor", changed_files=["app.py"],
                     base_commit=base, progress=progress)  # fmt: skip
    assert calls == [] and (tmp_path / "app.py").read_bytes() == fixed
    assert any("not as `ruff format` writes it at the session's base" in p for p in progress)


def test_refactor_without_the_session_base_formats_nothing(tmp_path):
    repo = repo_with(tmp_path, {"app.py": b"x = [1,2]\n"})
    assert run_team(repo, "refactor", changed_files=["app.py"]) == []
    assert (repo / "app.py").read_bytes() == b"x = [1,2]\n"


def test_refactor_formats_a_file_green_added_since_the_base(tmp_path):
    base = committed(tmp_path, {"other.py": b"X = 1\n"})
    repo_with(tmp_path, {"new.py": b"x = [1,2]\n"})
    calls = run_team(tmp_path, "refactor", changed_files=["new.py"], base_commit=base)
    assert [name for name, _ in calls] == ["finish_refactor"]
    assert (tmp_path / "new.py").read_bytes() == b"x = [1, 2]\n"


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
    assert (repo / "app.py").read_bytes() == b"X: list[int] = []\n"


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


def test_getattr_and_setattr_with_a_constant_are_not_said_to_break_behaviour(tmp_path):
    # B009/B010 only spell an attribute access the long way; a mutable default is a bug.
    source = b"def f(x, y=[]):\n    setattr(x, 'b', 1)\n    return getattr(x, 'a'), y\n"
    config = b'[tool.ruff.lint]\nselect = ["B"]\n'
    repo = repo_with(tmp_path, {"app.py": source, "pyproject.toml": config})
    said = {r["title"].split()[0]: (r["severity"], r["impact"]) for r in red(repo)}
    assert said["B006"][0] == "high"
    assert said["B009"][0] == said["B010"][0] == "medium"
    assert "incorrect behaviour" not in said["B009"][1]


TEST_MODULE = b"""import os


def helper():
    return [] == list(os.environ)


def test_empty():
    assert [] == list(helper_list())


class TestIt:
    def test_more(self):
        assert [] == list(helper_list())
"""
YODA = b'[tool.ruff.lint]\nselect = ["SIM300"]\n'


def test_a_fix_inside_an_existing_test_is_skipped_the_gate_would_take_it_out(tmp_path):
    repo = repo_with(tmp_path, {"tests/test_a.py": TEST_MODULE, "pyproject.toml": YODA})
    reported = red(repo)
    assert [r["location"] for r in reported] == [
        "tests/test_a.py:5",  # the helper's: fixable, reported first
        "tests/test_a.py:9",
        "tests/test_a.py:14",
    ]
    calls = green(repo, [finding(f"F-{i}", r) for i, r in enumerate(reported, 1)])
    assert [name for name, _ in calls] == ["finish_fix", "skip_finding", "skip_finding"]
    assert "allow_test_edits" in calls[1][1]["reason"]
    text = (repo / "tests/test_a.py").read_text()
    assert "return list(os.environ) == []" in text
    assert text.count("assert [] == list(helper_list())") == 2


def test_with_allow_test_edits_a_fix_inside_a_test_is_made(tmp_path):
    repo = repo_with(tmp_path, {"tests/test_a.py": TEST_MODULE, "pyproject.toml": YODA})
    reported = run_team(repo, "red", tried=[], allow_test_edits=True)
    found = [finding(f"F-{i}", r) for i, (_, r) in enumerate(reported, 1)]
    calls = run_team(repo, "green", findings=found, allow_test_edits=True)
    assert [name for name, _ in calls] == ["finish_fix"] * 3


def test_a_function_named_test_outside_a_test_file_is_no_test(tmp_path):
    repo = repo_with(tmp_path, {"app/checks.py": TEST_MODULE, "pyproject.toml": YODA})
    found = [finding(f"F-{i}", r) for i, r in enumerate(red(repo), 1)]
    assert [name for name, _ in green(repo, found)] == ["finish_fix"] * 3


LADDER = b"""def ago(seconds):
    if seconds < 60:
        return "seconds"
    if 60 <= seconds < 3600:
        return "minutes"
    if 3600 <= seconds:
        return "hours"


def lone(n):
    return 0 == n
"""


def test_a_constant_first_comparison_that_ends_a_range_ladder_is_kept(tmp_path):
    # humanize's naturaldelta: `if 60 <= delta.seconds < 3600:` then `if 3600 <= delta.seconds:`.
    # SIM300 calls the last rung a yoda condition; flipped, it no longer reads as the ladder.
    repo = repo_with(tmp_path, {"app.py": LADDER, "pyproject.toml": YODA})
    calls = fix_all(repo)
    # Red reports what Green can fix first: the lone yoda, then the kept rung.
    assert [name for name, _ in calls] == ["finish_fix", "skip_finding"]
    assert "`60 <= seconds < 3600`" in calls[1][1]["reason"]
    assert (repo / "app.py").read_bytes() == LADDER.replace(b"0 == n", b"n == 0")


OLD_STYLE = b"""import typing

Pairs = typing.List[typing.Tuple[str, str]]


def show(a):
    return "{}!".format(a)
"""
UP = b'[tool.ruff.lint]\nselect = ["UP"]\n'


def fixed_with(tmp_path, extra: dict[str, bytes]) -> tuple[list[tuple], str]:
    files = {"m.py": OLD_STYLE, "pyproject.toml": UP, **extra}
    repo = repo_with(tmp_path, files)
    calls = green(repo, [finding(f"F-{i}", r) for i, r in enumerate(red(repo), 1)])
    return calls, (repo / "m.py").read_text()


def test_a_python_requires_in_setup_cfg_keeps_newer_syntax_out(tmp_path):
    # Ruff reads no setup.cfg: without the floor it assumed a newer Python and wrote
    # `list[tuple[str, str]]`, which fails at import on 3.8.
    setup = b"[options]\npython_requires = >=3.8\n"
    calls, text = fixed_with(tmp_path, {"setup.cfg": setup})
    assert 'return f"{a}!"' in text  # 3.6+: fine on 3.8
    assert "typing.List[typing.Tuple[str, str]]" in text
    assert [name for name, _ in calls] == ["finish_fix"]


def test_below_the_oldest_python_ruff_can_check_no_pyupgrade_fix_is_made(tmp_path):
    setup_py = b"from setuptools import setup\nsetup(python_requires='>=3.5')\n"
    calls, text = fixed_with(tmp_path, {"setup.py": setup_py})
    assert text == OLD_STYLE.decode()
    assert {name for name, _ in calls} == {"skip_finding"}
    assert all("Python 3.5 (setup.py python_requires >=3.5)" in a["reason"] for _, a in calls)


def test_below_3_7_a_rewrite_every_python_3_runs_is_still_made(tmp_path):
    repo = repo_with(
        tmp_path,
        {
            "m.py": b"class A(object):\n    name = u'a'\n",
            "pyproject.toml": UP,
            "setup.cfg": b"[options]\npython_requires = >=3.5\n",
        },
    )
    calls = green(repo, [finding(f"F-{i}", r) for i, r in enumerate(red(repo), 1)])
    assert [n for n, _ in calls] == ["finish_fix", "finish_fix"]
    assert (repo / "m.py").read_text() == "class A:\n    name = 'a'\n"


def test_a_requires_python_or_a_ruff_target_version_is_ruffs_own_to_read(tmp_path):
    setup = b"[options]\npython_requires = >=3.5\n"
    ruff_target = b'target-version = "py311"\n[lint]\nselect = ["UP"]\n'
    calls, text = fixed_with(tmp_path, {"setup.cfg": setup, "ruff.toml": ruff_target})
    assert "list[tuple[str, str]]" in text and {n for n, _ in calls} == {"finish_fix"}


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


def test_an_unsafe_fix_is_never_applied_even_where_the_target_enables_unsafe_fixes(tmp_path):
    config = b"[tool.ruff]\nunsafe-fixes = true\n"
    for name, files in {
        "plain": {"app.py": NONE_COMPARISON},
        "opted": {"app.py": NONE_COMPARISON, "pyproject.toml": config},
    }.items():
        repo = repo_with(tmp_path / name, files)
        [(call, args)] = fix_all(repo)
        assert call == "skip_finding" and "unsafe" in args["reason"], name
        assert (repo / "app.py").read_bytes() == NONE_COMPARISON, name


# --- imports that are there for what importing does ----------------------------------------

# boltons' ecoutils: the probe's failure is the flag; `except Exception` gets ruff's safe fix.
PROBES = b"""try:
    import readline
except Exception:
    HAVE_READLINE = False
else:
    HAVE_READLINE = True

try:
    import threading
    HAVE_THREADING = True
except Exception:
    HAVE_THREADING = False
"""


def test_an_import_inside_a_try_block_is_a_feature_probe_and_stays(tmp_path):
    repo = repo_with(tmp_path, {"eco.py": PROBES})
    reports = red(repo)
    assert {r["title"].split()[0] for r in reports} == {"F401"} and len(reports) == 2
    calls = green(repo, [finding(f"F-{n}", r) for n, r in enumerate(reports, 1)])
    assert [name for name, _ in calls] == ["skip_finding", "skip_finding"]
    assert all("try: block, a feature probe" in args["reason"] for _, args in calls)
    assert (repo / "eco.py").read_bytes() == PROBES


def test_an_import_with_side_effects_stays(tmp_path):
    source = b"import os\nimport readline\n"
    repo = repo_with(tmp_path, {"cli.py": source})
    calls = fix_all(repo)
    assert [name for name, _ in calls] == ["finish_fix", "skip_finding"]
    assert "side effects" in calls[1][1]["reason"]
    assert (repo / "cli.py").read_bytes() == b"import readline\n"


def test_an_import_in_a_package_init_is_a_re_export_and_stays(tmp_path):
    # ruff's own fix for it is unsafe; the skip names the re-export whatever the target enables.
    files = {"pkg/__init__.py": b"from os import path\n", "pyproject.toml": b"[tool.ruff]\n"}
    repo = repo_with(tmp_path, files)
    [(name, args)] = fix_all(repo)
    assert name == "skip_finding"
    assert (repo / "pkg/__init__.py").read_bytes() == b"from os import path\n"


def test_a_tidy_fix_does_not_drop_a_probe_it_did_not_make_unused(tmp_path):
    source = (
        b"import typing\n\ntry:\n    import readline\nexcept Exception:\n"
        b"    readline = None\n\nX: typing.List[int] = []\n"
    )
    repo = repo_with(tmp_path, {"app.py": source, "pyproject.toml": UP006_CONFIG})
    calls = run_team(
        repo, "green", findings=[finding("F-001", UP006 | {"location": "app.py:8"})], tidy=True
    )
    assert calls[-1][0] == "finish_fix"
    assert b"import readline" in (repo / "app.py").read_bytes()


# --- the target's flake8 settings ------------------------------------------------------------


def codes_reported(repo: Path) -> set[tuple[str, str]]:
    return {(r["title"].split()[0], r["location"].split(":")[0]) for r in red(repo)}


SHIMS = {"cachetools/func.py": b"import os\nX = f'a'\n", "tests/test_a.py": b"import os\n"}


def test_a_rule_ignored_in_pyproject_flake8_is_not_a_finding(tmp_path):
    config = b'[tool.flake8]\nmax-line-length = 80\n# shims\nignore = ["F401", "E501"]\n'
    repo = repo_with(tmp_path, {**SHIMS, "pyproject.toml": config})
    assert codes_reported(repo) == {("F541", "cachetools/func.py")}


def test_flake8_ini_files_ignore_extend_ignore_and_per_file_ignores(tmp_path):
    for name in ("setup.cfg", "tox.ini", ".flake8"):
        config = (
            b"[flake8]\nextend-ignore =\n    F541,  # f-strings are fine\n"
            b"per-file-ignores =\n    tests/*:F401\n"
        )
        repo = repo_with(tmp_path / name.strip("."), {**SHIMS, name: config})
        assert codes_reported(repo) == {("F401", "cachetools/func.py")}, name


def test_flake8_select_bounds_ruff_only_where_the_target_has_no_ruff_config(tmp_path):
    files = {**SHIMS, "setup.cfg": b"[flake8]\nselect = E,W\n"}
    assert codes_reported(repo_with(tmp_path / "a", files)) == set()
    both = {**files, "ruff.toml": b""}
    assert len(codes_reported(repo_with(tmp_path / "b", both))) == 3


def test_flake8_max_line_length_decides_e501(tmp_path):
    line = b"X = '" + b"a" * 90 + b"'\n"  # 96 characters
    files = {"app.py": line, "tox.ini": b"[flake8]\nmax-line-length = 100\n"}
    repo = repo_with(tmp_path, files)
    assert red(repo, {"select": ["E501"]}) == []
    (repo / "tox.ini").write_bytes(b"[flake8]\nmax-line-length = 92\n")
    assert {r["title"].split()[0] for r in red(repo, {"select": ["E501"]})} == {"E501"}


# boltons' iterutils.get_path: ruff calls the outer `exc` unused, but the nested handler
# raises it on one path; without `as exc` that path fails with a NameError.
NESTED_EXC = b"""def get(cur, seg):
    try:
        return cur[seg]
    except TypeError as exc:
        try:
            return cur[int(seg)]
        except ValueError:
            if not cur:
                exc = TypeError('not indexable')
            raise LookupError(exc)
"""


def test_a_binding_whose_name_the_function_reads_elsewhere_stays(tmp_path):
    repo = repo_with(tmp_path, {"it.py": NESTED_EXC})
    [(name, args)] = fix_all(repo)
    assert name == "skip_finding" and "read elsewhere in the same function" in args["reason"]
    assert (repo / "it.py").read_bytes() == NESTED_EXC


def test_an_unused_binding_nothing_reads_is_still_fixed(tmp_path):
    source = b"def f():\n    try:\n        pass\n    except TypeError as exc:\n        pass\n"
    repo = repo_with(tmp_path, {"it.py": source})
    assert [name for name, _ in fix_all(repo)] == ["finish_fix"]
    assert b"except TypeError:" in (repo / "it.py").read_bytes()


def test_a_submodule_import_the_code_reads_through_its_package_stays(tmp_path):
    # boltons' misc/bench_omd.py: `from lithoxyl import sinks` makes `lithoxyl.sinks` work.
    source = b"import os\nimport lithoxyl\nfrom lithoxyl import sinks\n\nq = lithoxyl.sinks.Q()\n"
    repo = repo_with(tmp_path, {"bench.py": source})
    calls = fix_all(repo)
    assert [name for name, _ in calls] == ["finish_fix", "skip_finding"]
    assert "`lithoxyl.sinks`" in calls[1][1]["reason"]
    assert (repo / "bench.py").read_bytes() == source.replace(b"import os\n", b"")


def test_removing_the_first_import_leaves_no_blank_line_at_the_top(tmp_path):
    # boltons' tests/test_listutils.py: `import sys` then a blank line, then the imports used.
    source = b"import sys\r\n\r\nfrom os import path\r\n\r\nprint(path)\r\n"
    repo = repo_with(tmp_path, {"t.py": source})
    assert [name for name, _ in fix_all(repo)] == ["finish_fix"]
    assert (repo / "t.py").read_bytes() == b"from os import path\r\n\r\nprint(path)\r\n"


def test_red_reports_what_green_can_fix_first_so_the_fix_slots_go_to_it(tmp_path):
    # Both medium; F841's fix is unsafe, F401's safe: sanitize passes on the first ones.
    source = b"def f():\n    x = 1\n\n\nimport os\n"
    repo = repo_with(tmp_path, {"app.py": source})
    assert [r["title"].split()[0] for r in red(repo)][:2] == ["F401", "F841"]


def passed_to_green(reports: list[dict], limit: int) -> list[str]:
    """The rule codes sanitize passes to Green of what Red reported."""
    found = [findings.Finding(id=f"F-{i:03d}", **r) for i, r in enumerate(reports, 1)]
    return [f.title.split()[0] for f in findings.sanitize(found, limit)[0]]


def test_a_finding_green_must_skip_never_takes_the_slot_of_one_it_can_fix(tmp_path):
    # F821 (critical) has no fix; sanitize ranks severity first, so reported alongside
    # the F401 (medium, safe fix) they would fill both slots and Green would fix nothing.
    source = b"import os\n\n\ndef f():\n    return a + b + c\n"
    repo = repo_with(tmp_path, {"app.py": source})
    reported = [a for _, a in run_team(repo, "red", tried=[], max_findings=2)]
    assert passed_to_green(reported, 2) == ["F401", "F821"]


def test_a_fix_in_a_file_green_may_not_write_takes_no_slot_of_one_it_may(tmp_path):
    # narrow protects the tests: a safe fix there is refused, as a fix with none is
    files = {"a/test_t.py": b"import os\nimport sys\n", "app.py": b"import re\n"}
    repo = repo_with(tmp_path, files)
    said: list[dict] = []
    hooks = {"report_finding": lambda **a: said.append(a) or "recorded"}
    toolbox = Toolbox("red", repo, protected=["a"], hooks=hooks)  # ruff lists a/ first
    brief = StageBrief("red", "", "", data={"worktree": str(repo), "tried": [], "max_findings": 1})
    RuffBackend().run(brief, toolbox, lambda _: None)
    found = [findings.Finding(id=f"F-{i:03d}", **r) for i, r in enumerate(said, 1)]
    passed = findings.sanitize(found, 1)[0]
    assert [f.location.split(":")[0] for f in passed] == ["app.py"]


def test_what_green_cannot_fix_and_outranks_nothing_is_still_reported(tmp_path):
    # with no fix to make, or ranking no higher than the fixes, nothing is held back:
    # what sanitize does not pass on is listed in ideas.md
    repo = repo_with(tmp_path, {"app.py": b"def f():\n    return a + b + c\n"})
    assert len([a for _, a in run_team(repo, "red", tried=[], max_findings=2)]) == 3
    source = b"import os\n\n\ndef f():\n    x = 1\n    y = 2\n"  # F841s: medium, unsafe
    repo = repo_with(tmp_path / "b", {"app.py": source})
    reported = [a["title"][:4] for _, a in run_team(repo, "red", tried=[], max_findings=1)]
    assert reported == ["F401", "F841", "F841"]


def test_an_import_in_a_compatibility_module_is_a_re_export_and_stays(tmp_path):
    # toolz/compatibility.py ends with `from collections.abc import Sequence` for its users.
    source = b"import operator\nfrom collections.abc import Sequence\n"
    for name in ("compatibility.py", "pkg/_compat.py"):
        repo = repo_with(tmp_path / name.replace("/", "-"), {name: source})
        calls = fix_all(repo)
        assert [call for call, _ in calls] == ["skip_finding", "skip_finding"], name
        assert "compatibility module" in calls[0][1]["reason"]
        assert (repo / name).read_bytes() == source


def test_an_import_its_comment_calls_a_re_export_stays(tmp_path):
    # python-pathspec's patterns/gitwildmatch.py keeps a deprecated name importable; its
    # CHANGES and UPGRADING name `pathspec.patterns.gitwildmatch.GitWildMatchPatternError`.
    source = (
        b"import re\n\n"
        b"# DEPRECATED: Deprecated since version 1.0.0. Expose GitWildMatchPatternError\n"
        b"# in this module for backward compatibility.\n"
        b"from .gitignore import (\n"
        b"\tGitIgnorePatternError as GitWildMatchPatternError)\n\n"
        b"from .spec import Pattern  # kept for callers that import it from here\n"
    )
    repo = repo_with(tmp_path, {"pkg/gitwildmatch.py": source})
    calls = fix_all(repo)
    assert [name for name, _ in calls] == ["finish_fix", "skip_finding", "skip_finding"]
    assert "for backward compatibility" in calls[1][1]["reason"]
    assert "kept for callers" in calls[2][1]["reason"]
    assert (repo / "pkg/gitwildmatch.py").read_bytes() == source.replace(b"import re\n\n", b"")


def test_a_comment_that_says_nothing_of_others_keeps_no_import(tmp_path):
    # pathspec/gitignore.py: `Optional,  # Replaced by `X | None` in 3.10.` is dead.
    source = (
        b"# Helpers for the parser.\n"
        b"from typing import (\n\tOptional,  # Replaced by `X | None` in 3.10.\n\tcast)\n"
    )
    repo = repo_with(tmp_path, {"mod.py": source})
    calls = fix_all(repo)
    assert calls[0][0] == "finish_fix"  # one fix takes the whole statement
    assert (repo / "mod.py").read_bytes() == b"# Helpers for the parser.\n"
    # The second name went with the first's fix: said so, not "no longer reported" alone.
    assert calls[1][0] == "skip_finding"
    assert calls[1][1]["reason"].startswith("settled by F-001's fix in mod.py")


def test_an_init_import_passed_through_sanitize_is_kept_for_its_reason_and_not_reported_again(
    tmp_path,
):
    # python-pathspec: ruff's F401 message in a package's __init__.py ends with advice
    # ("; consider removing, …"), which sanitize cuts. Green then found no diagnostic of
    # that title ("ruff no longer reports it") and Red, not finding its own title in the
    # tried list, reported it again every cycle: two cycles of nothing but these skips.
    files = {"pkg/__init__.py": b"from . import util\nfrom .util import helper\n"}
    repo = repo_with(tmp_path, {**files, "pkg/util.py": b"def helper():\n    pass\n"})
    reported = red(repo)
    found = [findings.Finding(id=f"F-{i:03d}", **r) for i, r in enumerate(reported, 1)]
    passed = findings.sanitize(found, 15)[0]
    assert [f.title for f in passed] == [
        "F401 `.util` imported but unused.",
        "F401 `.util.helper` imported but unused.",
    ]
    calls = green(repo, [dataclasses.asdict(f) for f in passed])
    assert [name for name, _ in calls] == ["skip_finding", "skip_finding"]
    assert all("package's __init__.py" in args["reason"] for _, args in calls)
    tried = [f"{f.id} {f.title} ({f.location}) (skipped: kept)" for f in passed]
    assert red(repo, tried=tried) == []


def test_an_import_another_module_imports_from_here_stays(tmp_path):
    # python-pathspec: `AnyStr` in pathspec/_typing.py and `re2_error` in re2/base.py are
    # imported from there by other modules; each removal broke collection and was bisected
    # out (two more runs of the suite each).
    files = {
        "pkg/_typing.py": b"from typing import AnyStr\nimport os\n",
        "pkg/user.py": b"from ._typing import (\n    AnyStr,\n)\n\nX: AnyStr\n",
        "pkg/other.py": b"# not _typing's\nfrom typing import AnyStr, List\n\nY: List[AnyStr]\n",
    }
    repo = repo_with(tmp_path, files)
    calls = fix_all(repo)
    assert [name for name, _ in calls] == ["finish_fix", "skip_finding"]
    assert "imported from pkg/_typing.py by pkg/user.py" in calls[1][1]["reason"]
    assert (repo / "pkg/_typing.py").read_bytes() == b"from typing import AnyStr\n"


def test_an_import_only_the_module_doctests_use_stays(tmp_path):
    # boltons runs `pytest --doctest-modules`: the examples run in the module's namespace.
    source = (
        b'import os\nimport re\n\n\ndef f():\n    """\n'
        b'    >>> bool(re.match("a", "a"))\n    True\n    """\n'
    )
    repo = repo_with(tmp_path, {"mod.py": source})
    calls = fix_all(repo)
    assert [name for name, _ in calls] == ["finish_fix", "skip_finding"]
    assert "doctests" in calls[1][1]["reason"]
    assert (repo / "mod.py").read_bytes() == source.replace(b"import os\n", b"")


def test_an_import_that_is_a_whole_function_body_stays(tmp_path):
    # bottle's test_importhook: the import's ImportError is what the test asserts.
    source = (
        b"import unittest\n\n\nclass T(unittest.TestCase):\n    def test_fail(self):\n"
        b"        def attempt():\n            import bottle.ext.missing\n"
        b"        self.assertRaises(ImportError, attempt)\n"
    )
    repo = repo_with(tmp_path, {"test_hook.py": source})
    [(name, args)] = fix_all(repo)
    assert name == "skip_finding" and "does nothing but import" in args["reason"]
    assert (repo / "test_hook.py").read_bytes() == source


def test_a_name_in_all_or_imported_as_itself_is_a_re_export_whatever_flags_it():
    from autoresearch.agents.backends.ruff import kept_import

    at = {"location": {"row": 1, "column": 1}}
    for source in ("from os import path\n__all__ = ['path']\n", "from os import path as path\n"):
        assert "re-exported" in kept_import(at, source, "mod.py"), source
    assert kept_import(at, "from os import path\n__all__ = ['sep']\n", "mod.py") == ""


def test_a_file_the_target_flake8_excludes_has_no_findings(tmp_path):
    config = b"[flake8]\nexclude = .git,build\nextend-exclude = vendor/*\n"
    files = {**SHIMS, "vendor/lib.py": b"import os\n", "setup.cfg": config}
    reported = codes_reported(repo_with(tmp_path, files))
    assert ("F401", "vendor/lib.py") not in reported and ("F401", "cachetools/func.py") in reported


def refactor_run(repo: Path, **data):
    toolbox = Toolbox("refactor", repo, hooks={"finish_refactor": lambda **a: "recorded"})
    brief = StageBrief("refactor", "", "", data={"worktree": str(repo), **data})
    return RuffBackend().run(brief, toolbox, lambda line: None)


def test_refactor_with_no_file_it_may_format_says_it_had_nothing_to_touch(tmp_path):
    base = committed(tmp_path, {"app.py": HAND_STYLE})
    repo_with(tmp_path, {"app.py": HAND_STYLE.replace(b"import os\n\n", b"")})
    run = refactor_run(tmp_path, changed_files=["app.py", "notes.txt"], base_commit=base)
    assert (run.stop_reason, run.turns) == (NOTHING_TO_TOUCH, 0)


def test_refactor_that_may_format_a_file_already_formatted_looked_and_changed_nothing(tmp_path):
    base = committed(tmp_path, {"app.py": b"import os\n\nX = 1\n"})
    repo_with(tmp_path, {"app.py": b"X = 1\n"})  # Green's fix, still as ruff format writes it
    run = refactor_run(tmp_path, changed_files=["app.py"], base_commit=base)
    assert (run.stop_reason, run.turns) == ("finished", 0)


# --- a fix that moves its own error ---------------------------------------------------------

RET505_ONLY = b'[tool.ruff.lint]\nselect = ["RET505"]\n'
CHAIN = b"""def pick(x):
    if x == 1:
        return "a"
    elif x == 2:
        return "b"
    else:
        return "c"
"""
FLAT = b"""def pick(x):
    if x == 1:
        return "a"
    if x == 2:
        return "b"
    return "c"
"""


def test_an_if_chain_is_flattened_whole_as_ruff_fix_would(tmp_path):
    # isodate: `elif` after a return made `if` leaves the `else` below it superfluous, so
    # the count stayed and the fix was reverted (4 of 7 RET505 blocked so).
    repo = repo_with(tmp_path, {"app.py": CHAIN, "pyproject.toml": RET505_ONLY})
    calls = fix_all(repo)
    assert [name for name, _ in calls] == ["finish_fix"]
    assert (repo / "app.py").read_bytes() == FLAT


def test_the_follow_up_fixes_leave_the_files_other_findings_alone(tmp_path):
    # Another chain's `else` was there before: it is its own finding, not this fix's work.
    other = b"\n\ndef other(y):\n    if y:\n        return 1\n    else:\n        return 2\n"
    repo = repo_with(tmp_path, {"app.py": CHAIN + other, "pyproject.toml": RET505_ONLY})
    reports = red(repo)
    first = next(r for r in reports if "elif" in r["title"])
    assert [name for name, _ in green(repo, [finding("F-001", first)])] == ["finish_fix"]
    assert (repo / "app.py").read_bytes() == FLAT + other


def test_a_noqa_a_narrow_count_calls_unused_but_the_target_needs_says_so(tmp_path):
    # isodate's fix session counted RUF100 with `--select RUF100,SIM103,RET505`: its
    # suppression of E402 was "non-enabled" there, but E402 is among ruff's defaults, which the
    # backend reads; the skip said "ruff no longer reports it", as though it were gone.
    source = b"import sys\n\nsys.path.insert(0, 'src')\nimport os  # noqa: E402\n\nprint(os)\n"
    repo = repo_with(tmp_path, {"app.py": source})
    counted = {
        "title": "RUF100 Unused `noqa` directive (non-enabled: `E402`) in `import os  "
        + "# noqa: E402`",
        "location": "app.py:4",
    }
    [(name, args)] = green(repo, [finding("E-001", counted)])
    assert name == "skip_finding"
    assert args["reason"].startswith("the `noqa` is for E402, which the target's own ruff enables")
    assert (repo / "app.py").read_bytes() == source


# --- the security auditor ---------------------------------------------------------------


def audited(repo: Path, vector: dict) -> dict[str, dict]:
    """The auditor's reports on `vector`, by location."""
    calls: list[dict] = []

    def hook(**args):
        calls.append(args)
        return "recorded"

    toolbox = Toolbox("auditor", repo, hooks={"report_vulnerability": hook})
    brief = StageBrief("auditor", "", "", data={"worktree": str(repo), "vector": vector})
    RuffBackend().run(brief, toolbox, lambda _: None)
    return {c["location"]: c for c in calls}


PICKLING = b"import pickle\n\n\ndef load(data):\n    return pickle.loads(data)\n"


def test_a_pattern_in_test_code_is_low_and_the_same_in_shipped_code_stays_high(tmp_path):
    # isodate's tests/test_pickle.py round-trips its own objects: three S301 at high failed a
    # `fail_on: high` audit with nothing shipped at fault.
    test = b"import pickle\n\n\ndef test_rt():\n    assert pickle.loads(pickle.dumps(1)) == 1\n"
    repo = repo_with(tmp_path, {"lib/store.py": PICKLING, "tests/test_store.py": test})
    found = audited(repo, {"kind": "owasp", "name": "A08"})
    assert found["lib/store.py:5"]["severity"] == "high"
    shown = found["tests/test_store.py:5"]
    assert shown["severity"] == "low" and "in test code" in shown["scenario"]
    assert "in test code" not in found["lib/store.py:5"]["scenario"]


def test_a_secret_in_test_code_keeps_its_severity(tmp_path):
    test = b'API_PASSWORD = "hunter2-prod"\n\n\ndef test_x():\n    assert API_PASSWORD\n'
    repo = repo_with(tmp_path, {"tests/test_login.py": test})
    found = audited(repo, {"kind": "owasp", "name": "A07"})
    assert found["tests/test_login.py:1"]["severity"] == "high"


def test_a_shipped_module_whose_name_only_contains_test_is_shipped_code(tmp_path):
    # `contest.py`, `latest/`: only pytest's file names and a tests/ or test/ folder count.
    repo = repo_with(tmp_path, {"latest/contest.py": PICKLING})
    found = audited(repo, {"kind": "owasp", "name": "A08"})
    assert found["latest/contest.py:5"]["severity"] == "high"


def test_a_secret_rule_on_a_one_character_literal_is_low(tmp_path):
    # wcwidth's tests compare a `token` with Unicode's break markers; S105 goes by the name.
    code = "def parts(data):\n    for token in data:\n        if token == '÷':\n            pass\n"
    secret = 'def login(token):\n    return token == "s3cr3t-Pr0d-key"\n'
    repo = repo_with(tmp_path, {"lib/grapheme.py": code.encode(), "lib/auth.py": secret.encode()})
    found = audited(repo, {"kind": "owasp", "name": "A07"})
    marker = found["lib/grapheme.py:3"]
    assert marker["severity"] == "low" and "1 character(s) long" in marker["scenario"]
    assert found["lib/auth.py:2"]["severity"] == "high"

"""The fix lens's anti-cheating check, on diffs made by git in a temp repository."""

from __future__ import annotations

import pytest
from conftest import git

from autoresearch.modes.lens.suppressions import check, is_test_file, parse_diff

CODE = """\
import os


def load(path):
    with open(path) as handle:
        return handle.read()


def run(cmd):
    return os.system(cmd)
"""
TESTS = """\
import pytest

from app import load


def test_load_reads_the_file(tmp_path):
    path = tmp_path / "x"
    path.write_text("hi")
    assert load(path) == "hi"
    assert isinstance(load(path), str)


def test_load_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope")
"""


def diff_of(tmp_path, after: dict[str, str | None], before: dict[str, str] | None = None) -> str:
    """The `git diff` from `before` (default: app.py and tests/test_app.py) to `after`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for name, text in (before or {"app.py": CODE, "tests/test_app.py": TESTS}).items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "before")
    for name, text in after.items():
        if text is None:
            (repo / name).unlink()
        else:
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached")


def kinds(violations):
    return [v.kind for v in violations]


def test_a_plain_fix_has_no_violation(tmp_path):
    fixed = CODE.replace("os.system(cmd)", "subprocess.run(cmd, check=True)")
    assert check(diff_of(tmp_path, {"app.py": fixed})) == []


@pytest.mark.parametrize(
    "line,kind",
    [
        ("    return os.system(cmd)  # type: ignore[return-value]", "new type: ignore"),
        ("    return os.system(cmd)  # noqa: S605", "new noqa"),
        ("    return os.system(cmd)  # pragma: no cover", "new pragma: no cover"),
        ("    return os.system(cmd)  # @ts-ignore", "new @ts-ignore"),
        ("    return os.system(cmd)  # eslint-disable-line", "new eslint-disable"),
        ("    return os.system(cmd)  # pylint: disable=broad-except", "new pylint: disable"),
    ],
)
def test_a_new_suppression_comment_is_a_violation(tmp_path, line, kind):
    changed = CODE.replace("    return os.system(cmd)", line)
    (violation,) = check(diff_of(tmp_path, {"app.py": changed}))
    assert (violation.kind, violation.file, violation.line) == (kind, "app.py", 10)


@pytest.mark.parametrize(
    "marker", ["@pytest.mark.skip(reason='flaky')", "@pytest.mark.xfail", "@pytest.mark.skipif(1)"]
)
def test_a_new_skip_or_xfail_is_a_violation(tmp_path, marker):
    changed = TESTS.replace("def test_load_missing", f"{marker}\ndef test_load_missing")
    assert kinds(check(diff_of(tmp_path, {"tests/test_app.py": changed}))) == ["new skipped test"]


def test_a_skip_in_a_javascript_test_is_a_violation(tmp_path):
    before = {"app.test.js": "test('adds', () => {\n  expect(add(1, 2)).toBe(3);\n});\n"}
    after = {"app.test.js": before["app.test.js"].replace("test(", "test.skip(")}
    assert "new skipped test" in kinds(check(diff_of(tmp_path, after, before)))


def test_a_line_that_keeps_its_existing_marker_while_changing_is_not_new(tmp_path):
    before = {"app.py": "import os  # noqa: F401\nx = 1\n"}
    after = {"app.py": "import os, sys  # noqa: F401\nx = 1\n"}
    assert check(diff_of(tmp_path, after, before)) == []


def test_a_deleted_test_function_is_a_violation(tmp_path):
    gutted = TESTS.split("\n\n\ndef test_load_missing")[0] + "\n"
    violations = check(diff_of(tmp_path, {"tests/test_app.py": gutted}))
    assert ("deleted test", "test_load_missing_file_raises") in [
        (v.kind, v.detail) for v in violations
    ]


def test_a_deleted_test_file_is_a_violation(tmp_path):
    violations = check(diff_of(tmp_path, {"tests/test_app.py": None}))
    deleted = sorted(v.detail for v in violations if v.kind == "deleted test")
    assert deleted == ["test_load_missing_file_raises", "test_load_reads_the_file"]


def test_a_renamed_test_is_not_a_deleted_one_but_its_lost_assert_is_weakening(tmp_path):
    renamed = TESTS.replace("test_load_reads_the_file", "test_load_returns_the_text").replace(
        "    assert isinstance(load(path), str)\n", ""
    )
    violations = check(diff_of(tmp_path, {"tests/test_app.py": renamed}))
    assert kinds(violations) == ["weakened test"]
    assert violations[0].detail == "asserts: 1 removed, 0 added"


def test_replacing_an_assert_with_another_is_not_weakening(tmp_path):
    changed = TESTS.replace('assert load(path) == "hi"', 'assert load(path) == "hi", "content"')
    assert check(diff_of(tmp_path, {"tests/test_app.py": changed})) == []


def test_adding_a_regression_test_is_allowed(tmp_path):
    added = TESTS + "\n\ndef test_run_refuses_a_shell(tmp_path):\n    assert run is not None\n"
    assert check(diff_of(tmp_path, {"tests/test_app.py": added})) == []


def test_an_edit_to_a_protected_file_is_a_violation(tmp_path):
    added = TESTS + "\n\ndef test_more():\n    assert True\n"
    violations = check(diff_of(tmp_path, {"tests/test_app.py": added}), protected=["tests/*"])
    assert kinds(violations) == ["protected file"]


def test_a_raised_timeout_is_a_violation(tmp_path):
    before = {"app.py": "import subprocess\n\nsubprocess.run(['make'], timeout=30)\n"}
    after = {"app.py": before["app.py"].replace("timeout=30", "timeout=600")}
    (violation,) = check(diff_of(tmp_path, after, before))
    assert violation.kind == "raised timeout"
    assert violation.detail.startswith("timeout 30 → 600")


def test_a_lowered_timeout_is_allowed(tmp_path):
    before = {"pytest.ini": "[pytest]\ntimeout = 300\n"}
    after = {"pytest.ini": "[pytest]\ntimeout = 60\n"}
    assert check(diff_of(tmp_path, after, before)) == []


@pytest.mark.parametrize(
    "handler",
    [
        "    try:\n        return os.system(cmd)\n    except Exception:\n        pass\n",
        "    try:\n        return os.system(cmd)\n    except OSError: pass\n",
    ],
)
def test_a_new_empty_exception_handler_is_a_violation(tmp_path, handler):
    changed = CODE.replace("    return os.system(cmd)\n", handler)
    assert kinds(check(diff_of(tmp_path, {"app.py": changed}))) == ["empty exception handler"]


def test_parse_diff_numbers_added_lines_on_the_new_side(tmp_path):
    changed = CODE.replace("def run(cmd):", "def run(cmd):\n    cmd = cmd.strip()")
    (f,) = parse_diff(diff_of(tmp_path, {"app.py": changed}))
    assert f.added == [(10, "    cmd = cmd.strip()")]
    assert f.removed == []


def test_parse_diff_marks_new_and_deleted_files(tmp_path):
    files = parse_diff(diff_of(tmp_path, {"new.py": "x = 1\n", "app.py": None}))
    assert {(f.old_path, f.new_path) for f in files} == {("app.py", None), (None, "new.py")}


def test_violation_reads_as_file_line_kind_and_detail(tmp_path):
    changed = CODE.replace("    return os.system(cmd)", "    return os.system(cmd)  # noqa")
    (violation,) = check(diff_of(tmp_path, {"app.py": changed}))
    assert str(violation) == "app.py:10: new noqa — return os.system(cmd)  # noqa"


@pytest.mark.parametrize(
    "path,expected",
    [
        ("tests/test_app.py", True),
        ("pkg/test_x.py", True),
        ("web/app.spec.ts", True),
        ("cmd/main_test.go", True),
        ("app/views.py", False),
        ("contest.py", False),
    ],
)
def test_is_test_file(path, expected):
    assert is_test_file(path) is expected

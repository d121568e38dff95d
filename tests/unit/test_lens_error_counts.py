"""The fix lens's error count: parsers (on real pytest and ruff output where the tool is here),
the fixing order, and the before/after verdicts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autoresearch.modes.lens.error_counts import (
    Count,
    Error,
    by_category,
    compare,
    is_blocked,
    next_error,
    order,
    parse,
    parse_exit,
    parse_mypy,
    parse_pyright,
    parse_pytest,
    parse_regex,
    parse_ruff_json,
)

RUFF = [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format=json", "."]
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]


def run(cmd, cwd):
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    return result.stdout, result.returncode


def lint_error(code="F401", file="a.py", line=1, message="`os` imported but unused"):
    return Error("ruff", "lint", code, file, line, message)


# --- parsers on real output ---


def test_parse_ruff_json_reads_each_diagnostic_with_a_relative_path(tmp_path):
    (tmp_path / "a.py").write_text("import os\nimport sys\n")
    output, _ = run(RUFF, tmp_path)
    count = parse_ruff_json(output, tmp_path)
    assert sorted((e.code, e.where, e.category) for e in count.errors) == [
        ("F401", "a.py:1", "lint"),
        ("F401", "a.py:2", "lint"),
    ]
    assert count.complete and not count.incomplete_files


def test_parse_ruff_json_treats_a_syntax_error_as_a_build_error_hiding_its_file(tmp_path):
    (tmp_path / "bad.py").write_text("import os\n\ndef f(:\n")
    output, _ = run(RUFF, tmp_path)
    count = parse_ruff_json(output, tmp_path)
    assert {e.category for e in count.errors} == {"build"}
    assert count.incomplete_files == {"bad.py"}


def test_parse_pytest_reads_failed_tests_by_node_id(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n\ndef test_ok():\n    assert True\n\n\n"
        "def test_bad():\n    assert 1 == 2\n\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n):\n    assert n == 1\n"
    )
    output, code = run(PYTEST, tmp_path)
    count = parse_pytest(output, code, tmp_path)
    assert sorted(e.code for e in count.errors) == [
        "test_x.py::test_bad",
        "test_x.py::test_param[2]",
    ]
    assert {e.category for e in count.errors} == {"test"}
    assert count.complete


def test_parse_pytest_treats_a_collection_error_as_an_incomplete_build_error(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import nothing_by_this_name\n\n\ndef test_a():\n    pass\n"
    )
    output, code = run(PYTEST, tmp_path)
    count = parse_pytest(output, code, tmp_path)
    assert [(e.category, e.file) for e in count.errors] == [("build", "test_x.py")]
    assert not count.complete


def test_parse_pytest_counts_nothing_for_a_passing_run(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_a():\n    pass\n")
    output, code = run(PYTEST, tmp_path)
    assert parse_pytest(output, code, tmp_path).errors == []


def test_parse_pytest_identity_ignores_the_failure_message():
    one = parse_pytest("FAILED t.py::test_a - AssertionError: /tmp/pytest-1/x\n", 1)
    two = parse_pytest("FAILED t.py::test_a - AssertionError: /tmp/pytest-2/x\n", 1)
    assert one.errors[0].identity == two.errors[0].identity
    assert one.errors[0].detail == "AssertionError: /tmp/pytest-1/x"


def test_parse_pytest_counts_failures_without_ids_as_incomplete():
    count = parse_pytest("2 failed, 3 passed in 0.1s\n", 1)
    assert len(count.errors) == 2
    assert not count.complete


# --- parsers on documented output formats of tools not installed here ---

MYPY_OUTPUT = """\
app/models.py:12: error: Incompatible return value type (got "str", expected "int")  [return-value]
app/models.py:12: note: See https://mypy.readthedocs.io for more
app/views.py:3:5: error: Name "foo" is not defined  [name-defined]
Found 2 errors in 2 files (checked 7 source files)
"""


def test_parse_mypy_reads_errors_and_skips_notes():
    count = parse_mypy(MYPY_OUTPUT)
    assert [(e.code, e.where) for e in count.errors] == [
        ("return-value", "app/models.py:12"),
        ("name-defined", "app/views.py:3"),
    ]
    assert {e.category for e in count.errors} == {"type"}
    assert count.complete


def test_parse_mypy_marks_a_run_stopped_by_errors_incomplete():
    output = (
        "a.py:1: error: invalid syntax  [syntax]\n"
        "Found 1 error in 1 file (errors prevented further checking)\n"
    )
    assert not parse_mypy(output).complete


def test_parse_pyright_json_numbers_lines_from_one(tmp_path):
    report = {
        "generalDiagnostics": [
            {
                "file": str(tmp_path / "app.py"),
                "severity": "error",
                "message": 'Cannot access attribute "x"',
                "range": {"start": {"line": 4, "character": 2}},
                "rule": "reportAttributeAccessIssue",
            },
            {"file": str(tmp_path / "app.py"), "severity": "information", "message": "info"},
            {
                "file": str(tmp_path / "app.py"),
                "severity": "warning",
                "message": "Import could not be resolved",
                "range": {"start": {"line": 0, "character": 0}},
                "rule": "reportMissingImports",
            },
        ]
    }
    count = parse_pyright(json.dumps(report), tmp_path)
    assert [(e.category, e.where) for e in count.errors] == [
        ("type", "app.py:5"),
        ("warning", "app.py:1"),
    ]


def test_parse_pyright_text_lines():
    output = '/w/app.py:5:3 - error: Cannot access attribute "x" (reportAttributeAccessIssue)\n'
    (error,) = parse_pyright(output).errors
    assert (error.code, error.line) == ("reportAttributeAccessIssue", 5)


def test_parse_regex_uses_named_groups_when_present():
    output = "src/a.c:10: warning: unused variable 'x'\nsrc/b.c:3: warning: implicit int\n"
    pattern = r"^(?P<file>[^:]+):(?P<line>\d+): warning: (?P<message>.*)$"
    count = parse_regex(output, pattern, tool="cc", category="warning")
    assert [e.where for e in count.errors] == ["src/a.c:10", "src/b.c:3"]


def test_parse_regex_refuses_an_unknown_category():
    with pytest.raises(ValueError, match="category 'style' not allowed"):
        parse_regex("", "x", category="style")


def test_parse_exit_is_one_build_error_that_blocks_other_counts():
    failing = parse_exit(2, "make", "compiling...\nerror: missing ;\n")
    assert [(e.category, e.detail) for e in failing.errors] == [("build", "error: missing ;")]
    assert failing.blocks_others
    assert parse_exit(0, "make").errors == []


def test_parse_dispatches_on_the_parser_name():
    assert parse("exit", "", 1, "build").errors[0].category == "build"
    assert parse("regex:TODO", "TODO\nTODO\n", 0, "todos").tool == "todos"
    with pytest.raises(ValueError, match="parser 'eslint' not allowed"):
        parse("eslint", "", 0, "eslint")


# --- order ---


def test_order_is_build_then_severe_bugs_type_test_milder_bugs_lint_warnings():
    errors = [
        Error("cc", "warning", "w", "a", 1, ""),
        lint_error(),
        Error("debug", "bug", "b", "a", 1, "", severity="low"),
        Error("pytest", "test", "t", "a", None, ""),
        Error("mypy", "type", "y", "a", 1, ""),
        Error("debug", "bug", "b", "a", 2, "", severity="critical"),
        Error("make", "build", "exit 2", "", None, ""),
    ]
    assert [e.priority for e in order(errors)] == [
        "build",
        "critical",
        "type",
        "test",
        "low",
        "lint",
        "warning",
    ]


def test_next_error_skips_blocked_errors():
    first, second = lint_error(line=1), lint_error(code="F811", line=2, message="redefined")
    assert next_error([second, first]) == first
    assert next_error([first, second], blocked={first.identity}) == second
    assert next_error([first], blocked={first.identity}) is None


def test_an_error_is_blocked_after_three_failed_attempts():
    assert not is_blocked(2)
    assert is_blocked(3)


# --- compare ---


def ruff(*errors):
    return Count("ruff", list(errors))


def test_compare_fell_when_an_error_is_fixed():
    a, b = lint_error(line=1), lint_error(code="E501", line=2, message="too long")
    delta = compare([ruff(a, b)], [ruff(b)])
    assert (delta.verdict, delta.before, delta.after, delta.fixed) == ("fell", 2, 1, [a])


def test_compare_unchanged_when_nothing_changed():
    a = lint_error()
    assert compare([ruff(a)], [ruff(a)]).verdict == "unchanged"


def test_compare_an_error_that_shifted_lines_is_the_same_error():
    assert compare([ruff(lint_error(line=1))], [ruff(lint_error(line=7))]).verdict == "unchanged"


def test_compare_moved_when_the_count_is_equal_but_the_errors_differ():
    before = ruff(lint_error(message="`os` imported but unused"))
    after = ruff(lint_error(message="`sys` imported but unused"))
    delta = compare([before], [after])
    assert delta.verdict == "moved"
    assert len(delta.fixed) == len(delta.introduced) == 1


def test_compare_rose_when_a_change_adds_errors():
    a = lint_error()
    delta = compare([ruff(a)], [ruff(a, lint_error(code="E711", message="== None"))])
    assert delta.verdict == "rose"


def test_compare_queues_errors_revealed_by_fixing_a_syntax_error():
    syntax = Error("ruff", "build", "invalid-syntax", "bad.py", 3, "Expected a parameter")
    before = Count("ruff", [syntax], incomplete_files=frozenset({"bad.py"}))
    revealed = [lint_error(file="bad.py"), lint_error(file="bad.py", code="F811", message="x")]
    delta = compare([before], [ruff(*revealed)])
    assert delta.verdict == "fell"
    assert delta.revealed == revealed
    assert (delta.before, delta.after) == (1, 0)


def test_compare_queues_every_other_error_revealed_by_fixing_the_build():
    before = [parse_exit(2, "make"), Count("pytest", [])]
    failing_test = Error("pytest", "test", "t.py::test_a", "t.py", None, "")
    after = [parse_exit(0, "make"), Count("pytest", [failing_test])]
    delta = compare(before, after)
    assert (delta.verdict, delta.revealed) == ("fell", [failing_test])


def test_compare_counts_new_errors_in_a_complete_tool_as_introduced():
    before = [Count("ruff", []), Count("pytest", [], complete=True)]
    after = [ruff(lint_error()), Count("pytest", [])]
    delta = compare(before, after)
    assert (delta.verdict, len(delta.introduced)) == ("rose", 1)


def test_by_category_counts_errors_for_the_summary():
    counts = [ruff(lint_error(), lint_error(line=2)), parse_exit(1, "make")]
    assert by_category(counts) == {"lint": 2, "build": 1}

"""The fix lens without Snakemake: what a kept diff may not contain, the error commands."""

from __future__ import annotations

import pytest

from autoresearch.errors import SpecError
from autoresearch.modes.fix import count as counting
from autoresearch.modes.fix.stages import blocked_of, violations_of
from autoresearch.modes.lens.error_counts import Count, Error


def diff(path: str, removed: list[str], added: list[str]) -> str:
    lines = [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
    lines.append(f"@@ -1,{len(removed)} +1,{len(added)} @@")
    lines += [f"-{r}" for r in removed] + [f"+{a}" for a in added]
    return "\n".join(lines) + "\n"


CODE = "src/app.py"
TEST = "tests/test_app.py"


@pytest.mark.parametrize(
    ("patch", "kind"),
    [
        (diff(CODE, ["x = f()"], ["x = f()  # type: ignore"]), "new type: ignore"),
        (diff(CODE, ["import os"], ["import os  # noqa"]), "new noqa"),
        (diff(CODE, ["def f():"], ["def f():  # pragma: no cover"]), "new pragma: no cover"),
        (diff(CODE, ["def g():"], ["@pytest.mark.skip", "def g():"]), "new skipped test"),
        (diff(CODE, ["def g():"], ["@pytest.mark.xfail", "def g():"]), "new skipped test"),
        (diff("web/a.ts", ["let a = b;"], ["// @ts-ignore", "let a = b;"]), "new @ts-ignore"),
        (diff("web/a.js", ["f();"], ["// eslint-disable-next-line", "f();"]), "new eslint-disable"),
        (diff(CODE, ["    timeout = 5"], ["    timeout = 50"]), "raised timeout"),
        (
            diff(
                CODE,
                ["    f()"],
                ["    try:", "        f()", "    except Exception:", "        pass"],
            ),
            "empty exception handler",
        ),
    ],  # fmt: skip
    ids=[
        "type-ignore",
        "noqa",
        "pragma",
        "skip",
        "xfail",
        "ts-ignore",
        "eslint",
        "timeout",
        "empty-except",
    ],  # fmt: skip
)
def test_each_suppression_kind_is_refused(patch, kind):
    found = violations_of(patch, [], protect_tests=True)
    assert any(kind in v for v in found), found


def test_editing_a_test_file_is_refused_unless_allowed():
    patch = diff(TEST, ["    assert f() == 1"], ["    assert f() == 1", "    assert g()"])
    assert any("test file" in v for v in violations_of(patch, [], protect_tests=True))
    assert violations_of(patch, [], protect_tests=False) == []


def test_deleted_and_weakened_tests_are_refused_even_where_tests_may_change():
    deleted = diff(TEST, ["def test_f():", "    assert f() == 1"], [])
    weakened = diff(TEST, ["    assert f() == 1", "    assert g() == 2"], ["    assert f() == 1"])
    assert any("deleted test" in v for v in violations_of(deleted, [], protect_tests=False))
    assert any("weakened test" in v for v in violations_of(weakened, [], protect_tests=False))


def test_editing_the_guard_or_a_protected_file_is_refused():
    patch = diff("check.sh", ["exit 1"], ["exit 0"])
    assert any("protected file" in v for v in violations_of(patch, ["check.sh"], True))


def test_a_plain_fix_passes():
    assert violations_of(diff(CODE, ["return a - b"], ["return a + b"]), ["check.sh"], True) == []


def test_three_failed_attempts_block_an_error_and_a_kept_one_does_not_count():
    error = {"identity": "e1"}
    decisions = [{"error": error, "status": s} for s in ("reverted", "kept", "guard failed")]
    assert blocked_of(decisions) == set()
    decisions.append({"error": error, "status": "rejected: suppression"})
    assert blocked_of(decisions) == {"e1"}


def test_a_final_skip_blocks_an_error_at_its_first_attempt():
    # A deterministic backend's skip (ruff has no fix): a retry would skip it again.
    skipped = {"error": {"identity": "e1"}, "status": "skipped"}
    assert blocked_of([skipped]) == set()
    assert blocked_of([{**skipped, "final": True}]) == {"e1"}


def test_a_bad_parser_or_category_names_its_key():
    where = "config/sessions/f.yaml"
    with pytest.raises(SpecError, match=r"f\.yaml: key 'fix\.errors\.0\.parser': 'eslint'"):
        counting.resolve([{"command": "x", "parser": "eslint"}], where, [])
    with pytest.raises(SpecError, match=r"key 'fix\.errors\.0\.category'"):
        counting.resolve([{"command": "x", "parser": "regex:x", "category": "nit"}], where, [])
    with pytest.raises(SpecError, match="share the tool name 'exit'"):
        counting.resolve([{"command": "a", "parser": "exit"}, {"command": "b", "parser": "exit"}],
                         where, [])  # fmt: skip


def test_python_targets_count_test_failures_and_ruff_diagnostics_by_default():
    cmds = counting.resolve(None, "w", counting.default_commands("Python", "pytest -q", None))
    assert [(c.tool, c.parser) for c in cmds] == [("pytest", "pytest"), ("ruff", "ruff")]
    other = counting.resolve(None, "w", counting.default_commands("Go", "go test ./...", "go vet"))
    assert [(c.command, c.parser) for c in other] == [("go test ./...", "exit"), ("go vet", "exit")]


def test_a_stored_count_reads_back_identical_and_masked():
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    count = Count("ruff", [Error("ruff", "lint", "S105", "a.py", 3, f"token {secret}")])
    stored = counting.to_json(count)
    assert secret not in str(stored)
    again = counting.from_json(stored)
    twice = counting.from_json(counting.to_json(again))
    assert again.errors[0].identity == twice.errors[0].identity


def test_a_json_tool_that_prints_no_report_is_no_count_and_never_zero(tmp_path):
    missing = counting.ErrorCommand("echo 'No module named ruff' >&2; exit 1", "ruff", "ruff")
    count = counting.run(missing, tmp_path)
    assert not count.complete
    assert [(e.category, e.code) for e in count.errors] == [("build", counting.NO_REPORT)]
    assert "No module named ruff" in count.errors[0].message
    error = counting.unrunnable([missing], [count], "config/sessions/x.yaml")
    assert str(error).startswith("config/sessions/x.yaml: key 'fix.errors.0.command': ")
    clean = counting.ErrorCommand("echo '[]'", "ruff", "ruff")
    assert counting.run(clean, tmp_path).complete
    assert counting.unrunnable([clean], [counting.run(clean, tmp_path)], "x") is None

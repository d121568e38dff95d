"""`test_gate: batch`: each change is committed at once, the suite runs once at the stage's
end, and a failure is bisected; what stays on the branch is what `per_fix` keeps."""

from __future__ import annotations

import json

from conftest import CALC, git, make_repo, script_spec
from test_sweep import SCRIPT


def finding(n: int, title: str, location: str) -> dict:
    return {
        "tool": "report_finding",
        "args": {
            "severity": "high",
            "title": title,
            "location": location,
            "issue": f"problem {n}",
            "impact": "wrong results",
        },
    }


SUBTRACT = CALC.replace("a + b", "a - b")
NOTE = {"path": "calc.py", "old_str": "a - b", "new_str": "a - b  # note"}


def run(workflow, target, script: dict, **extra) -> dict:
    spec = script_spec(
        target, workflow.script(script), workflow.workdir / "t.jsonl", max_cycles=1, **extra
    )
    workflow.run("s", spec)
    return workflow.decision("s", 1)


def test_batch_keeps_what_per_fix_keeps_with_fewer_test_runs(workflow, target):
    decision = run(workflow, target, SCRIPT, test_gate="batch")
    worktree = workflow.session("s") / "worktree"
    subjects = git(worktree, "log", "--format=%s").splitlines()
    # The same branch as per_fix leaves (test_sweep): the fix that breaks test_add is gone.
    assert subjects[:3] == ["refactor: comment add", "fix: [F-001] guard empty mean", "initial"]
    assert "return a + b" in (worktree / "calc.py").read_text()
    assert [f["id"] for f in decision["fixed"]] == ["F-001"]
    patch = (workflow.session("s") / "cycles/001/green-patch.md").read_text()
    assert "[F-002] not kept: the stage's end test run, bisected, fails from this change on" in (
        patch
    )
    assert "tests/test_calc.py::test_add" in patch
    # The session's full runs: Green's end (F-002's tree, failing), the new end (F-001's
    # tree, which the bisection's one step ran test_add alone on) and Refactor's end.
    # Green's final run and evaluate's are trees tested already: not run again.
    runs = (workflow.session("s") / "test-runs.jsonl").read_text().splitlines()
    trees = [json.loads(line)["tree"] for line in runs if not json.loads(line)["selection"]]
    assert len(trees) == len(set(trees)) == 3
    log = (workflow.session("s") / "logs/green/001.log").read_text()
    assert "test gate: F-002 taken out" in log


def test_a_fix_built_on_one_taken_out_goes_too_and_an_independent_one_is_replayed(workflow, target):
    script = {
        "red": {
            1: [
                finding(1, "add is wrong", "calc.py:2"),
                finding(2, "add needs a note", "calc.py:2"),
                finding(3, "readme is short", "README.md:1"),
            ]
        },
        "green": {
            1: [
                # F-001 breaks test_add; F-002 edits the line F-001 wrote; F-003 is apart.
                {"tool": "write_file", "args": {"path": "calc.py", "content": SUBTRACT}},
                {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "subtract"}},
                {"tool": "edit_file", "args": NOTE},
                {"tool": "finish_fix", "args": {"finding_id": "F-002", "summary": "note"}},
                {"tool": "write_file", "args": {"path": "README.md", "content": "# calc\nAdds.\n"}},
                {"tool": "finish_fix", "args": {"finding_id": "F-003", "summary": "readme"}},
            ]
        },
    }  # fmt: skip
    decision = run(workflow, target, script, test_gate="batch", teams=["red", "green"])
    worktree = workflow.session("s") / "worktree"
    assert git(worktree, "log", "--format=%s").splitlines() == ["fix: [F-003] readme", "initial"]
    (kept,) = decision["fixed"]
    assert kept["id"] == "F-003" and kept["commit"] == git(worktree, "rev-parse", "HEAD")
    reasons = {s["id"]: s["reason"] for s in decision["skipped"]}
    assert "tests/test_calc.py::test_add" in reasons["F-001"]
    assert reasons["F-002"] == "not kept: it built on F-001, which was taken out"
    assert decision["tests_pass"] is True


def test_by_default_green_hears_its_change_is_committed_and_tested_at_the_end(workflow, target):
    run(workflow, target, SCRIPT, teams=["red", "green"])  # no test_gate: batch
    log = (workflow.session("s") / "logs/green/001.log").read_text()
    assert "the tests run once when the stage ends" in log


# A module per fix and a test file per module, so that a fix's own tests are a few of the
# suite's; the wrapper logs each run of the suite: the tree, the tests it was given as last
# failures ("-" for none), the arguments but for the report's path (new each run).
MODULES = 6
WRAPPER = """#!/bin/sh
picked=-
if [ -f .pytest_cache/v/cache/lastfailed ]; then
    picked=$(sha1sum < .pytest_cache/v/cache/lastfailed | cut -c1-12)
fi
echo "$(git write-tree) $picked $(echo "$*" | sed 's/--junitxml=[^ ]*//')" >> "{log}"
exec "$@"
"""


def modules_target(path):
    files = {}
    for k in range(MODULES):
        files[f"m{k}.py"] = f"def f{k}():\n    return {k}\n"
        files[f"tests/test_m{k}.py"] = (
            f"from m{k} import f{k}\n\n\ndef test_f{k}():\n    assert f{k}() == {k}\n"
        )
    return make_repo(path, files)


def fix(k: int, finding: int, breaks: bool) -> list[dict]:
    body = f'def f{k}():\n    """f{k}."""\n    return {k + 1 if breaks else k}\n'
    return [
        {"tool": "write_file", "args": {"path": f"m{k}.py", "content": body}},
        {"tool": "finish_fix", "args": {"finding_id": f"F-{finding:03d}", "summary": f"doc f{k}"}},
    ]  # fmt: skip


def test_a_sweep_tests_no_tree_twice_and_starts_bisecting_on_the_changed_files_tests(
    workflow, tmp_path
):
    target = modules_target(tmp_path / "modules")
    log = tmp_path / "runs.log"
    wrapper = tmp_path / "logged.sh"
    wrapper.write_text(WRAPPER.format(log=log))
    wrapper.chmod(0o755)
    # Cycle 1 documents f1..f3 and F-002 breaks f2; cycle 2 documents f4, f5 and breaks f5.
    script = {
        "red": {
            1: [finding(n, f"f{n} undocumented", f"m{n}.py:1") for n in (1, 2, 3)],
            2: [finding(n, f"f{n} undocumented", f"m{n}.py:1") for n in (4, 5)],
        },
        "green": {
            1: fix(1, 1, False) + fix(2, 2, True) + fix(3, 3, False),
            2: fix(4, 4, False) + fix(5, 5, True),
        },
    }
    spec = script_spec(
        target,
        workflow.script(script),
        workflow.workdir / "t.jsonl",
        test_command=f"{wrapper} python -m pytest -q",
        commands={"sandbox": "none"},  # the wrapper logs outside the worktree
        max_cycles=2,
        stop_below=None,
        teams=["red", "green"],
        test_gate="batch",
    )
    workflow.run("s", spec)
    session = workflow.session("s")
    first, second = workflow.decision("s", 1), workflow.decision("s", 2)
    assert [f["id"] for f in first["fixed"]] == ["F-001", "F-003"]
    assert [f["id"] for f in second["fixed"]] == ["F-004"]
    [broke_f2] = [s["reason"] for s in first["skipped"]]
    [broke_f5] = [s["reason"] for s in second["skipped"]]
    assert "tests/test_m2.py::test_f2" in broke_f2 and "tests/test_m5.py::test_f5" in broke_f5
    # No tree ran the same tests twice, in the whole session.
    runs = log.read_text().splitlines()
    assert len(runs) == len(set(runs)) > 6
    # Every run after setup's is filed under its tree, with what it was given.
    filed = [json.loads(line) for line in (session / "test-runs.jsonl").read_text().splitlines()]
    assert len(filed) == len(runs) - 1
    assert len({(e["tree"], e["command"], e["selection"]) for e in filed}) == len(filed)
    # Green's end in cycle 1 (F-003 on F-002) never had a full run: its changed files'
    # tests, the first run after setup's, failed. The end it kept had its full run.
    picks = [line.split()[:2] for line in runs]
    full = {tree for tree, chose in picks if chose == "-"}
    assert picks[1][1] != "-" and picks[1][0] not in full
    worktree = session / "worktree"
    assert git(worktree, "rev-parse", f"{first['end_commit']}^{{tree}}") in full
    green_log = (session / "logs/green/001.log").read_text()
    assert "tests of the changes: FAILED" in green_log

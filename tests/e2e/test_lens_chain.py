"""Chaining and masking through Snakemake: `chain: [debug]` runs debug as child session
<name>.1-debug on the security lens's handoff.json, and no secret planted in a target reaches
any file a lens writes under sessions/."""

from __future__ import annotations

import json

from conftest import CALC, CALC_TESTS, git, make_repo

REPRO = "from calc import mean\n\n\ndef test_empty_mean():\n    assert mean([]) == 0\n"
VULN = {
    "title": "mean crashes on empty input",
    "owasp": "A04",
    "stride": "D",
    "location": "calc.py:6",
    "scenario": "A caller sends no values and the service errors.",
    "evidence": "return sum(values) / len(values)",
    "confidence": "likely",
    "severity": "medium",
    "mitigation": "Reject empty input.",
}
BUG = {
    "title": "mean of an empty list divides by zero",
    "category": "crash",
    "location": "calc.py:6",
    "hypothesis": "I think mean([]) raises because len is 0; test by calling it.",
    "evidence": "ZeroDivisionError",
    "verdict": "confirmed",
    "severity": "high",
    "reproduction": REPRO,
}


def test_a_chain_runs_the_next_lens_as_a_child_session_fed_by_the_handoff(workflow, target):
    script = {
        "auditor": {1: [{"tool": "report_vulnerability", "args": VULN}]},
        "debugger": {1: [{"tool": "report_bug", "args": BUG}]},
    }
    spec = {
        "mode": "security",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "linter_command": "python -c 'pass'",
        "max_cycles": 1,
        "chain": ["debug"],
        "security": {"critical_assets": ["app"]},
        "agent": {"backend": "script", "script": str(workflow.script(script))},
    }
    workflow.run("ch", spec)
    root, child = workflow.session("ch"), workflow.session("ch.1-debug")
    assert "next lens: sessions/ch.1-debug" in (root / "done").read_text()
    assert "chained from: sessions/ch" in (child / "done").read_text()
    frozen = (child / "session.yaml").read_text()
    assert "mode: debug" in frozen and str(root / "handoff.json") in frozen
    leads = json.loads((child / "lens-setup.json").read_text())["leads"]
    assert [ld["source"] for ld in leads] == ["handed on"]
    assert "V-001 mean crashes on empty input (calc.py:6)" in leads[0]["text"]
    handoff = json.loads((child / "handoff.json").read_text())
    assert [f["verdict"] for f in handoff["findings"]] == ["confirmed"]
    again = workflow.run("ch", spec)
    assert "Nothing to be done" in again.stderr


AWS = "AKIAQ3EGRJ5UVWXYZ123"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
URL_PASSWORD = "Sup3rS3cretPw"
HEX = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
BASE64 = "q8Zr3Lx0Vt9BwK2mN7pYc4Hs6Jd1Fg5Ra"
KEY_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
SECRETS = [AWS, JWT, URL_PASSWORD, HEX, BASE64, KEY_BODY]
SETTINGS = f"""AWS_ACCESS_KEY_ID = "{AWS}"
SESSION_TOKEN = "{JWT}"
DATABASE = "postgres://admin:{URL_PASSWORD}@db.internal/app"
signing key {HEX}
BLOB = {BASE64}
"""
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\n"


def leak(title: str, line: int, evidence: str) -> dict:
    args = {**VULN, "title": title, "location": f"settings.py:{line}", "evidence": evidence}
    args["scenario"] = f"Anyone reading the code gets {evidence}"
    return {"tool": "report_vulnerability", "args": args}


def test_secrets_planted_in_a_target_reach_no_file_under_sessions(workflow, tmp_path):
    target = make_repo(
        tmp_path / "leaky",
        {
            "calc.py": CALC,
            "tests/test_calc.py": CALC_TESTS,
            "settings.py": SETTINGS,
            "deploy/id_rsa": PRIVATE_KEY,
            "README.md": f"# leaky\nThe staging token is {JWT}\n",
        },
    )
    lines = SETTINGS.splitlines()
    script = {
        "auditor": {
            1: [
                {"tool": "read_file", "args": {"path": "settings.py"}},
                {"tool": "read_file", "args": {"path": "deploy/id_rsa"}},
                *(leak(f"secret on line {n}: {line}", n, line) for n, line in enumerate(lines, 1)),
                leak("private key", 1, PRIVATE_KEY),
            ]
        }
    }
    spec = {
        "mode": "security",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "fail_on": "none",
        "security": {"critical_assets": ["app"]},
        "agent": {"backend": "script", "script": str(workflow.script(script))},
    }
    workflow.run("leak", spec)
    session = workflow.session("leak")
    written = [p for p in session.rglob("*") if p.is_file() and "worktree" not in p.parts]
    for path in written:
        text = path.read_text(errors="replace")
        for secret in SECRETS:
            assert secret not in text, f"{secret[:12]}… reached {path.relative_to(session)}"
    assert (session / "findings.md").read_text().count("<REDACTED>") >= len(SECRETS)
    assert "<REDACTED>" in (session / "setup.json").read_text()  # the README's token
    assert git(target, "status", "--porcelain") == ""


FIXED_CALC = CALC.replace(
    "    return sum(values) / len(values)",
    "    if not values:\n        return 0\n    return sum(values) / len(values)",
)


def debug_then_fix(workflow, target) -> dict:
    """A debug session that confirms BUG and hands it to a chained fix, which fixes it."""
    from autoresearch.modes.fix.count import error_id
    from autoresearch.modes.lens.error_counts import Error

    bug_id = error_id(Error("handoff", "bug", "B-001", "calc.py", None, BUG["title"]))
    script = {
        "debugger": {1: [{"tool": "report_bug", "args": BUG}]},
        "fix": {
            1: [
                {"tool": "write_file", "args": {"path": "calc.py", "content": FIXED_CALC}},
                {"tool": "finish_fix", "args": {"finding_id": bug_id, "summary": "empty mean"}},
            ]
        },
    }
    return {
        "mode": "debug",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "linter_command": "python -c 'pass'",
        "max_cycles": 1,
        "chain": ["fix"],
        "debug": {"symptom": "mean([]) crashes"},
        "agent": {"backend": "script", "script": str(workflow.script(script))},
    }


def test_a_debug_to_fix_chain_turns_a_confirmed_bug_into_a_kept_fix(workflow, target):
    spec = debug_then_fix(workflow, target)
    workflow.run("dx", spec)
    child = workflow.session("dx.1-fix")
    # The bug was confirmed by its failing reproduction, handed on, and fixed on the branch.
    handed = json.loads((child / "lens-setup.json").read_text())["handed"]
    assert [b["id"] for b in handed] == ["B-001"]
    done = (child / "done").read_text()
    assert "stopped: zero errors" in done and "errors: 1 → 0" in done
    worktree = child / "worktree"
    # The fix, then the harness's commit of the bug's reproduction as a regression test.
    subjects = git(worktree, "log", "--format=%s", "-2").splitlines()
    assert subjects[0] == "test: regression tests for B-001"
    assert subjects[1].startswith("fix: bug — calc.py")
    assert "if not values" in git(worktree, "show", "HEAD:calc.py")
    assert git(worktree, "show", "HEAD:tests/test_regression_b_001.py") == REPRO.strip()
    assert (
        git(worktree, "diff", "--name-only", "HEAD~1", "HEAD") == "tests/test_regression_b_001.py"
    )
    assert "regression tests added: 1" in done
    assert f"final commit: {git(worktree, 'rev-parse', 'HEAD')}" in done
    record = json.loads((child / "regression.json").read_text())
    assert record["added"] == [
        {"id": "B-001", "title": BUG["title"], "path": "tests/test_regression_b_001.py"}
    ]
    assert git(target, "status", "--porcelain") == ""  # the user's checkout is untouched


def test_a_regression_test_that_fails_where_it_would_live_is_left_out(workflow, tmp_path):
    # The tests folder's conftest makes every test there fail: the reproduction passes in the
    # scratch folder (so the bug counts as fixed) but not as a regression test.
    target = make_repo(
        tmp_path / "t",
        {
            "calc.py": CALC,
            "tests/test_calc.py": CALC_TESTS,
            "tests/conftest.py": "import pytest\n\n\n@pytest.fixture(autouse=True)\n"
            "def strict(request):\n"
            "    if 'regression' in request.node.nodeid:\n"
            "        pytest.fail('not here')\n",
        },
    )
    spec = debug_then_fix(workflow, target)
    workflow.run("dl", spec)
    child = workflow.session("dl.1-fix")
    worktree = child / "worktree"
    assert git(worktree, "log", "--format=%s", "-1").startswith("fix: bug — calc.py")
    record = json.loads((child / "regression.json").read_text())
    assert record["added"] == [] and record["commit"] == git(worktree, "rev-parse", "HEAD")
    assert record["left_out"][0].startswith("B-001: at tests/test_regression_b_001.py")
    assert "regression tests added: 0" in (child / "done").read_text()

"""The security lens through Snakemake: the bundled demo audited with no key, the finding
schema's drops counted, the cap, a kill -9 mid-iteration, a rerun after `done` was removed,
compare_with and diff_base, the gate's exit codes."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import ROOT, Workflow, calc_repo, git, wait_for

FOUND = {
    "title": "eval of user input",
    "owasp": "A03",
    "stride": "E",
    "cwe": "95",
    "location": "calc.py:2",
    "scenario": "An attacker passes code as a number.",
    "evidence": "return a + b",
    "confidence": "likely",
    "severity": "high",
    "mitigation": "Parse, do not evaluate.",
}


def vuln(**changes) -> dict:
    return {"tool": "report_vulnerability", "args": {**FOUND, **changes}}


def security_spec(workflow, target, script, name="script.yaml", **extra) -> dict:
    """A security spec replaying `script` (written to `name`: the frozen spec keeps the path,
    so a rerun replays whatever that file holds then)."""
    spec = {
        "mode": "security",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "security": {"critical_assets": ["app"]},
        "agent": {
            "backend": "script",
            "script": str(workflow.script(script, name)),
        },
    }
    return spec | extra


def log_rows(session) -> list[dict]:
    with (session / "security-results.tsv").open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def check_exit(workflow, name: str) -> int:
    cmd = [sys.executable, "-m", "autoresearch.cli", "check", name]
    return subprocess.run(
        cmd, cwd=workflow.workdir, env=workflow.env(), capture_output=True
    ).returncode


def test_the_bundled_demo_is_audited_with_no_key(workflow):
    # As `make demo` runs it: the bundled spec and example, from the checkout's root.
    (workflow.workdir / "examples").symlink_to(ROOT / "examples")
    workflow.run("demo-security")  # config/sessions/demo-security.yaml, the ruff backend
    session = workflow.session("demo-security")
    handoff = json.loads((session / "handoff.json").read_text())
    assert sorted(f["title"].split()[0] for f in handoff["findings"]) == [
        "S105", "S307", "S324", "S602",
    ]  # fmt: skip
    by_rule = {f["title"].split()[0]: f for f in handoff["findings"]}
    assert (by_rule["S602"]["owasp"], by_rule["S602"]["cwe"]) == ("A03", "CWE-78")
    assert (by_rule["S324"]["owasp"], by_rule["S324"]["stride"]) == ("A02", "I")
    overview = (session / "overview.md").read_text()
    # Every vector was tried, but no S rule checks A04 (insecure design): it is not covered.
    assert "Coverage: OWASP 9/10, STRIDE 6/6 (categories the auditor has a pattern check" in (
        overview
    )
    assert "it has none for A04)" in overview
    for name in ("threat-model.md", "attack-surface.md", "owasp-coverage.md", "recommendations.md"):
        assert (session / name).is_file(), name
    assert '<a id="v-001"></a>' in (session / "findings.md").read_text()
    assert check_exit(workflow, "demo-security") == 1
    written = [p for p in session.rglob("*") if p.is_file() and "worktree" not in p.parts]
    assert not any("hunter2-admin-2024" in p.read_text(errors="replace") for p in written)
    status = subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", "status", "demo-security"],
        cwd=workflow.workdir, env=workflow.env(), capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert "Coverage: OWASP 9/10, STRIDE 6/6" in status and "Gate: FAILED" in status


def test_schema_failures_and_duplicates_are_dropped_and_counted_and_the_cap_stops(workflow, target):
    script = {
        "auditor": {
            1: [vuln(), vuln(owasp="A11"), vuln(location="calc.py:400"), vuln(severity="urgent")],
            2: [vuln(), vuln(title="mean of nothing", location="calc.py:6", severity="low")],
        }
    }
    workflow.run("sec", security_spec(workflow, target, script, max_cycles=3, fail_on="critical"))
    session = workflow.session("sec")
    rows = log_rows(session)
    assert [(r["new"], r["dropped"], r["drop_reasons"]) for r in rows] == [
        ("1", "3", "location=1,not-allowed=2"),
        ("1", "1", "duplicate=1"),
        ("0", "0", ""),
    ]
    assert [r["category"] for r in rows] == ["stride:app:S", "stride:app:T", "stride:app:R"]
    decision = json.loads((session / "lens/003/decision.json").read_text())
    assert decision["reason"] == "iteration cap (3) reached"
    dropped = json.loads((session / "lens/001/checked.json").read_text())["dropped"]
    assert any("owasp 'A11' not allowed" in d["reason"] for d in dropped)
    # fail_on critical: a high finding passes the gate.
    assert "gate: PASSED" in (session / "done").read_text()
    assert check_exit(workflow, "sec") == 0


SLOW = {"auditor": {1: [vuln()], 2: [{"sleep": 60}, vuln(title="late")], "*": []}}
FAST = {"auditor": {1: [vuln()], 2: [vuln(title="late")], 4: [vuln()], "*": []}}


def kill_and_rerun(workflow, target):
    """Session k killed with -9 during its second iteration, then run again to its end."""
    spec = security_spec(workflow, target, SLOW, "k.yaml", max_cycles=3)
    proc = workflow.start("k", spec)
    session = workflow.session("k")
    wait_for(lambda: (session / "lens/001/decision.json").exists())
    wait_for(lambda: (session / "logs/lens_red/002.log").exists())
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (session / "lens/002/raw.json").exists()
    workflow.run("k", security_spec(workflow, target, FAST, "k.yaml", max_cycles=3))
    return workflow, session


@pytest.fixture(scope="module")
def killed_once(tmp_path_factory):
    """Session k killed and rerun, and session clean, the same audit never killed, made
    before any test changes the target: shared by the tests that only read k."""
    base = tmp_path_factory.mktemp("killed")
    workflow, target = Workflow(base / "work"), calc_repo(base / "target")
    workflow, session = kill_and_rerun(workflow, target)
    workflow.run("clean", security_spec(workflow, target, FAST, "clean.yaml", max_cycles=3))
    return workflow, target, session


def test_a_kill_mid_iteration_then_a_rerun_gives_the_same_files_without_duplicate_rows(
    killed_once,
):
    workflow, _, session = killed_once
    rows = log_rows(session)
    assert [r["iteration"] for r in rows] == ["1", "2", "3"]
    assert len({r["run_id"] for r in rows}) == 1
    clean = workflow.session("clean")
    for name in ("findings.md", "owasp-coverage.md", "recommendations.md"):
        ours = (session / name).read_text().replace("sessions/k", "S").replace(": k", ": S")
        theirs = (clean / name).read_text().replace("sessions/clean", "S").replace(": clean", ": S")
        assert ours == theirs, name
    results = (session / "results.tsv").read_text().splitlines()
    assert len(results) == 4  # the header and one row per iteration


def test_a_rerun_after_done_is_removed_adds_a_new_run_under_the_old_rows(workflow, target):
    # The audit of k run to its end (the killed and rerun one reads as it: the test above).
    workflow.run("k", security_spec(workflow, target, FAST, "k.yaml", max_cycles=3))
    session = workflow.session("k")
    (session / "done").unlink()
    workflow.run("k", security_spec(workflow, target, FAST, "k.yaml", max_cycles=3))
    rows = log_rows(session)
    runs = list(dict.fromkeys(r["run_id"] for r in rows))
    assert len(runs) == 2 and [r["iteration"] for r in rows] == ["1", "2", "3"] * 2
    assert rows[3]["drop_reasons"] == "duplicate=1"  # run 2 re-reported run 1's finding
    assert (session / "done").exists()


def test_compare_with_labels_findings_and_diff_base_limits_the_audit(killed_once):
    workflow, target, _ = killed_once
    (target / "calc.py").write_text((target / "calc.py").read_text() + "\n# touched\n")
    git(target, "commit", "-qam", "touch calc")
    reports = [
        vuln(),
        vuln(title="new one", location="calc.py:5"),
        vuln(title="elsewhere", location="tests/test_calc.py:1"),
    ]
    script = {"auditor": {1: reports}}
    spec = security_spec(
        workflow, target, script, "cmp.yaml", max_cycles=1, compare_with="k", diff_base="HEAD~1"
    )
    workflow.run("cmp", spec)
    session = workflow.session("cmp")
    findings = (session / "findings.md").read_text()
    assert "eval of user input [recurring]" in findings
    assert "new one [new]" in findings
    assert "## Fixed since the compared session" in findings  # k's "late" is gone
    assert "elsewhere" not in findings
    assert log_rows(session)[0]["drop_reasons"] == "scope=1"


EVAL_CALC = 'import os\n\n\ndef evaluate(expr):\n    return eval(expr)\n\n\nTOKEN = "abc"\n'
EVAL_TESTS = "from calc import evaluate\n\n\ndef test_number():\n    assert evaluate('3') == 3\n"
SAFE_CALC = EVAL_CALC.replace("import os", "import ast\nimport os").replace(
    "return eval(expr)", "return ast.literal_eval(expr)"
)
ENV_TOKEN = SAFE_CALC.replace('TOKEN = "abc"', 'TOKEN = os.environ.get("TOKEN", "")')


def write(content: str) -> dict:
    return {"tool": "write_file", "args": {"path": "calc.py", "content": content}}


def finish(fid: str) -> dict:
    return {"tool": "finish_fix", "args": {"finding_id": fid, "summary": f"fix {fid}"}}


def test_fix_true_fixes_only_confirmed_critical_and_high_findings_each_rechecked(
    workflow, tmp_path
):
    from conftest import make_repo

    target = make_repo(
        tmp_path / "evalrepo", {"calc.py": EVAL_CALC, "tests/test_calc.py": EVAL_TESTS}
    )
    head = git(target, "rev-parse", "HEAD")
    token = dict(title="hard-coded token", location="calc.py:8", severity="critical")
    script = {
        "auditor": {
            1: [
                vuln(location="calc.py:5", confidence="confirmed"),  # V-001: fixed
                vuln(**token, confidence="confirmed"),  # V-002: never fixed
                vuln(title="likely only", location="calc.py:5"),  # V-003: not confirmed
                vuln(
                    title="medium", location="calc.py:4", confidence="confirmed", severity="medium"
                ),
            ],
            "V-002/recheck-2": [vuln(**{**token, "location": "calc.py:9"})],
            "*": [],
        },
        "green": {
            "V-001/1": [write(SAFE_CALC), finish("V-001")],
            "V-002/1": [write("def evaluate(expr):\n    return 0\n"), finish("V-002")],
            "V-002/2": [write(ENV_TOKEN), finish("V-002")],
            "V-002/3": [{"tool": "skip_finding", "args": {"finding_id": "V-002", "reason": "no"}}],
        },
    }
    spec = security_spec(
        workflow, target, script, max_cycles=1, security={"critical_assets": ["app"], "fix": True}
    )
    workflow.run("fx", spec)
    session = workflow.session("fx")
    results = json.loads((session / "security-fix.json").read_text())["results"]
    assert [(r["id"], r["status"], r["attempts"]) for r in results] == [
        ("V-001", "fixed", 1),
        ("V-002", "not fixed", 3),
    ]
    assert results[1]["tries"] == [
        "not kept: tests fail: tests/test_calc.py::test_number",  # named, not an exit code
        "the re-check still finds it; the fix was reverted",
        "skipped: no",
    ]
    branch = json.loads((session / "setup.json").read_text())["branch"]
    assert git(target, "log", "--format=%s", f"{head}..{branch}").splitlines() == [
        "fix: [V-001] fix V-001"
    ]
    assert git(target, "rev-parse", "HEAD") == head and git(target, "status", "--porcelain") == ""
    findings = (session / "findings.md").read_text()
    assert "[fixed]" in findings and "[not fixed]" in findings
    assert "fixes kept: 1" in (session / "done").read_text()


def test_a_committed_link_to_a_key_file_reaches_no_session_file(workflow, target, tmp_path):
    """The user's report: requirements.txt committed as a link to a key outside the repo."""
    key = tmp_path / "deploy.key"
    key.write_text("KEYLINE-0xfeedface\n")
    (target / "requirements.txt").symlink_to(key)
    git(target, "add", "requirements.txt")
    git(target, "commit", "-qm", "requirements")
    workflow.run("link", security_spec(workflow, target, {"auditor": {1: []}}, max_cycles=1))
    session = workflow.session("link")
    written = [p for p in session.rglob("*") if p.is_file() and "worktree" not in p.parts]
    assert not [p.name for p in written if "KEYLINE" in p.read_text(errors="replace")]
    surface = (session / "attack-surface.md").read_text()
    assert "requirements.txt: not read: 'requirements.txt' leads outside" in surface

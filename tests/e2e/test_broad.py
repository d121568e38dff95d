"""Broad mode: hypotheses, approval, parallel tracks, the clean room between them, stop
rules, the comparison, and the same session run through a (local) cluster executor."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, Workflow, git, make_repo

CALC = """\
def add(a, b):
    return a + b


def mean(values):
    return sum(values) / len(values)


def scale(values, k):
    return [v * k for v in values]
"""
TESTS = """\
import os

from calc import add, mean, scale


def test_add():
    assert add(2, 3) == 5


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_scale():
    assert scale([1, 2], 3) == [3, 6]


def test_no_break_marker():
    # Stands in for a test environment a track can break beyond what a clean checkout of
    # its commit undoes: a file outside the worktree (one per worktree), which a test run
    # can make when commands run without a jail.
    name = os.getcwd().replace(os.sep, "_")
    assert not os.path.exists(os.path.join(os.environ.get("BREAK_DIR", "/nonexistent"), name))
"""
BREAK = (
    "import os\n"
    "name = os.getcwd().replace(os.sep, '_')\n"
    "open(os.path.join(os.environ['BREAK_DIR'], name), 'w').close()\n"
)
FILES = {
    "calc.py": CALC,
    "tests/test_calc.py": TESTS,
    "README.md": "# calc\n",
    ".gitignore": ".break\n",
}


def finding(title: str, location: str, issue: str, severity: str = "high") -> dict:
    return {
        "tool": "report_finding",
        "args": {
            "severity": severity,
            "title": title,
            "location": location,
            "issue": issue,
            "impact": "Callers get wrong results.",
        },
    }


def edit(old: str, new: str) -> dict:
    return {"tool": "edit_file", "args": {"path": "calc.py", "old_str": old, "new_str": new}}


def fix(fid: str, summary: str) -> dict:
    return {"tool": "finish_fix", "args": {"finding_id": fid, "summary": summary}}


def propose(hid: str, category: str, name: str) -> dict:
    statement = f"Trying {name} moves the aspiration forward."
    args = {"id": hid, "category": category, "name": name, "statement": statement}
    return {"tool": "propose_hypothesis", "args": args}


THREE = [
    propose("h1", "obvious", "guard inputs"),
    propose("h2", "bold", "drop the helpers"),
    propose("h3", "creative", "marker files"),
]

# max_cycles 2: h1 keeps a fix in each of its two cycles (ends at max_cycles); h2 keeps
# nothing (ends after two empty cycles); h3 breaks the test environment beyond repair.
SCRIPT = {
    "strategist": {1: THREE},
    "red": {
        "h1/1": [finding("ALPHA empty mean", "calc.py:6", "ALPHA-SECRET mean([]) divides by 0.")],
        "h1/2": [finding("ALPHA scale types", "calc.py:10", "ALPHA-SECRET scale takes a str k.")],
        "h2/1": [finding("BETA odd idea", "calc.py:1", "BETA-SECRET add could be sum().")],
        "h2/2": [finding("BETA odd idea 2", "calc.py:1", "BETA-SECRET add again.")],
        "h3/1": [
            finding("GAMMA scale", "calc.py:9", "GAMMA-SECRET scale copies the list."),
            finding("GAMMA add", "calc.py:1", "GAMMA-SECRET add is too simple.", "low"),
        ],
    },
    "green": {
        "h1/1": [
            edit(
                "    return sum(values)",
                "    if not values:  # ALPHA_DIFF\n"
                "        raise ValueError('empty')\n    return sum(values)",
            ),
            fix("F-001", "guard empty mean"),
        ],
        "h1/2": [
            edit("def scale(values, k):", "def scale(values, k):  # ALPHA_DIFF2"),
            fix("F-002", "note scale"),
        ],
        "h2/1": [{"tool": "skip_finding", "args": {"finding_id": "F-001", "reason": "no"}}],
        "h2/2": [{"tool": "skip_finding", "args": {"finding_id": "F-002", "reason": "no"}}],
        "h3/1": [
            edit("    return [v * k", "    # GAMMA_DIFF\n    return [v * k"),
            fix("F-001", "comment scale"),
            # A conftest that breaks the environment when the tests run.
            {"tool": "write_file", "args": {"path": "tests/conftest.py", "content": BREAK}},
            {"tool": "run_tests", "args": {}},
            {"tool": "skip_finding", "args": {"finding_id": "F-002", "reason": "later"}},
        ],
    },
    "refactor": {
        "h1/1": [
            edit("raise ValueError('empty')", 'raise ValueError("empty")'),
            {"tool": "finish_refactor", "args": {"summary": "quote style"}},
        ],
    },
}


def broad_spec(target: Path, workdir: Path, **extra) -> dict:
    script = workdir / "script.yaml"
    script.write_text(json.dumps(SCRIPT))
    spec = {
        "mode": "broad",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "aspiration": "Make calc dependable.",
        "max_cycles": 2,
        "agent": {
            "backend": "script",
            "script": str(script),
            "transcript": str(workdir / "transcript.jsonl"),
        },
    }
    spec.update(extra)
    return spec


def subjects(repo: Path, rev_range: str) -> list[str]:
    out = git(repo, "log", "--format=%s", rev_range)
    return out.splitlines() if out else []


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """One three-track session with the strategist, run locally with --cores 3."""
    base = tmp_path_factory.mktemp("broad-local")
    target = make_repo(base / "target", FILES)
    wf = Workflow(base / "work")
    (base / "breaks").mkdir()
    wf.extra_env["BREAK_DIR"] = str(base / "breaks")
    start = time.monotonic()
    # No jail: h3's test run must reach the folder outside its worktree.
    wf.run(
        "b",
        broad_spec(target, wf.workdir, commands={"sandbox": "none", "pass_env": ["BREAK_DIR"]}),
        cores=3,
    )
    return SimpleNamespace(wf=wf, target=target, seconds=time.monotonic() - start)


# --- end to end --------------------------------------------------------------------------


def test_strategist_hypotheses_and_tracks(local_run):
    session = local_run.wf.session("b")
    text = (session / "hypotheses.md").read_text()
    assert "## h1 [obvious] guard inputs" in text and "## h3 [creative] marker files" in text
    approved = json.loads((session / "hypotheses.json").read_text())
    assert [h["id"] for h in approved["hypotheses"]] == ["h1", "h2", "h3"]
    base = json.loads((session / "setup.json").read_text())["base_commit"]
    for hid in ("h1", "h2", "h3"):
        meta = json.loads((session / "tracks" / hid / "track.json").read_text())
        assert meta["branch"] == f"autoresearch/broad/b/{hid}"
        assert meta["base_commit"] == base
        worktree = session / "tracks" / hid / "worktree"
        assert git(worktree, "rev-parse", "--abbrev-ref", "HEAD") == meta["branch"]
        # Fresh from the base commit: no track carries another track's commits.
        assert git(worktree, "merge-base", "HEAD", base) == base
        assert (session / "cycles" / hid / "001" / "decision.json").is_file()
    assert subjects(local_run.target, f"{base}..autoresearch/broad/b/h1") == [
        "fix: [F-002] note scale",
        "refactor: quote style",
        "fix: [F-001] guard empty mean",
    ]
    assert subjects(local_run.target, f"{base}..autoresearch/broad/b/h2") == []
    # The user's checkout is untouched.
    assert git(local_run.target, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(local_run.target, "status", "--porcelain") == ""


def test_track_termination_rules(local_run):
    wf = local_run.wf
    results = {
        hid: json.loads((wf.session("b") / "tracks" / hid / "result.json").read_text())
        for hid in ("h1", "h2", "h3")
    }
    assert results["h1"]["status"] == "complete"
    assert results["h1"]["cycles"] == 2
    assert results["h1"]["reason"] == "max_cycles reached (2 per track)"
    assert results["h2"]["status"] == "complete" and results["h2"]["cycles"] == 2
    assert results["h2"]["reason"] == "two consecutive cycles with zero Green commits"
    assert results["h3"]["status"] == "aborted" and results["h3"]["cycles"] == 1
    assert "tests broke" in results["h3"]["reason"]
    assert not (wf.session("b") / "cycles" / "h3" / "002").exists()
    summary = (wf.session("b") / "session.md").read_text()
    assert "| h1 | obvious | guard inputs |" in summary
    assert "| autoresearch/broad/b/h3 | aborted |" in summary
    assert "| autoresearch/broad/b/h2 | complete |" in summary


def test_comparison_names_winner_and_merge_command(local_run):
    wf, target = local_run.wf, local_run.target
    text = (wf.session("b") / "comparison.md").read_text()
    assert "## Ranking" in text and "**h1** on branch `autoresearch/broad/b/h1`" in text
    assert f"git -C {target} merge autoresearch/broad/b/h1" in text
    ranking = json.loads((wf.session("b") / "comparison.json").read_text())["ranking"]
    assert ranking[0] == "h1"
    done = (wf.session("b") / "done").read_text()
    assert "winner: h1" in done and "merge with: git -C" in done
    # Losing branches are kept.
    branches = git(target, "branch", "--list", "autoresearch/broad/b/*")
    assert all(f"autoresearch/broad/b/{h}" in branches for h in ("h1", "h2", "h3"))
    rows = (wf.session("b") / "results.tsv").read_text().splitlines()[1:]
    tracks = {row.split("\t")[7] for row in rows}
    assert tracks == {"h1", "h2", "h3"}
    assert len(rows) == 2 * 3 + 2 * 3 + 3  # red, green, refactor per cycle


def test_clean_room_between_tracks(local_run):
    briefs = local_run.wf.transcript(local_run.wf.workdir / "transcript.jsonl")
    secrets = {"h1": ("ALPHA",), "h2": ("BETA",), "h3": ("GAMMA",)}
    by_track: dict[str, list[dict]] = {}
    for brief in briefs:
        if brief["team"] != "strategist":
            by_track.setdefault(brief["data"]["track"], []).append(brief)
    assert set(by_track) == {"h1", "h2", "h3"}
    for hid, own in by_track.items():
        text = json.dumps(own)
        for other, words in secrets.items():
            if other != hid:
                for word in words:
                    assert word not in text, f"{hid} saw {other}'s {word}"
    h2_red = [b for b in by_track["h2"] if b["team"] == "red"]
    assert "drop the helpers" in h2_red[0]["task"] and "guard inputs" not in h2_red[0]["task"]
    assert "Make calc dependable." in h2_red[0]["task"]


def test_rerun_is_a_no_op(local_run):
    proc = local_run.wf.run("b", None)
    assert "Nothing to be done" in proc.stderr or "Nothing to be done" in proc.stdout


def test_cluster_generic_run_matches_local(local_run, tmp_path):
    """Each job a process of its own through the cluster-generic profile: the first cycle of
    every track makes the same decision and the same tree as the local run's first cycle
    (one cycle: every kind of job is submitted, at half the cost of two)."""
    target = make_repo(tmp_path / "target", FILES)
    wf = Workflow(tmp_path / "work")
    (tmp_path / "breaks").mkdir()
    wf.extra_env["BREAK_DIR"] = str(tmp_path / "breaks")
    wf.run(
        "b",
        broad_spec(
            target,
            wf.workdir,
            max_cycles=1,
            commands={"sandbox": "none", "pass_env": ["BREAK_DIR"]},
        ),
        "--profile",
        str(ROOT / "profiles" / "cluster-generic"),
        cores=3,
    )
    same = ("fixed", "skipped", "reverted", "tests_pass", "files_changed", "refactor_changes")

    def first_cycle(run_wf: Workflow, hid: str) -> dict:
        decision = run_wf.decision("b", 1, hid)
        for item in decision.get("fixed", []) + decision.get("reverted", []):
            item.pop("commit", None)  # commit ids differ; the trees are compared below
        return {k: decision.get(k) for k in same} | {"end_commit": decision["end_commit"]}

    for hid in ("h1", "h2", "h3"):
        mine, theirs = first_cycle(wf, hid), first_cycle(local_run.wf, hid)
        assert {k: mine[k] for k in same} == {k: theirs[k] for k in same}, hid
        assert git(target, "rev-parse", f"autoresearch/broad/b/{hid}^{{tree}}") == git(
            local_run.target, "rev-parse", f"{theirs['end_commit']}^{{tree}}"
        ), hid
        assert mine["fixed"] or mine["skipped"], hid  # each track did work on the cluster


# --- approval ---------------------------------------------------------------------------


GIVEN = [
    {"id": "h1", "category": "obvious", "name": "guard", "statement": "Guard the inputs."},
    {"id": "h2", "category": "bold", "name": "drop", "statement": "Drop the helpers."},
    {"id": "h3", "category": "creative", "name": "markers", "statement": "Use markers."},
]


def test_manual_approval_stops_refuses_an_edit_that_drops_a_category_then_continues(tmp_path):
    # One session through the approval: its stop, a refused edit, then an accepted one (the
    # refusal needs a session stopped there, which costs a setup of its own otherwise).
    target = make_repo(tmp_path / "target", FILES)
    wf = Workflow(tmp_path / "work")
    spec = broad_spec(target, wf.workdir, hypotheses=GIVEN, approve="manual", max_cycles=1)
    spec.pop("aspiration")
    first = wf.run("m", spec, cores=3, check=False)
    assert first.returncode != 0
    assert "waits for your approval" in first.stderr
    assert "sessions/m/hypotheses.md" in first.stderr
    assert "touch sessions/m/approved" in first.stderr
    assert "MissingInputException" not in first.stderr
    session = wf.session("m")
    assert (session / "hypotheses.md").is_file()
    assert not (session / "tracks").exists() and not (session / "hypotheses.json").exists()
    text = (session / "hypotheses.md").read_text()
    # An edit that leaves no creative hypothesis is refused, and no track starts.
    (session / "hypotheses.md").write_text(text.replace("[creative]", "[adjacent]"))
    (session / "approved").touch()
    refused = wf.run("m", spec, cores=3, check=False)
    assert refused.returncode != 0
    assert "sessions/m/hypotheses.md cannot be used: no creative hypothesis" in refused.stderr
    assert not (session / "tracks").exists() and not (session / "hypotheses.json").exists()
    # The person drops h2's idea for another bold one instead, then approves.
    text = text.replace("## h2 [bold] drop\nDrop the helpers.", "## h2 [bold] inline\nInline all.")
    (session / "hypotheses.md").write_text(text)
    (session / "approved").touch()
    wf.run("m", spec, cores=3)
    approved = json.loads((session / "hypotheses.json").read_text())
    assert approved["approval"] == "manual"
    assert approved["hypotheses"][1]["name"] == "inline"
    assert (session / "comparison.md").is_file() and (session / "done").is_file()
    assert not (wf.workdir / "transcript.jsonl").exists() or all(
        b["team"] != "strategist" for b in wf.transcript(wf.workdir / "transcript.jsonl")
    )


# --- strategist retry ----------------------------------------------------------------------


def test_strategist_gets_one_retry_with_the_reason(tmp_path):
    target = make_repo(tmp_path / "target", FILES)
    wf = Workflow(tmp_path / "work")
    spec = broad_spec(target, wf.workdir)
    script = {"strategist": {1: THREE[:2], 2: THREE}}
    (wf.workdir / "script.yaml").write_text(json.dumps(script))
    wf.run("r", spec, target="sessions/r/hypotheses.md")
    briefs = [b for b in wf.transcript(wf.workdir / "transcript.jsonl")]
    assert [b["data"]["attempt"] for b in briefs] == [1, 2]
    assert "only 2 hypotheses" in briefs[1]["task"]
    assert "not accepted" not in briefs[0]["task"]
    assert set(briefs[0]["tools"]) == {"list_files", "read_file", "search", "propose_hypothesis"}
    assert "## h3 [creative]" in (wf.session("r") / "hypotheses.md").read_text()


def test_strategist_fails_clearly_after_the_retry(tmp_path):
    target = make_repo(tmp_path / "target", FILES)
    wf = Workflow(tmp_path / "work")
    spec = broad_spec(target, wf.workdir)
    (wf.workdir / "script.yaml").write_text(json.dumps({"strategist": {"*": THREE[:2]}}))
    proc = wf.run("r", spec, target="sessions/r/hypotheses.md", check=False)
    assert proc.returncode != 0
    assert "did not produce a usable set of hypotheses in 2 attempts" in proc.stderr
    assert "key 'hypotheses'" in proc.stderr
    assert not (wf.session("r") / "hypotheses.md").exists()


# --- stop rules (unit) ---------------------------------------------------------------------


# --- winner (unit) -------------------------------------------------------------------------


# --- sequential tracks and status (unit) ------------------------------------------------


def test_a_track_moved_on_from_ends_and_the_next_starts_and_fixes_kept_rank_says_so(tmp_path):
    target = make_repo(tmp_path / "target", FILES)
    wf = Workflow(tmp_path / "work")
    (tmp_path / "breaks").mkdir()
    wf.extra_env["BREAK_DIR"] = str(tmp_path / "breaks")
    spec = broad_spec(
        target, wf.workdir, hypotheses=GIVEN, parallel=False, commands={"sandbox": "none"}
    )
    first = wf.run("mv", spec, target="sessions/mv/session.yaml")
    assert "warning: ranked by fixes kept: set `aspiration_metric`" in first.stderr
    session = wf.session("mv")
    # The person moves on from h1 (it would keep a fix in each of its two cycles): the
    # loop reads the file at the end of each cycle, so one made now ends it after its first.
    (session / "tracks/h1").mkdir(parents=True)
    (session / "tracks/h1/move-on").touch()
    wf.run("mv", spec, cores=3)
    h1 = [p.name for p in (session / "cycles/h1").iterdir() if p.name.isdigit()]
    assert h1 == ["001"]
    decision = json.loads((session / "cycles/h1/001/decision.json").read_text())
    assert decision["reason"].startswith("moved on: sessions/mv/tracks/h1/move-on")
    assert (session / "cycles/h2/001/decision.json").exists()  # the next track ran
    comparison = (session / "comparison.md").read_text()
    assert "Note: ranked by fixes kept: set `aspiration_metric` or `aspiration_judge`" in (
        comparison
    )
    setup = json.loads((session / "setup.json").read_text())
    assert any("ranked by fixes kept" in w for w in setup["warnings"])

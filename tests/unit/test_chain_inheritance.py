"""A chained lens takes on only what its parent stands by: the confirmed items of the
parent's handoff.json, never the hypotheses it eliminated or the leads it left open."""

from __future__ import annotations

import json
from pathlib import Path

from autoresearch import modes
from autoresearch.engine import chain
from autoresearch.modes.lens import Lens
from autoresearch.session.record import SetupRecord

CONFIRMED = {
    "id": "B-001",
    "verdict": "confirmed",
    "severity": "high",
    "title": "parse() drops the last field",
    "file": "app.py",
    "line": 3,
    "location": "app.py:3",
    "hypothesis": "the split is off by one",
    "evidence": "fields = line.split(',')[:-1]",
}
ELIMINATED = {
    "id": "B-002",
    "verdict": "disproven",
    "severity": "medium",
    "title": "ELIMINATED-TITLE the cache is stale",
    "file": "cache.py",
    "line": 9,
    "location": "cache.py:9",
    "hypothesis": "ELIMINATED-HYPOTHESIS the cache outlives a reload",
    "evidence": "ELIMINATED-EVIDENCE reload clears it",
}
OPEN_LEAD = {**ELIMINATED, "id": "B-003", "verdict": "new-lead", "title": "LEAD-TITLE a retry"}
# A lens without verdicts (security, scenario): every finding is one it stands by.
PLAIN = {"id": "S-001", "severity": "high", "title": "shell=True", "file": "run.py", "line": 1}


def parent_handoff(tmp_path: Path, findings: list[dict]) -> Path:
    path = tmp_path / "audit" / "handoff.json"
    path.parent.mkdir(parents=True)
    data = {
        "lens": "debug",
        "session": "audit",
        "commit": "c0ffee",
        "gate": "FAILED",
        "files": sorted({f["file"] for f in findings}),
        "findings": findings,
    }
    path.write_text(json.dumps(data))
    return path


def record() -> SetupRecord:
    return SetupRecord(
        "audit.1-x", "x", "0.1.0", "/t", None, "pytest", None, "b", "c", {}, "", None, ""
    )


class Child(Lens):
    name = "child"


def test_a_child_inherits_the_confirmed_items_and_the_parents_identity(tmp_path):
    path = parent_handoff(tmp_path, [CONFIRMED, ELIMINATED, OPEN_LEAD, PLAIN])
    got = chain.inherited(path)
    assert [f["id"] for f in got["findings"]] == ["B-001", "S-001"]
    assert got["files"] == ["app.py", "run.py"]  # cache.py came only from eliminated items
    assert (got["lens"], got["session"], got["commit"]) == ("debug", "audit", "c0ffee")


def test_an_eliminated_hypothesis_does_not_reach_the_childs_setup_file(tmp_path):
    path = parent_handoff(tmp_path, [CONFIRMED, ELIMINATED, OPEN_LEAD])
    child = Child()
    layout = child.layout(tmp_path / "audit.1-child")
    layout.root.mkdir()
    child.setup.on_setup(layout, record(), {"handoff": str(path)}, lambda _: None)
    text = child.setup_path(layout).read_text()
    assert "B-001" in text
    for word in ("ELIMINATED", "B-002", "LEAD-TITLE", "B-003", "cache.py"):
        assert word not in text, word


def test_a_chained_debug_lens_takes_no_eliminated_hypothesis_as_a_lead(tmp_path):
    path = parent_handoff(tmp_path, [CONFIRMED, ELIMINATED, OPEN_LEAD])
    debug = modes.get("debug")
    layout = debug.layout(tmp_path / "audit.1-debug")
    values = {"handoff": str(path), "debug": {"symptom": "parse is wrong"}, "test_timeout_s": 9}
    leads = debug.recon(layout, record(), values, lambda _: None, None)["leads"]
    handed = [lead["text"] for lead in leads if lead["source"] == "handed on"]
    assert handed == ["B-001 parse() drops the last field (app.py:3)"]


def test_a_fix_lens_is_handed_only_the_confirmed_bugs(tmp_path):
    path = parent_handoff(tmp_path, [CONFIRMED, ELIMINATED, OPEN_LEAD])
    handed = modes.get("fix").handed_findings_of({"handoff": str(path)})
    assert [f["id"] for f in handed] == ["B-001"]

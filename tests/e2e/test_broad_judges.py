"""Broad mode with a judge panel (script backend): each track's diff is voted on against
the aspiration by several judges, blind to the track's id, hypothesis and branch; the
votes rank the tracks ahead of fixes kept and the reasons go into comparison.md."""

from __future__ import annotations

import json

import pytest
from conftest import Workflow, make_repo
from test_broad import FILES, edit, finding, fix

HYPOTHESES = [
    {"id": "h1", "category": "obvious", "name": "QUILL-guards", "statement": "QUILL guards."},
    {"id": "h2", "category": "bold", "name": "MARLIN-scale", "statement": "MARLIN scaling."},
    {"id": "h3", "category": "creative", "name": "OSPREY-none", "statement": "OSPREY idle."},
]


def cast(verdict: str, reason: str) -> list[dict]:
    return [{"tool": "cast_vote", "args": {"verdict": verdict, "reason": reason}}]


# By diff size: h3 changes nothing (change A), h2 one line (B), h1 several (C).
SCRIPT = {
    "red": {
        f"{hid}/1": [finding(f"{hid} issue", "calc.py:1", f"{hid} thing.")]
        for hid in ("h1", "h2", "h3")
    },
    "green": {
        "h1/1": [
            edit(
                "    return sum(values)",
                "    if not values:\n        raise ValueError\n    return sum(values)",
            ),
            fix("F-001", "guard empty mean"),
        ],
        "h2/1": [edit("    return [v * k", "    return [k * v"), fix("F-001", "scale")],
        "h3/1": [{"tool": "skip_finding", "args": {"finding_id": "F-001", "reason": "no"}}],
    },
    "judge": {
        **{f"A/{n}": cast("not met", "nothing changed") for n in (1, 2, 3)},
        **{f"B/{n}": cast("met", f"B reason {n}") for n in (1, 2, 3)},
        "C/1": cast("met", "C helps"),
        "C/2": cast("not met", "C misses the point"),
        "C/3": cast("not met", "C is noise"),
    },
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    base = tmp_path_factory.mktemp("broad-judges")
    target = make_repo(base / "target", FILES)
    wf = Workflow(base / "work")
    transcript = wf.workdir / "transcript.jsonl"
    spec = {
        "mode": "broad",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "aspiration": "Make calc dependable.",
        "aspiration_judge": {"panel": 3},
        "hypotheses": HYPOTHESES,
        "max_cycles": 1,
        "teams": ["red", "green"],
        "agent": {
            "backend": "script",
            "script": str(wf.script(SCRIPT)),
            "transcript": str(transcript),
        },
    }
    wf.run("j", spec, cores=2)
    return wf, transcript


def test_the_judges_votes_rank_ahead_of_fixes_kept(judged):
    wf, _ = judged
    data = json.loads((wf.session("j") / "comparison.json").read_text())
    assert data["ranking"][:2] == ["h2", "h1"] and data["winner"]["id"] == "h2"
    h1, h2 = data["tracks"]["h1"]["judges"], data["tracks"]["h2"]["judges"]
    assert (h2["change"], h2["met"], h2["label"]) == ("B", 3, "confirmed")
    assert (h1["change"], h1["met"], h1["not_met"], h1["label"]) == ("C", 1, 2, "discarded")
    assert data["decided_by"]["text"] == (
        "decided by the judges' votes (h2 over h1: 3 of 3 judges met against 1 of 3 judges met)"
    )


def test_comparison_md_gives_every_judges_reason(judged):
    wf, _ = judged
    text = (wf.session("j") / "comparison.md").read_text()
    section = text.split("## Judges")[1].split("## Winner")[0]
    assert "| h2 | change B | 3 | 0 | confirmed |" in section
    assert "- judge 2: not met: C misses the point" in section
    assert "- judge 3: met: B reason 3" in section


def test_each_judge_is_blind_to_the_tracks_id_hypothesis_and_branch(judged):
    wf, transcript = judged
    briefs = [b for b in wf.transcript(transcript) if b["team"] == "judge"]
    assert len(briefs) == 9  # three judges, one run per change each
    for brief in briefs:
        text = json.dumps(brief)
        for h in HYPOTHESES:
            assert h["name"].split("-")[0] not in text
            assert f'"{h["id"]}"' not in text and f"tracks/{h['id']}" not in text
        assert "autoresearch/broad/" not in text
        assert "obvious" not in text and "creative" not in text
    assert any("ValueError" in json.dumps(b) for b in briefs)  # they saw the diff

"""The lens base: chained sessions' names and derived specs, the masked writer, the gate in
`done` and `autoresearch check`, and the spec checks every lens shares."""

from __future__ import annotations

import json

import pytest
import yaml

from autoresearch import cli
from autoresearch.checks.finding_schema import gate_of
from autoresearch.engine import chain
from autoresearch.errors import SpecError
from autoresearch.modes.lens import Lens
from autoresearch.modes.lens.output import Writer, mask_data

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
AWS = "AKIAIOSFODNN7EXAMPLE"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def freeze(sessions, name: str, values: dict) -> None:
    (sessions / name).mkdir(parents=True)
    (sessions / name / "session.yaml").write_text(yaml.safe_dump(values))


def test_a_root_session_links_to_its_first_child(tmp_path):
    link = chain.link_of("audit", {"chain": ["debug", "fix"]}, tmp_path)
    assert (link.k, link.parent, link.next) == (0, None, "audit.1-debug")


def test_then_is_a_chain_of_one():
    assert chain.chain_of({"then": "fix"}) == ["fix"]
    assert chain.chain_of({"chain": ["debug"], "then": "fix"}) == ["debug"]


def test_each_child_knows_its_parent_and_the_next_child(tmp_path):
    freeze(tmp_path, "audit", {"mode": "security", "chain": ["debug", "fix"]})
    first = chain.link_of("audit.1-debug", None, tmp_path)
    second = chain.link_of("audit.2-fix", None, tmp_path)
    assert (first.parent, first.next) == ("audit", "audit.2-fix")
    assert (second.parent, second.next) == ("audit.1-debug", None)


def test_a_name_that_only_looks_like_a_child_is_a_root(tmp_path):
    freeze(tmp_path, "audit", {"mode": "security", "chain": ["debug"]})
    assert chain.link_of("audit.1-fix", None, tmp_path).k == 0  # fix is not link 1
    assert chain.link_of("other.1-debug", None, tmp_path).k == 0  # no such root
    assert chain.child_values("audit.1-fix", tmp_path) is None


def test_a_child_spec_is_the_roots_with_its_lens_and_the_parents_handoff(tmp_path):
    root = {"mode": "security", "target": "/repo", "chain": ["debug", "fix"], "fail_on": "low"}
    freeze(tmp_path, "audit", root)
    values = chain.child_values("audit.2-fix", tmp_path)
    assert values["mode"] == "fix"
    assert values["chain"] == [] and values["then"] is None
    assert values["target"] == "/repo" and values["fail_on"] == "low"
    assert values["handoff"] == str((tmp_path / "audit.1-debug" / "handoff.json").absolute())


def test_the_writer_masks_text_and_json_but_keeps_the_sessions_commit(tmp_path):
    writer = Writer(keep=(COMMIT,))
    writer.text(tmp_path / "a.md", f"token: {JWT}\nkey {AWS}\ncommit key {COMMIT}\n")
    writer.json(tmp_path / "a.json", {"evidence": f'api_key = "{AWS}"', JWT: [f"url {JWT}"]})
    text = (tmp_path / "a.md").read_text() + (tmp_path / "a.json").read_text()
    assert JWT not in text and AWS not in text
    assert COMMIT in text
    assert writer.masked == 5
    assert json.loads((tmp_path / "a.json").read_text())  # still valid JSON


def test_mask_data_leaves_numbers_and_structure_alone():
    assert mask_data({"n": 3, "ok": True, "list": ["plain"]}) == {
        "n": 3,
        "ok": True,
        "list": ["plain"],
    }


def test_gate_of_reads_the_done_file():
    assert gate_of("session: s\ngate: FAILED\n") == "FAILED"
    assert gate_of("session: s\nstopped: x\n") is None


@pytest.mark.parametrize(("gate", "code"), [("PASSED", 0), ("FAILED", 1)])
def test_check_exits_1_only_when_the_gate_failed(tmp_path, monkeypatch, gate, code):
    (tmp_path / "sessions" / "s").mkdir(parents=True)
    (tmp_path / "sessions" / "s" / "done").write_text(f"session: s\ngate: {gate}\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "s"]) == code


def test_check_exits_2_for_an_unfinished_or_gateless_session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "nothing"]) == 2
    (tmp_path / "sessions" / "sweep").mkdir(parents=True)
    (tmp_path / "sessions" / "sweep" / "done").write_text("session: sweep\nstopped: cap\n")
    assert cli.main(["check", "sweep"]) == 2


class ModelOnly(Lens):
    name = "modelonly"


def spec_values(**extra) -> dict:
    return {"agent": {"backend": "script"}, **extra}


def test_a_lens_the_ruff_backend_cannot_play_is_refused_at_the_spec_check():
    with pytest.raises(SpecError, match="agent.backend.*needs a model"):
        ModelOnly().setup.check_spec({"agent": {"backend": "ruff"}}, "s")


def test_an_unknown_lens_in_the_chain_is_refused_naming_the_key():
    with pytest.raises(SpecError, match=r"config/sessions/s.yaml: key 'chain'.*'nosuch'"):
        ModelOnly().setup.check_spec(spec_values(chain=["nosuch"]), "s")
    ModelOnly().setup.check_spec(spec_values(chain=["security"]), "s")


def test_a_chain_the_ruff_backend_cannot_play_is_refused_before_anything_runs():
    values = {"agent": {"backend": "ruff"}, "chain": ["debug"]}
    ModelOnly.ruff_plays = True
    try:
        with pytest.raises(SpecError, match="key 'chain': the debug lens needs a model"):
            ModelOnly().setup.check_spec(values, "s")
    finally:
        ModelOnly.ruff_plays = False


def test_a_start_refuses_an_unknown_learn_mode_naming_the_key(tmp_path):
    from autoresearch.modes.learn import Learn
    from autoresearch.session.plan import check_values

    values = {"mode": "learn", "target": str(tmp_path), "agent": {"backend": "script"}}
    values["learn"] = {"mode": "chek"}
    with pytest.raises(
        SpecError, match=r"^--config: key 'learn.mode': 'chek' is not one of .*'check'"
    ):
        check_values("s", values, Learn())
    check_values("s", values | {"learn": {"mode": "init"}}, Learn())


@pytest.mark.parametrize(
    "lens", ["security", "debug", "scenario", "predict", "fix", "learn", "ship"]
)
def test_the_spec_autoresearch_new_writes_for_a_lens_is_valid(tmp_path, monkeypatch, lens):
    from conftest import ROOT, make_repo

    from autoresearch import modes
    from autoresearch.session import spec as specs

    root = tmp_path / "wf"
    (root / "config" / "sessions").mkdir(parents=True)
    (root / "Snakefile").write_text("# the workflow\n")
    for name in ("config.yaml", "schema.yaml"):
        (root / "config" / name).write_text((ROOT / "config" / name).read_text())
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    monkeypatch.chdir(root)
    assert cli.main(["new", "s", "--target", str(repo), "--mode", lens]) == 0
    merged = specs.load("s", root)
    assert merged.values["mode"] == lens
    modes.get(lens).setup.check_spec(merged.values, "s")  # the example passes the lens's own check

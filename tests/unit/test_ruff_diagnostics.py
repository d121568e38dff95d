"""The ruff backend's one view of ruff's findings."""

from __future__ import annotations

from autoresearch.agents.backends.ruff import diagnostics

CODE = "import os\nimport sys\n\n\ndef f():\n    x = 1\n    return f'{1}'\n"
ONLY_F401 = '[tool.ruff.lint]\nselect = ["F401"]\n'


def test_the_target_config_decides_the_rules_and_extend_adds_to_them(tmp_path):
    (tmp_path / "a.py").write_text(CODE)
    (tmp_path / "b.py").write_text(CODE)
    (tmp_path / "pyproject.toml").write_text(ONLY_F401)
    found = diagnostics(tmp_path, "a.py")
    assert sorted(d["message"] for d in found) == [
        "`os` imported but unused",
        "`sys` imported but unused",
    ]
    assert {d["filename"].rsplit("/", 1)[-1] for d in found} == {"a.py"}
    assert {d["code"] for d in diagnostics(tmp_path, "a.py", extend=["F841"])} == {"F401", "F841"}


def test_without_paths_every_file_is_checked_and_none_is_changed(tmp_path):
    (tmp_path / "a.py").write_text(CODE)
    (tmp_path / "b.py").write_text(CODE)
    (tmp_path / "pyproject.toml").write_text(ONLY_F401)
    found = diagnostics(tmp_path, extend=["F841"])
    assert {d["filename"].rsplit("/", 1)[-1] for d in found} == {"a.py", "b.py"}
    assert {d["code"] for d in found} == {"F401", "F841"}
    assert (tmp_path / "a.py").read_text() == CODE

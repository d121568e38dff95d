import os

from build import build


def test_every_module_is_built(tmp_path, monkeypatch):
    sources = os.path.join(os.path.dirname(__file__), "..", "src")
    monkeypatch.chdir(tmp_path)
    os.symlink(os.path.abspath(sources), "src")
    built = build()
    assert len(built) == 16 and all(p.read_text().startswith("INT F") for p in built)

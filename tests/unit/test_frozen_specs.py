"""A run's input functions parse each frozen spec once per version of its file (FrozenSpecs),
on the thread that owns the store; a job thread gets a parse of its own."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest
import yaml

import scripts.cycle
from autoresearch.errors import SessionError
from autoresearch.session import spec

FROZEN = "mode: sweep\nagent:\n  backend: script\n  parallel_green: 1\nmax_cycles: 3\n"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every YAML text load_frozen parses, in order."""
    seen: list[str] = []
    real = yaml.load

    def counting(text: str, Loader: type) -> object:  # noqa: N803 - yaml.load's own name
        seen.append(text)
        return real(text, Loader=Loader)

    monkeypatch.setattr(spec.yaml, "load", counting)
    return seen


def frozen(folder: Path, text: str = FROZEN) -> Path:
    path = folder / "session.yaml"
    path.write_text(text)
    return path


def test_a_second_read_of_the_same_file_parses_nothing(tmp_path: Path, parses: list[str]) -> None:
    specs = spec.FrozenSpecs()
    path = frozen(tmp_path)
    first, second = specs.read(path), specs.read(path)
    assert first.max_cycles == second.max_cycles == 3
    assert isinstance(second, spec.SessionSpec)
    assert len(parses) == 1


def test_each_run_parses_for_itself(tmp_path: Path, parses: list[str]) -> None:
    path = frozen(tmp_path)
    spec.FrozenSpecs().read(path)
    spec.FrozenSpecs().read(path)
    assert len(parses) == 2


def test_a_file_replaced_by_a_rename_is_read_afresh(tmp_path: Path) -> None:
    specs = spec.FrozenSpecs()
    path = frozen(tmp_path)
    specs.read(path)
    other = tmp_path / "other.yaml"
    other.write_text(FROZEN.replace("3", "4"))  # the same size: only the inode tells them apart
    os.utime(other, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    other.replace(path)
    assert specs.read(path).max_cycles == 4


def test_a_file_rewritten_in_place_is_read_afresh(tmp_path: Path) -> None:
    specs = spec.FrozenSpecs()
    path = frozen(tmp_path)
    specs.read(path)
    path.write_text(FROZEN.replace("max_cycles: 3", "max_cycles: 30"))
    assert specs.read(path).max_cycles == 30


def test_a_job_thread_gets_a_parse_of_its_own(tmp_path: Path, parses: list[str]) -> None:
    """Jobs are threads of the one process: what a job does to its spec reaches no input
    function's, and no other job's."""
    specs = spec.FrozenSpecs()
    path = frozen(tmp_path)
    owners = specs.read(path)
    got: list[spec.SessionSpec] = []

    def job() -> None:
        mine = specs.read(path)
        mine["max_cycles"] = 99
        got.append(mine)

    for _ in range(2):
        thread = threading.Thread(target=job)
        thread.start()
        thread.join()
    assert got[0] is not owners and got[1] is not got[0]
    assert got[1]["max_cycles"] == 99 and specs.read(path).max_cycles == 3
    assert len(parses) == 3  # the owner's once, each job's once


def test_an_unreadable_spec_is_named(tmp_path: Path) -> None:
    specs = spec.FrozenSpecs()
    with pytest.raises(SessionError, match=r"session\.yaml: not the frozen spec"):
        specs.read(frozen(tmp_path, "mode: [unclosed\n"))
    with pytest.raises(SessionError, match=r"missing\.yaml: not the frozen spec"):
        specs.read(tmp_path / "missing.yaml")


def test_the_input_functions_read_the_spec_they_are_given(tmp_path: Path) -> None:
    """`evaluate`'s and `green`'s inputs follow the spec the run's reader hands them."""
    session = tmp_path / "sessions" / "s"
    session.mkdir(parents=True)
    frozen(session, FROZEN.replace("parallel_green: 1", "parallel_green: 2"))
    asked: list[Path] = []

    def reader(path: Path) -> spec.SessionSpec:
        asked.append(Path(path))
        return spec.SessionSpec({**spec.load_frozen(path), "teams": ["red", "green"]})

    with contextlib.chdir(tmp_path):
        evaluate = scripts.cycle.evaluate_inputs("s", "001", read_spec=reader)
        green = scripts.cycle.green_inputs("s", "001", reader)
    assert "refactor" not in evaluate and set(evaluate) == {"red", "green"}
    assert len(green["lanes"]) == 2
    assert [p.name for p in asked] == ["session.yaml", "session.yaml"]

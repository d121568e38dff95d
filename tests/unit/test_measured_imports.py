"""The import log of a traced measurement (imports.py) and the paths it protects
(measured.import_paths): what strace cannot see of Python's imports."""

from __future__ import annotations

import pytest

from autoresearch.measure import imports, measured
from autoresearch.measure.imports import ImportLog
from autoresearch.safety import commands

MEASURE = (
    "import statistics\n\ntry:\n    import fastconf\nexcept ImportError:\n    fastconf = None\n"
    "print(statistics.median([1, 2, 3]))\n"
)


@pytest.mark.parametrize("prefix", ["", "PYTHONPATH=lib "])
def test_the_log_names_what_was_imported_and_what_was_looked_for_in_vain(tmp_path, prefix):
    work = tmp_path / "wt"
    (work / "lib").mkdir(parents=True)
    (work / "m.py").write_text(MEASURE)
    trace_to = tmp_path / "trace"
    # A PYTHONPATH the command sets does not push the hook out: `python` is a shim.
    result = commands.run(f"{prefix}python3 m.py", work, trace_to=trace_to)
    assert result.ok, result.tail(500)
    log = imports.read(next(trace_to.glob("run-*")))
    assert log is not None
    assert "fastconf" in log.absent
    assert log.found["statistics"].endswith("statistics.py")
    assert str(work) in log.path
    assert "lib" not in prefix or str(work / "lib") in log.path


def test_the_paths_kept_absent_are_in_the_worktrees_import_folders_only(tmp_path):
    root = tmp_path / "wt"
    log = ImportLog(
        found={
            "statistics": "/usr/lib/python3/statistics.py",
            "src": str(root / "src.py"),  # the code under test: editable as ever
            "sys": "built-in",
        },
        absent=["fastconf"],
        path=[str(root / "bench"), str(root), "/usr/lib/python3"],
    )
    paths = dict(measured.import_paths(log, root, root))
    assert paths["bench/fastconf.py"] == measured.IMPORT_ABSENT
    assert paths["fastconf/__init__.py"] == measured.IMPORT_ABSENT
    assert paths["bench/statistics.py"] == measured.IMPORT_SHADOW
    assert paths["statistics.py"] == measured.IMPORT_SHADOW
    assert not any(p.startswith(("src", "sys", "bench/src")) for p in paths)
    assert not any(p.startswith("/") for p in paths)


def test_status_says_what_the_imports_protect_once_per_module():
    record = {
        "protected": [
            {"path": "bench/measure.py", "source": measured.SCRIPT, "command": "goal.command"},
            {"path": "fastconf.py", "source": measured.IMPORT_ABSENT},
            {"path": "fastconf/__init__.py", "source": measured.IMPORT_ABSENT},
            {"path": "statistics.py", "source": measured.IMPORT_SHADOW},
            {"path": "statistics/__init__.py", "source": measured.IMPORT_SHADOW},
        ]
    }
    text = "\n".join(measured.lines(record))
    assert "bench/measure.py" in text
    assert f"2 paths: {measured.IMPORT_ABSENT}: fastconf" in text
    assert f"2 paths: {measured.IMPORT_SHADOW}: statistics" in text

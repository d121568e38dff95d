"""The import log of a traced measurement (imports.py) and the paths it protects
(measured.import_paths): what strace cannot see of Python's imports."""

from __future__ import annotations

import sys

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


def test_an_editable_installs_path_hook_entry_is_no_import_folder(tmp_path):
    # The entry is a name an editable install's finder claims, not a folder: Python never
    # looks for files under it, whatever the cwd, so nothing under it can shadow a module.
    root = tmp_path / "wt"
    hook = str(root / "__editable__.pkg-0.1.0.finder.__path_hook__")
    log = ImportLog(found={"json": "/usr/lib/python3/json/__init__.py"}, path=[hook, str(root)])
    paths = dict(measured.import_paths(log, root, root))
    assert paths == {
        "json.py": measured.IMPORT_SHADOW,
        "json/__init__.py": measured.IMPORT_SHADOW,
    }


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


# --- interpreters the hook cannot reach: said at setup, naming the key ---------------------


def traced(tmp_path, command: str):
    from autoresearch.safety import trace

    if trace.strace() is None:
        pytest.skip("strace is not installed")
    work = tmp_path / "wt"
    (work / "lib").mkdir(parents=True, exist_ok=True)
    (work / "m.py").write_text(MEASURE)
    trace_to = tmp_path / "trace"
    result = commands.run(command, work, trace_to=trace_to)
    assert result.ok, result.tail(500)
    run = next(trace_to.glob("run-*"))
    return trace.read(run, work), imports.read(run)


@pytest.mark.parametrize(
    "form",
    [
        "python3 -I m.py",
        "python3 -E m.py",
        "python3 -S m.py",
        "python3 -OS m.py",
        "python3 -X utf8 -E m.py",
        f"PYTHONPATH=lib {sys.executable} m.py",  # by its path, with a PYTHONPATH of its own
    ],
)
def test_a_python_the_hook_cannot_reach_is_named(tmp_path, form):
    seen, log = traced(tmp_path, form)
    blind = imports.unlogged([(e.path, e.argv) for e in seen.execs], log)
    assert len(blind) == 1 and blind[0].endswith("m.py")
    assert log is None or "fastconf" not in log.absent  # indeed nothing was logged


@pytest.mark.parametrize(
    "form", ["python3 m.py", f"{sys.executable} m.py", "python3 -X importtime -c 'import m'"]
)
def test_a_python_the_hook_reaches_is_logged_even_by_its_path(tmp_path, form):
    seen, log = traced(tmp_path, form)
    assert imports.unlogged([(e.path, e.argv) for e in seen.execs], log) == []
    assert "fastconf" in log.absent


def test_setup_says_which_key_runs_a_python_whose_imports_are_not_protected(tmp_path):
    from conftest import make_repo

    from autoresearch.safety import git

    target = make_repo(tmp_path / "target", {"m.py": MEASURE})
    repo = tmp_path / "store" / "worktree"
    git.open_worktree(target, repo, "autoresearch/s", git.head(target))
    watcher = measured.session_watcher(repo, git.head(repo), None)
    watcher.run("goal.command", "python3 -I m.py", timeout_s=60)
    said = [n for n in watcher.watch.notes if "goal.command" in n]
    assert said and "python3 -I m.py" in said[0] and "not protected" in said[0]
    plain = measured.session_watcher(repo, git.head(repo), None)
    plain.run("goal.command", "python3 m.py", timeout_s=60)
    assert not [n for n in plain.watch.notes if "not protected" in n]


def test_setups_log_line_names_a_few_protected_paths_and_counts_the_rest():
    paths = [f"d{i}/json.py" for i in range(200)]
    line = measured.said(paths)
    assert line.startswith("protected, as the measurement runs them: d0/json.py, d1/json.py")
    assert line.endswith("and 192 more (setup.json lists them)")
    assert "d8/json.py" not in line
    assert measured.said(["bench/p99.py"]).endswith(": bench/p99.py")
    assert measured.said([]).endswith(": none found")

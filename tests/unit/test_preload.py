"""The end's libraries are imported ahead only in the process that draws the end
(views/preload.py): armed at a run's start, started by a waiting job, once; matplotlib
only (a Figure of its own), never pyplot or pandas (no module of ours uses them)."""

from __future__ import annotations

import subprocess
import sys
import threading
import types
from pathlib import Path

from autoresearch.views import preload

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter each: whether matplotlib or pandas is imported is process state. A
# pandas stand-in is importable whether the environment has pandas or not.
PROBE = """
import sys
sys.path.insert(0, {root!r})
sys.path.insert(0, {stand_in!r})
from autoresearch.views import preload
{steps}
print(sorted(m for m in ("matplotlib.figure", "matplotlib.pyplot", "pandas") if m in sys.modules))
"""


def modules_after(steps: str, tmp_path: Path) -> str:
    (tmp_path / "pandas").mkdir()
    (tmp_path / "pandas" / "__init__.py").write_text("")
    code = PROBE.format(root=str(ROOT), stand_in=str(tmp_path), steps=steps)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_an_armed_process_imports_the_figure_once_a_job_starts_it_never_pyplot_or_pandas(
    tmp_path,
):
    steps = "preload.arm()\nthread = preload.start()\nassert preload.start() is thread\n"
    steps += "thread.join()"
    assert modules_after(steps, tmp_path) == "['matplotlib.figure']"


def test_a_process_never_armed_imports_nothing(tmp_path):
    # A cluster job's own process: Snakemake runs no onstart there, so nothing is armed.
    assert modules_after("assert preload.start() is None", tmp_path) == "[]"


def test_a_run_arms_it_at_start(monkeypatch):
    import scripts.common

    monkeypatch.setattr(preload, "_armed", threading.Event())
    monkeypatch.setattr(scripts.common, "hold_session_locks", lambda workflow, held: None)
    monkeypatch.setattr(scripts.common.commands, "end_commands_on_interrupt", lambda: None)
    monkeypatch.setattr(scripts.common.finished_jobs, "install", lambda workflow: True)
    monkeypatch.setattr(scripts.common.api_key, "keep_in_environment", lambda remote: None)
    scripts.common.start_run(types.SimpleNamespace(scheduler=None, non_local_exec=False), [])
    assert preload._armed.is_set()


def test_the_jobs_that_wait_on_commands_start_it_before_their_stage(monkeypatch):
    import scripts.experiment
    import scripts.step

    calls = []
    monkeypatch.setattr(preload, "start", lambda: calls.append("preload"))
    for module in (scripts.experiment, scripts.step):
        monkeypatch.setattr(module, "run_stage", lambda *args: calls.append("stage"))
    wildcards = types.SimpleNamespace(cand="c1")
    scripts.experiment.measure(wildcards, None, None, None)
    scripts.step.decide(wildcards, None, None, None)
    assert calls == ["preload", "stage", "preload", "stage"]

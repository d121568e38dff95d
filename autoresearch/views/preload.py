"""The end's libraries imported ahead, while the loop's jobs wait on the target's commands.

A session ends with its plot and its report (`experiment_plot`, `session_report`, ...),
run in the workflow's own process once the last step is decided: nothing else runs then,
so whatever they spend is waited for. Their first act was importing matplotlib (then with
pandas, since dropped: 0.6 s of CPU, 2 to 3 s of the tail on a loaded 2-core machine,
profiled on bench/bench_experiment_parallel.py). That import is moved into the loop: a job
that waits on a metric or a test command (a measurement, a decide) starts a daemon thread
that imports it while the process is idle, once per process.

Only the run that will draw the end imports it: `arm` is called when a run starts
(Snakemake's onstart, which a cluster job's own process never runs), so a job on a
cluster node spends nothing on it. The import is the same one the end's code makes (a
`Figure` of its own, never pyplot); a failed import here is left to that code to report.
"""

from __future__ import annotations

import threading

_armed = threading.Event()
_started = threading.Lock()
_thread: threading.Thread | None = None


def arm() -> None:
    """This process draws the session's end: `start` may import its libraries."""
    _armed.set()


def start() -> threading.Thread | None:
    """Import the end's libraries in a daemon thread, once per armed process; the thread
    (to wait on in tests), or None when this process is not armed."""
    global _thread
    if not _armed.is_set():
        return None
    with _started:
        if _thread is None:
            _thread = threading.Thread(target=_import, name="autoresearch-preload", daemon=True)
            _thread.start()
    return _thread


def _import() -> None:
    try:
        import matplotlib.figure  # noqa: F401
        import matplotlib.ticker  # noqa: F401
    except Exception:  # noqa: BLE001 - the end's own import says what is wrong
        return

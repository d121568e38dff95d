"""Snakemake's job-rate re-check timers hold no run open at its end (engine/rate_timers.py).

The scheduler is a stand-in holding what the pinned Snakemake's method uses (its `_open_jobs`
semaphore), with that method itself bound to it: the stock timer, then ours.
"""

from __future__ import annotations

import threading
import types

from snakemake.scheduling.job_scheduler import JobScheduler

import scripts.common
from autoresearch.engine import rate_timers


def stand_in() -> types.SimpleNamespace:
    scheduler = types.SimpleNamespace(_open_jobs=threading.Semaphore(0))
    scheduler._schedule_reevalutation = types.MethodType(
        JobScheduler._schedule_reevalutation, scheduler
    )
    return scheduler


def timer_started_by(scheduler: types.SimpleNamespace, delay: float) -> threading.Thread:
    before = set(threading.enumerate())
    scheduler._schedule_reevalutation(delay)
    (started,) = set(threading.enumerate()) - before
    return started


def test_the_pinned_snakemakes_timer_would_hold_the_interpreter_at_exit():
    # Why the module exists: if a Snakemake makes this timer a daemon itself, it can go.
    scheduler = stand_in()
    timer = timer_started_by(scheduler, 0.01)
    timer.join()
    assert not timer.daemon


def test_after_install_the_timer_is_a_daemon_and_still_wakes_the_scheduler():
    scheduler = stand_in()
    assert rate_timers.install(scheduler)
    timer = timer_started_by(scheduler, 0.01)
    assert timer.daemon
    # The rate limit still works: the scheduler is woken once the timespan is over.
    assert scheduler._open_jobs.acquire(timeout=30)
    timer.join()


def test_a_scheduler_without_the_timer_is_left_as_it_is():
    other = types.SimpleNamespace(_open_jobs=threading.Semaphore(0))
    assert not rate_timers.install(other)
    assert not hasattr(other, "_schedule_reevalutation")
    assert not rate_timers.install(None)


def test_every_run_installs_it_at_start(monkeypatch):
    scheduler = stand_in()
    workflow = types.SimpleNamespace(scheduler=scheduler, non_local_exec=False)
    monkeypatch.setattr(scripts.common, "hold_session_locks", lambda workflow, held: None)
    monkeypatch.setattr(scripts.common.commands, "end_commands_on_interrupt", lambda: None)
    monkeypatch.setattr(scripts.common.finished_jobs, "install", lambda workflow: True)
    monkeypatch.setattr(scripts.common.api_key, "keep_in_environment", lambda remote: None)
    scripts.common.start_run(workflow, [])
    timer = timer_started_by(scheduler, 0.01)
    assert timer.daemon
    timer.join()

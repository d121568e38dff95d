"""Every read-only command on a missing, corrupt, renamed or mid-run session: one clear
line naming what to fix, the right exit code, no traceback, nothing written."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CALC, Workflow, calc_repo, git, script_spec

GUARDED = CALC.replace(
    "def mean(values):\n",
    'def mean(values):\n    if not values:\n        raise ValueError("no values")\n',
)
FINDING = {
    "severity": "high",
    "title": "mean crashes on an empty list",
    "location": "calc.py:5",
    "issue": "mean([]) divides by zero.",
    "impact": "Callers get a ZeroDivisionError.",
}
SCRIPT = {
    "red": {1: [{"tool": "report_finding", "args": FINDING}]},
    "green": {
        1: [
            {"tool": "write_file", "args": {"path": "calc.py", "content": GUARDED}},
            {"tool": "finish_fix", "args": {"finding_id": "F-001", "summary": "guard mean"}},
        ]
    },
}


def cli(wf: Workflow, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch.cli", *args],
        cwd=wf.workdir,
        env=wf.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Workflow, Path]:
    """One sweep session with one kept fix, run to its end (about 15 s)."""
    base = tmp_path_factory.mktemp("readonly")
    wf, target = Workflow(base / "work"), calc_repo(base / "target")
    spec = script_spec(target, wf.script(SCRIPT), wf.workdir / "t.jsonl", max_cycles=1)
    wf.run("s", spec)
    return wf, target


def _replace(path: Path, data: bytes) -> Callable[[], None]:
    before = path.read_bytes()
    path.write_bytes(data)
    return lambda: path.write_bytes(before)


def _rename_branch(wf: Workflow, target: Path) -> Callable[[], None]:
    branch = json.loads((wf.session("s") / "setup.json").read_text())["branch"]
    git(target, "branch", "-m", branch, "renamed-by-the-user")
    return lambda: git(target, "branch", "-m", "renamed-by-the-user", branch)


def _hold_the_run_lock(wf: Workflow, target: Path) -> Callable[[], None]:
    handle = open(wf.session("s") / ".run.lock", "a")  # noqa: SIM115 - held until undone
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle.close


BREAKS: dict[str, tuple[Callable[[Workflow, Path], Callable[[], None]], str]] = {
    # what is broken -> (how to break it, what the one line must name)
    "binary setup.json": (
        lambda wf, t: _replace(wf.session("s") / "setup.json", b"\x00\xff\xfe\x89PNG\x00"),
        "setup.json",
    ),
    "malformed session.yaml": (
        lambda wf, t: _replace(wf.session("s") / "session.yaml", b"mode: [sweep\n  : :\n"),
        "session.yaml",
    ),
    "empty decision.json": (
        lambda wf, t: _replace(wf.session("s") / "cycles" / "001" / "decision.json", b""),
        "decision.json",
    ),
    "renamed branch": (_rename_branch, "autoresearch/improve"),
}
READERS = [
    ("status", "s"),
    ("status",),
    ("show", "s", "1"),
    ("verify", "s"),
    ("check", "s"),
    ("redo", "s", "--cycle", "1", "--stage", "red", "--no-run"),  # a preview: moves nothing
]


@pytest.fixture
def broken(request, finished) -> Iterator[tuple[Workflow, str]]:
    wf, target = finished
    make, named = BREAKS[request.param]
    undo = make(wf, target)
    try:
        yield wf, named
    finally:
        undo()


def _files(wf: Workflow) -> dict[str, bytes]:
    root = wf.session("s")
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "worktree" not in p.parts and p.name != ".run.lock"
    }


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    both = proc.stdout + proc.stderr
    assert "Traceback" not in both and 'File "' not in both, both[-3000:]


@pytest.mark.parametrize("broken", list(BREAKS), indirect=True)
@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_read_only_command_on_a_broken_session_says_one_line(broken, args):
    wf, named = broken
    before = _files(wf)
    proc = cli(wf, *args)
    _no_traceback(proc)
    assert _files(wf) == before  # nothing written
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) <= 1, proc.stderr
    if args == ("status",):  # the table goes on, naming the session it could not read
        assert proc.returncode == 0 and "s " in proc.stdout
        return
    if args == ("check", "s"):  # a sweep has no gate; check reads `done` only
        assert proc.returncode == 2 and len(errors) == 1
        return
    said = proc.stdout + proc.stderr
    if args[0] == "redo" and named in ("decision.json", "session.yaml"):
        # redo is how a broken cycle is repaired: its preview of one stays possible.
        assert proc.returncode == 0 and "nothing was changed" in said
        return
    if proc.returncode == 0:
        # status and show answer what they can: status names the problem in a line of its
        # own; show needs neither the branch nor the spec's figures it could not read.
        assert args[0] in ("status", "show") and named in ("decision.json", named)
        if args[0] == "status":
            assert named in said or "WARNING" in said, said
        else:
            assert named == "autoresearch/improve"
        return
    assert named in said, said


@pytest.mark.parametrize("args", [*READERS, ("finalize", "s")], ids=" ".join)
def test_a_read_only_command_on_a_missing_session_says_one_line(finished, args):
    wf, _ = finished
    args = tuple("nosuch" if a == "s" else a for a in args)
    proc = cli(wf, *args)
    _no_traceback(proc)
    assert not wf.session("nosuch").exists()
    if args == ("status",):
        assert proc.returncode == 0
        return
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "nosuch" in proc.stderr


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_read_only_command_on_a_running_session_answers(finished, args):
    wf, target = finished
    done = wf.session("s") / "done"
    done.rename(done.with_name("done.aside"))  # mid-run: no `done` yet, the lock held
    undo = _hold_the_run_lock(wf, target)
    try:
        proc = cli(wf, *args)
    finally:
        undo()
        done.with_name("done.aside").rename(done)
    if args == ("check", "s"):
        assert proc.returncode == 2 and "has not finished" in proc.stderr
        return
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    if args == ("status", "s"):
        assert "[running]" in proc.stdout


@pytest.mark.parametrize("broken", ["renamed branch", "empty decision.json"], indirect=True)
def test_finalize_refuses_a_session_verify_rejects(broken):
    wf, named = broken
    proc = cli(wf, "finalize", "s")
    _no_traceback(proc)
    assert proc.returncode != 0
    assert "verify" in proc.stderr and named in proc.stderr
    assert not (wf.session("s") / "review").exists()


def test_status_piped_into_head_ends_quietly(finished):
    wf, _ = finished
    command = [sys.executable, "-m", "autoresearch.cli", "status", "s"]
    first = subprocess.Popen(command, cwd=wf.workdir, env=wf.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)  # fmt: skip
    assert first.stdout is not None
    first.stdout.close()  # the reader is gone before the first line is written, as `| head -0`
    _, err = first.communicate(timeout=300)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()


def test_a_second_run_of_a_running_session_is_refused_in_one_line(finished):
    wf, target = finished
    done = wf.session("s") / "done"
    done.rename(done.with_name("done.aside"))
    undo = _hold_the_run_lock(wf, target)  # the first run, alive
    try:
        proc = wf.run("s", check=False)
    finally:
        undo()
        done.with_name("done.aside").rename(done)
    assert proc.returncode != 0
    said = [line for line in proc.stderr.splitlines() if "already being run" in line]
    assert len(said) == 1, proc.stderr
    _no_traceback(proc)
    tail = proc.stderr[proc.stderr.index(said[0]) :].splitlines()[1:]
    assert not any(line.startswith(("  File", "    ", "Traceback")) for line in tail), proc.stderr

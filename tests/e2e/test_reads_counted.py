"""What a short scripted sweep reads, counted: the files each evaluate job reads and the
times the frozen spec is parsed per cycle.

Snakemake runs in one process with `open`, `io.open` and `os.open` counting every file our
code opens for reading (the job it ran in from the thread's job, set around `run_job`); a
read by Snakemake itself (the checksum of an output) is not ours and not counted.

Measured on this sweep (4 cycles, the script agent, `true` as the tests). Before the job
parsed what it read once: the evaluate job of cycle 2 read 12 session files 21 times (the
previous decision.json 4 times, each stage record twice; 17 files, 58 times with the git
links), and session.yaml was parsed 45 times (11.25 a cycle). Now: 12 files 15 times (17
files, 52 times) and 36 parses (9 a cycle: once per job, once per input function that needs
it). Green's input function reads the spec too since `agent.parallel_green` (how many
lanes' records Green waits for): 40 parses, 10 a cycle. The bounds are those figures: a
change that reads more fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from conftest import ROOT, git, make_repo

CYCLES = 4
# The worktree's git links, read before every git call to refuse a forged one (git.py):
# a safety check whose count follows the git calls, not the data flow; counted apart.
GIT_LINKS = (".git", "gitdir", ".git-dirs.json", "HEAD", "commondir")

RUNNER = r"""
import atexit, builtins, io, json, os, sys, threading
from pathlib import Path

root, out = os.environ["COUNT_ROOT"], Path(os.environ["COUNT_OUT"])
sys.path.insert(0, root)
state, lock, reads = threading.local(), threading.Lock(), []
real_open, real_os_open = io.open, os.open


# The checkout's own code: a virtualenv inside the checkout (`make`'s .venv) holds
# Snakemake's code, whose reads are not ours.
libraries = tuple({sys.prefix, sys.base_prefix, os.path.dirname(os.__file__)})


def ours():
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(root) and not name.startswith(libraries):
            return True
        frame = frame.f_back
    return False


def note(path):
    if not path.startswith("/proc/") and ours():
        with lock:
            reads.append([getattr(state, "job", ""), path])


def counting_open(file, mode="r", *args, **kwargs):
    handle = real_open(file, mode, *args, **kwargs)
    if not isinstance(file, int) and not set(mode) & set("wax+"):
        note(os.path.abspath(os.fsdecode(file)))
    return handle


def counting_os_open(path, flags, *args, **kwargs):
    fd = real_os_open(path, flags, *args, **kwargs)
    if not flags & (os.O_WRONLY | os.O_RDWR | os.O_DIRECTORY):
        note(os.readlink(f"/proc/self/fd/{fd}"))
    return fd


builtins.open = io.open = counting_open
os.open = counting_os_open

from autoresearch.engine import jobs

real_run_job = jobs.run_job


def run_job(log_path, body, *declared):
    parts = Path(log_path).parts
    state.job = "/".join(parts[parts.index("logs") + 1 :])
    try:
        return real_run_job(log_path, body, *declared)
    finally:
        state.job = ""


jobs.run_job = run_job
atexit.register(lambda: out.write_text(json.dumps(reads)))
from snakemake.cli import main

sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""


def script(cycles: int) -> dict:
    """One low finding a cycle, fixed by Green and tidied by Refactor."""
    finding = {"severity": "low", "location": "a.txt:1", "issue": "i", "impact": "m"}
    return {
        "red": {
            n: [{"tool": "report_finding", "args": {**finding, "title": f"t{n}"}}]
            for n in range(1, cycles + 1)
        },
        "green": {
            n: [
                {"tool": "write_file", "args": {"path": "a.txt", "content": f"green {n}\n"}},
                {"tool": "finish_fix", "args": {"finding_id": f"F-{n:03d}", "summary": "g"}},
            ]
            for n in range(1, cycles + 1)
        },
        "refactor": {
            n: [
                {"tool": "write_file", "args": {"path": "a.txt", "content": f"cycle {n}\n"}},
                {"tool": "finish_refactor", "args": {"summary": f"cycle {n}"}},
            ]
            for n in range(1, cycles + 1)
        },
    }


def counted_sweep(workflow, tmp_path: Path) -> list[tuple[str, str]]:
    """(job, path) for every read of our code in a sweep of CYCLES cycles."""
    target = make_repo(tmp_path / "target", {"a.txt": "start\n"})
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "true",
        "max_cycles": CYCLES,
        "stop_below": None,  # low findings only: stop 7 would end the loop at once
        "agent": {"backend": "script", "script": str(workflow.script(script(CYCLES)))},
    }
    out = tmp_path / "reads.json"
    command = workflow.command("s", spec)
    command[:3] = [sys.executable, "-c", RUNNER]
    env = workflow.env() | {"COUNT_ROOT": str(ROOT), "COUNT_OUT": str(out)}
    proc = subprocess.run(
        command, cwd=workflow.workdir, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((workflow.session("s") / "cycles" / "004" / "decision.json").read_text())
    assert git(target, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    return [(job, path) for job, path in json.loads(out.read_text())]


def session_reads(reads, job: str, session: Path) -> Counter:
    """The session's files `job` read (relative to the session folder), by count."""
    base = str(session.resolve()) + "/"
    return Counter(
        path.removeprefix(base)
        for j, path in reads
        if j == job and not path.endswith(GIT_LINKS) and path.startswith(base)
    )


def test_a_sweep_reads_each_finished_file_once_per_job_and_parses_its_spec_sparingly(
    workflow, tmp_path
):
    reads = counted_sweep(workflow, tmp_path)
    session = workflow.session("s")
    evaluate = session_reads(reads, "evaluate/002.log", session)
    # The previous decision and each stage record: read once in the job, however many of
    # its steps ask for them.
    assert evaluate["cycles/001/decision.json"] == 1, evaluate
    for record in ("red.json", "green.json", "refactor.json"):
        assert evaluate[f"cycles/002/{record}"] == 1, evaluate
    assert evaluate["session.yaml"] == 1, evaluate
    # 13 files: timings.tsv's header joined them (engine/timings.py keeps an older
    # session's column count when it appends its row).
    assert len(evaluate) <= 13 and sum(evaluate.values()) <= 16, evaluate
    # Outside the worktree's git links, nothing but session files.
    others = {p for j, p in reads if j == "evaluate/002.log" and not p.endswith(GIT_LINKS)}
    assert others <= {str(session.resolve() / p) for p in evaluate}, others
    # The spec: once per job and once per input-function call that needs it.
    parses = [j for j, p in reads if p == str(session.resolve() / "session.yaml")]
    jobs = {j for j, _ in reads if j}
    assert all(parses.count(j) == 1 for j in jobs if j in parses), Counter(parses)
    assert len(parses) <= 10 * CYCLES, Counter(parses)

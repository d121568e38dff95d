"""A job reads its session only through what its rule declares.

Snakemake runs in one process with an audit hook on `open` (jobs are threads of that
process: `run:` blocks and `force-use-threads`). `jobs.run_job` says which job a thread is
running and what its rule declared (`jobs.RUNNING`); every file of `sessions/<name>/` a
job opens for reading must be one of its rule's `input`, `output` or `log`, or on the
short list below of what a rule cannot declare. Measured on a sweep and on an experiment
session, with the script agent.

Measured on these sessions before the rules declared what their jobs read: of 136 reads of
session files by the sweep's jobs, 104 were undeclared (evaluate's three jobs: 41 reads,
27 undeclared); of the experiment's 121, 103 (experiment_decide: 64 reads, 53 undeclared,
its setup record read 7 or 8 times a job). Now 17 and 13 are undeclared, each on the list;
with an unchanged file read once a job, 134 and 90 reads (experiment_decide: 37).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, Workflow, git, make_repo
from test_experiment import change, make_target

RUNNER = r"""
import atexit, json, os, sys
from pathlib import Path

root, out = os.environ["TRACE_ROOT"], Path(os.environ["TRACE_OUT"])
sys.path.insert(0, root)
from autoresearch.engine import jobs

opens = []
WRITING = os.O_WRONLY | os.O_RDWR


# The checkout's own code: a virtualenv inside the checkout (`make`'s .venv) holds
# Snakemake's code, whose reads are not ours.
libraries = tuple({sys.prefix, sys.base_prefix, os.path.dirname(os.__file__)})


def ours():  # opened by our code (not Snakemake's, not an import of a module)
    frame, mine = sys._getframe(2), False
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib"):
            return False
        mine = mine or (name.startswith(root) and not name.startswith(libraries))
        frame = frame.f_back
    return mine


def hook(event, args):
    if event not in ("open", "os.rename", "os.replace"):
        return
    running = jobs.RUNNING.get()
    mine = ours()
    if running is None:
        # Snakemake's own work or an input function: no job's, but an input function's
        # reads of our code are counted (test_a_sweep_reads_each_finished_file_once...).
        if not mine or event != "open" or isinstance(args[0], int):
            return
        running = ("", jobs.Declared())
    if event != "open":  # an atomic write: the file renamed into place is written
        path, mode, flags = args[1], "w", 0
    else:
        path, mode, flags = args
    if isinstance(path, int):
        return
    writes = set(mode) & set("wax+") if mode is not None else flags & WRITING
    if not writes and (flags & os.O_DIRECTORY or not os.path.isfile(path)):
        return  # a folder, or a file that is not there: nothing is read
    job, declared = running
    if os.environ.get("TRACE_STACKS"):
        frames, frame = [], sys._getframe(1)
        while frame is not None and len(frames) < 6:
            name = frame.f_code.co_filename
            if name.startswith(root) and "/.venv/" not in name:
                frames.append(f"{name.removeprefix(root)}:{frame.f_lineno}:{frame.f_code.co_name}")
            frame = frame.f_back
        path = f"{os.fsdecode(path)}|{' < '.join(frames)}"
    opens.append(
        [job, os.path.abspath(os.fsdecode(path)), "write" if writes else "read",
         [*declared.inputs], [*declared.outputs], [*declared.logs], mine]
    )


sys.addaudithook(hook)
atexit.register(lambda: out.write_text(json.dumps(opens)))
from snakemake.cli import main

sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""


def traced(workflow: Workflow, name: str, spec: dict, out: Path) -> list[list]:
    """Run session `name` to its end under the audit hook: every open of every job."""
    command = workflow.command(name, spec)
    command[:3] = [sys.executable, "-c", RUNNER]
    env = workflow.env() | {"TRACE_ROOT": str(ROOT), "TRACE_OUT": str(out)}
    proc = subprocess.run(
        command, cwd=workflow.workdir, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def rule_of(job: str) -> str:
    """The rule, from its log's path: logs/<rule>/NNN.log, logs/<rule>.log."""
    parts = Path(job).parts
    after = parts[parts.index("logs") + 1 :]
    return after[0] if len(after) > 1 else Path(after[0]).stem


def step_of(job: str) -> int:
    """The step a job works on, from its log's name (0: not a step's job)."""
    match = re.match(r"(\d{3,})", Path(job).stem)
    return int(match.group(1)) if match else 0


@dataclass(frozen=True)
class Allowed:
    """Files of the session some rules' jobs read without declaring them, and why."""

    pattern: str  # relative to the session folder; NNN stands for a step's number
    rules: frozenset[str]
    why: str

    first_step: bool = False  # only in the loop's first step's jobs

    def covers(self, rule: str, job: str, path: str) -> bool:
        if rule not in self.rules or (self.first_step and step_of(job) != 1):
            return False
        regex = re.escape(self.pattern).replace("NNN", r"(\d{3,})")
        match = re.fullmatch(regex, path)
        # A step number in the pattern is an earlier step's, never the job's own or later.
        return bool(match) and all(int(n) < step_of(job) for n in match.groups())


# What a rule cannot declare. The list only shrinks: an entry no job reads any more fails.
UNDECLARED = (
    Allowed(
        "cycles/NNN/decision.json",
        frozenset({"red", "green", "refactor", "evaluate"}),
        "the previous cycle's decision (where the cycle starts, the tests it is held to): "
        "declared until it is on disk (scripts/cycle.py:red_inputs), so that a finished "
        "session's DAG does not reach back through every cycle",
    ),
    Allowed(
        "iterations/NNN/decision.json",
        frozenset({"experiment_propose", "experiment_decide"}),
        "the previous iteration's decision (the incumbent): as the cycles' above",
    ),
    Allowed(
        "test-runs.jsonl",
        frozenset({"green", "refactor", "evaluate"}),
        "the session's tested trees (gate/tested.py), declared once they exist "
        "(scripts/common.py:state_of): the first cycle's jobs were planned before its first "
        "test run made the file",
        first_step=True,
    ),
    Allowed(
        "cycles/decisions.history.json",
        frozenset({"red", "green", "refactor", "evaluate"}),
        "the history index's summary (tally.py), declared once it exists: made by the "
        "first job that asks for the history, after the cycle's jobs were planned",
    ),
    Allowed(
        "results.tsv",
        frozenset({"evaluate", "experiment_decide"}),
        "the session's results table, which every deciding job rewrites with its rows "
        "(journal.upsert_results reads it to replace a rerun's rows): no rule's output",
    ),
    Allowed(
        "ideas.md",
        frozenset({"sanitize"}),
        "the session's list of ideas, to which sanitize adds the findings it held back "
        "(read, then written again): no rule's output",
    ),
    Allowed(
        "experiments.jsonl",
        frozenset({"experiment_decide"}),
        "experiment's log of every measurement, appended to by each decide (read to "
        "replace a rerun's line): no rule's output",
    ),
    Allowed(
        "timings.tsv",
        frozenset(
            {
                "red",
                "sanitize",
                "green",
                "refactor",
                "evaluate",
                "done",
                "session_report",
                "experiment_propose",
                "experiment_decide",
                "experiment_report",
                "experiment_plot",
            }
        ),
        "the session's timing table, to which every job appends its row (engine/timings.py): "
        "its header is read to keep the width an older session wrote: no rule's output",
    ),
    Allowed(
        "results-data.json",
        frozenset({"experiment_decide"}),
        "experiment's results as data, rewritten by each decide: no rule's output",
    ),
)


class Trace:
    """The session files each job read, and which of them its rule did not declare."""

    def __init__(self, opens: list[list], session: Path, workdir: Path):
        self.session = session.resolve()
        self.reads: dict[str, Counter] = defaultdict(Counter)
        self.undeclared: dict[str, Counter] = defaultdict(Counter)
        written: dict[str, set[str]] = defaultdict(set)
        base = str(self.session) + "/"
        self.opens = opens
        for job, path, kind, inputs, outputs, logs, *_ in opens:
            if not job:
                continue  # an input function's read (kept in `opens` for the counts)
            real = os.path.realpath(path)
            # The worktree is a link out of the session folder: the target's files.
            if not real.startswith(base):
                continue
            path = real.removeprefix(base)
            if kind == "write":
                written[job].add(path)
                continue
            self.reads[job][path] += 1
            declared = {
                os.path.realpath(workdir / p).removeprefix(base) for p in inputs + outputs + logs
            }
            # Its rule's files (a declared folder: the files in it), and what the job itself
            # wrote before reading it back.
            if not any(path == d or path.startswith(d + "/") for d in declared | written[job]):
                self.undeclared[job][path] += 1

    def unexplained(self) -> dict[str, list[str]]:
        """Per job, the undeclared reads no entry of UNDECLARED allows."""
        found = {
            job: [p for p in paths if not any(a.covers(rule_of(job), job, p) for a in UNDECLARED)]
            for job, paths in self.undeclared.items()
        }
        return {job: paths for job, paths in found.items() if paths}

    def used(self) -> set[Allowed]:
        return {
            a
            for job, paths in self.undeclared.items()
            for p in paths
            for a in UNDECLARED
            if a.covers(rule_of(job), job, p)
        }


CYCLES = 3  # of the traced sweep


def sweep_script(cycles: int) -> dict:
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


# Three experiments at most (test_experiment.py's target allows six).
PROGRAM_OF_3 = """# Fewer steps

```yaml
target_file: fast.py
eval_command: python measure.py
metric_key: ops
direction: minimize
max_experiments: 3
experiment_timeout: 30
guard: python -m pytest -q
```

## Research Direction

Reduce the number of steps without breaking the tests.
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Trace:
    """A sweep of CYCLES cycles."""
    base = tmp_path_factory.mktemp("sweep")
    workflow = Workflow(base / "work")
    target = make_repo(base / "target", {"a.txt": "start\n"})
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "true",
        "max_cycles": CYCLES,
        "stop_below": None,  # low findings only: stop 7 would end the loop at once
        "agent": {"backend": "script", "script": str(workflow.script(sweep_script(CYCLES)))},
    }
    opens = traced(workflow, "s", spec, base / "opens.json")
    assert (workflow.session("s") / "cycles" / f"{CYCLES:03d}" / "decision.json").is_file()
    return Trace(opens, workflow.session("s"), workflow.workdir)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Trace:
    """An experiment of three iterations: kept, discarded, kept."""
    base = tmp_path_factory.mktemp("experiment")
    workflow = Workflow(base / "work")
    target = make_target(base / "target")
    (target / "program.md").write_text(PROGRAM_OF_3)
    git(target, "commit", "-qam", "three experiments")
    script = {
        "experiment": {
            1: change(800, "Halve the inner loop"),
            2: change(900, "Unroll the loop by hand"),
            3: change(700, "Memoize the step function"),
        }
    }
    spec = {
        "mode": "experiment",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "experiment": {"cooldown_s": 0, "program": "program.md"},
        "agent": {"backend": "script", "script": str(workflow.script(script))},
    }
    opens = traced(workflow, "e", spec, base / "opens.json")
    return Trace(opens, workflow.session("e"), workflow.workdir)


def table(trace: Trace) -> str:
    """Per rule: its jobs, the session files they read (distinct per job, summed) and the
    times, and of them those their rules did not declare."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for job, reads in trace.reads.items():
        row, undeclared = rows[rule_of(job)], trace.undeclared[job]
        row[0] += 1
        row[1] += len(reads)
        row[2] += sum(reads.values())
        row[3] += len(undeclared)
        row[4] += sum(undeclared.values())
    lines = [f"{'rule':20} jobs files reads undeclared files/reads"]
    for rule, (n, files, reads, ufiles, ureads) in sorted(rows.items()):
        lines.append(f"{rule:20} {n:4} {files:5} {reads:5} {ufiles:10} {ureads:5}")
    return "\n".join(lines)


def test_a_sweeps_jobs_read_only_what_their_rules_declare(sweep):
    print("\nsweep\n" + table(sweep))
    assert sweep.unexplained() == {}, table(sweep)


def test_an_experiments_jobs_read_only_what_their_rules_declare(experiment):
    print("\nexperiment\n" + table(experiment))
    assert experiment.unexplained() == {}, table(experiment)


def test_every_allowed_undeclared_read_is_still_made(sweep, experiment):
    """The list of undeclared reads only shrinks: an entry no job needs goes."""
    assert set(UNDECLARED) - sweep.used() - experiment.used() == set()


# --- how often a job reads a file, and the spec is parsed ----------------------------------

# The worktree's git links, read before every git call to refuse a forged one (git.py):
# a safety check whose count follows the git calls, not the data flow; counted apart. The
# branch's own ref file is one (a branch of ours made a symbolic ref is refused).
GIT_LINKS = (".git", "gitdir", ".git-dirs.json", "HEAD", "commondir")
OWN_REFS = "/.git/refs/heads/autoresearch/"


def git_link(path: str) -> bool:
    return path.endswith(GIT_LINKS) or OWN_REFS in path


def reads_of_ours(trace: Trace) -> list[tuple[str, str]]:
    """(job, path) of every read our code made ("" for an input function's), no import."""
    return [(job, path) for job, path, kind, *_, mine in trace.opens if kind == "read" and mine]


def test_a_sweep_reads_each_finished_file_once_per_job_and_parses_its_spec_sparingly(sweep):
    """Measured on this sweep (then 4 cycles, the script agent, `true` as the tests). Before
    the job parsed what it read once: the evaluate job of cycle 2 read 12 session files 21
    times (the previous decision.json 4 times, each stage record twice; 17 files, 58 times
    with the git links), and session.yaml was parsed 45 times (11.25 a cycle). Now: 12
    files 15 times (17 files, 52 times) and 9 parses a cycle: once per job, once per input
    function that needs it; Green's input function reads the spec too since
    `agent.parallel_green` (how many lanes' records Green waits for): 40 in 4 cycles, 31 in
    3, so 9 a cycle and 4 for the session's own jobs; 35 in 3 since finished jobs leave
    Snakemake's tables (one more a cycle, below). The bounds are those figures: a change
    that reads more fails here."""
    reads = reads_of_ours(sweep)
    base = str(sweep.session) + "/"
    job = next(j for j, _ in reads if j.endswith("logs/evaluate/002.log"))
    evaluate = Counter(
        p.removeprefix(base)
        for j, p in reads
        if j == job and not git_link(p) and p.startswith(base)
    )
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
    # (The confined git's own CPU report, a scratch file of the harness, is no session file.)
    scratch = os.path.join(tempfile.gettempdir(), "autoresearch-gitcpu-")
    others = {p for j, p in reads if j == job and not git_link(p) and not p.startswith(scratch)}
    assert others <= {base + p for p in evaluate}, others
    # The spec: once per job and once per input-function call that needs it.
    parses = [j for j, p in reads if p == base + "session.yaml"]
    jobs = {j for j, _ in reads if j}
    assert all(parses.count(j) == 1 for j in jobs if j in parses), Counter(parses)
    # 10 a cycle: a job the pruning of finished ones (engine/finished_jobs.py) took out of
    # Snakemake's job cache is made again by the next checkpoint update, its input
    # function called again (`done`'s, each cycle): a parse bought for flat memory.
    assert len(parses) <= 10 * CYCLES + 5, Counter(parses)


# --- the check itself, on made-up traces --------------------------------------------------


def opens_of(tmp_path: Path, *events: tuple[str, str, str]) -> Trace:
    """A Trace of `events` (job's step, path in session `s`, read or write); each job's rule
    declared its own cycle's red.json as input and sanitized.md as output."""
    workdir = tmp_path / "work"
    session = workdir / "sessions" / "s"
    session.mkdir(parents=True)
    opens = []
    for step, path, kind in events:
        job = f"sessions/s/logs/green/{step}.log"
        declared = ([f"sessions/s/cycles/{step}/red.json"], [f"sessions/s/cycles/{step}/x.md"])
        opens.append([job, str(session / path), kind, *declared, [job], True])
    return Trace(opens, session, workdir)


def test_a_read_the_rule_did_not_declare_is_found(tmp_path):
    trace = opens_of(
        tmp_path,
        ("002", "cycles/002/red.json", "read"),
        ("002", "cycles/002/x.md", "read"),
        ("002", "logs/green/002.log", "read"),
        ("002", "cycles/002/red-findings.md", "read"),  # Green's clean room, broken
    )
    assert trace.unexplained() == {"sessions/s/logs/green/002.log": ["cycles/002/red-findings.md"]}


def test_an_allowed_file_is_allowed_only_as_it_is_described(tmp_path):
    trace = opens_of(
        tmp_path,
        ("002", "cycles/001/decision.json", "read"),  # the previous decision: allowed
        ("002", "cycles/002/decision.json", "read"),  # its own cycle's: not a previous one
        ("002", "test-runs.jsonl", "read"),  # allowed in the first cycle only
        ("001", "test-runs.jsonl", "read"),
    )
    assert trace.unexplained() == {
        "sessions/s/logs/green/002.log": ["cycles/002/decision.json", "test-runs.jsonl"]
    }


def test_a_file_the_job_wrote_it_may_read_back_but_not_before(tmp_path):
    trace = opens_of(
        tmp_path,
        ("002", "notes.json", "read"),
        ("002", "notes.json", "write"),
        ("002", "notes.json", "read"),
        ("003", "notes.json", "read"),  # another job's file
    )
    assert trace.undeclared["sessions/s/logs/green/002.log"] == {"notes.json": 1}
    assert trace.undeclared["sessions/s/logs/green/003.log"] == {"notes.json": 1}

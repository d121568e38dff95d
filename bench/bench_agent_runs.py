"""How many times a session runs the target's suite, who asked for each run, and whether it
repeats a run of the same tree: the agent's own `run_tests` against the gate's runs.

The session is bench_agent_cost.py's (a 3-cycle sweep, the real `claude` backend against
the fake Messages API, a scripted agent whose Green runs the tests before each finish_fix
and whose Refactor runs them before it hands in). Snakemake runs in a process where
`commands.run` is watched: every run of the test command is logged with who asked for it
(the agent's tool or the harness) and the tree its worktree held (a temporary index:
tracked and untracked files, not ignored ones nor the `.pytest_cache` a selecting run is
handed its tests in). A harness run of a tree the agent's tool
had already run counts as a repeat.

Prints suite runs per session (by the agent, by the harness, repeats), the suite runs' own
wall time, and CPU from timings.tsv: the stages' own (the harness) and their commands'
(git and the tests, jailed or not), and the whole Snakemake process's.

    python bench/bench_agent_runs.py [--turn-s 0.02] [--json out.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_agent_cost import CYCLES, MODEL, Agent, make_target, session_env  # noqa: E402
from fake_anthropic import FakeAnthropic  # noqa: E402

LOG_VARIABLE = "BENCH_SUITE_RUNS_LOG"
TEST_COMMAND = "python -m pytest -q"

# Run in the Snakemake process before Snakemake: each run of the test command is logged.
WATCH = r"""
import json, os, resource, subprocess, sys, time, traceback
from autoresearch.safety import commands

log = os.environ.pop("BENCH_SUITE_RUNS_LOG")
real = commands.run


def content_tree(cwd):
    # The tree the worktree holds, as `git add -A` sees it, through a throwaway index.
    env = dict(os.environ, GIT_INDEX_FILE=os.path.join(os.path.dirname(log), "bench-index"))
    git = ["git", "-C", str(cwd)]
    subprocess.run([*git, "read-tree", "HEAD"], env=env, capture_output=True)
    # The harness's own file for a selecting run (its last failures) is no part of the tree.
    add = [*git, "add", "-A", "--", ".", ":(exclude).pytest_cache"]
    subprocess.run(add, env=env, capture_output=True)
    tree = subprocess.run([*git, "write-tree"], env=env, capture_output=True, text=True)
    return tree.stdout.strip()


def watched(command, cwd, *args, **kwargs):
    if "pytest" not in command:
        return real(command, cwd, *args, **kwargs)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree = content_tree(cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    asked = any(f.name == "_tool_run_tests" for f in traceback.extract_stack())
    who = "agent" if asked else "harness"
    start = time.monotonic()
    result = real(command, cwd, *args, **kwargs)
    line = {"who": who, "tree": tree, "wall_s": time.monotonic() - start, "bench_cpu_s": own}
    with open(log, "a") as handle:
        handle.write(json.dumps(line) + "\n")
    return result


commands.run = watched
sys.argv = ["snakemake", *sys.argv[1:]]
import runpy
runpy.run_module("snakemake", run_name="__main__")
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_session(work: Path, fake_url: str, sandbox: str) -> tuple[Path, float]:
    spec = {
        "mode": "sweep",
        "target": str(work / "target"),
        "test_command": TEST_COMMAND,
        "max_cycles": CYCLES,
        "stop_below": None,
        "commands": {"sandbox": sandbox},
        "agent": {
            "backend": "claude",
            "model": MODEL,
            "request_timeout_s": 60,
            "max_retries": 0,
        },
    }
    spec_file = work / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    env = session_env(work, fake_url, **{LOG_VARIABLE: str(work / "suite-runs.jsonl")})
    args = [sys.executable, "-c", WATCH, "--snakefile", str(ROOT / "Snakefile")]
    args += ["--cores", "1", "sessions/bench/done", "--configfile", str(spec_file), "--quiet"]
    cpu = children_cpu()
    proc = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the session failed:\n{proc.stderr[-4000:]}")
    return work / "sessions" / "bench", children_cpu() - cpu


def figures(work: Path, session: Path, process_cpu: float) -> dict[str, Any]:
    runs = [json.loads(line) for line in (work / "suite-runs.jsonl").read_text().splitlines()]
    by_agent: set[str] = set()
    repeats = 0
    for run in runs:
        if run["who"] == "agent":
            by_agent.add(run["tree"])
        elif run["tree"] in by_agent:
            repeats += 1
    stages: Counter[str] = Counter()
    with (session / "timings.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            stages["cpu_s"] += float(row["cpu_s"])
            stages["commands_cpu_s"] += float(row["commands_cpu_s"])
            stages["jailed_cpu_s"] += float(row.get("jailed_cpu_s") or 0)
    worktree = (session / "worktree").resolve()
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=worktree, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    tree = (
        subprocess.run(
            ["git", "rev-parse", "HEAD^{tree}"], cwd=worktree, check=True, capture_output=True
        )
        .stdout.decode()
        .strip()
    )
    ledger = session / "test-runs.jsonl"
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    filed = [json.loads(line) for line in lines]
    return {
        "suite_runs": len(runs),
        "by_agent": sum(r["who"] == "agent" for r in runs),
        "by_harness": sum(r["who"] == "harness" for r in runs),
        "harness_repeats_agent": repeats,
        "suite_wall_s": round(sum(r["wall_s"] for r in runs), 2),
        "bench_cpu_s": round(sum(r["bench_cpu_s"] for r in runs), 2),
        "harness_cpu_s": round(stages["cpu_s"], 2),
        "commands_cpu_s": round(stages["commands_cpu_s"], 2),
        "jailed_cpu_s": round(stages["jailed_cpu_s"], 2),
        "process_cpu_s": round(process_cpu, 2),
        "ledger_lines": len(filed),
        "ledger_by_agent": sum(e.get("by") == "agent" for e in filed),
        "kept": sorted(s for s in log if s.startswith(("fix: ", "refactor: "))),
        "tree": tree,
    }


def show(result: dict[str, Any], before: dict[str, Any] | None) -> None:
    rows = [
        ("suite runs", "suite_runs"),
        ("  asked by the agent", "by_agent"),
        ("  made by the harness", "by_harness"),
        ("  harness runs repeating an agent's", "harness_repeats_agent"),
        ("suite runs' wall s", "suite_wall_s"),
        ("harness CPU s (stages' own)", "harness_cpu_s"),
        ("commands' CPU s (git, tests)", "commands_cpu_s"),
        ("  of which jailed", "jailed_cpu_s"),
        ("Snakemake process CPU s", "process_cpu_s"),
        ("  of which this bench's watch", "bench_cpu_s"),
        ("ledger lines (test-runs.jsonl)", "ledger_lines"),
        ("  filed by the agent's runs", "ledger_by_agent"),
    ]
    print(f"{CYCLES} cycles, {len(result['kept'])} commits kept, sandbox {result['sandbox']}")
    print(f"{'':<36} {'this run':>10}" + (f" {'before':>10}" if before else ""))
    for label, key in rows:
        line = f"{label:<36} {result[key]:>10}"
        if before:
            line += f" {before.get(key, '-'):>10}"
        print(line)
    if before:
        print("same commits kept:", before["kept"] == result["kept"])
        print("same final tree:", before["tree"] == result["tree"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turn-s", type=float, default=0.02, help="sleep per model turn")
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "none"))
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--compare", type=Path, help="figures of an earlier run (--json)")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        agent = Agent(make_target(work / "target"), args.turn_s)
        started = time.monotonic()
        with FakeAnthropic(responder=agent) as fake:
            session, cpu = run_session(work, fake.url, args.sandbox)
        result = figures(work, session, cpu)
        result["sandbox"] = args.sandbox
        result["wall_s"] = round(time.monotonic() - started, 1)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    show(result, json.loads(args.compare.read_text()) if args.compare else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

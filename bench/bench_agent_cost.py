"""What a user pays per kept fix: model tokens, dollars and wall time of a sweep's stages.

A whole sweep session (Snakemake, the real `claude` backend and SDK) runs against the fake
Messages API from tests/, which counts tokens as characters / 4 and simulates the prompt
cache from each request's breakpoints. The agent is scripted but reads what it is sent:
each reply is the next step of a plan made from the request's task (its findings, its
changed files) and the number of turns so far, so the same agent works whatever the
harness splits into conversations. Its tool results are realistic: modules of 200-800
lines read whole, searches across the package, the target's pytest output.

3 cycles; Red reports 12 findings a cycle over 6 modules, 9 of them fixable: Green reads
the module, searches the callers, reads the tests, edits, runs the tests and calls
finish_fix (or reads, searches and skips). Refactor reads two changed files and makes one
edit. Each model turn is a fixed sleep (`--turn-s`) for the wall time.

    python bench/bench_agent_cost.py [--turn-s 0.05] [--json out.json] [--compare before.json]
    python bench/bench_agent_cost.py --parallel-green 1,3 [--turn-s 0.5]

Prints, per stage and per kept fix: input tokens (uncached, cache write, cache read),
output tokens, dollars at the configured prices (input's apart), model turns and wall
seconds (the stages' own, from timings.tsv: on a loaded machine compare runs made side by
side); with --compare, the ratios to an earlier run and whether the same fixes and the
same final tree were kept. Then what the tools returned, by stage and tool (each result is
written to the cache once), how much of read_file's output repeats an earlier read (in the
same conversation, in another of the stage), and the floor: what no shaping of the tools'
outputs can take out while this agent asks for what it asks for.
bench/agent_cost_before.json holds the figures of the code before each Green finding had
its own conversation, bench/agent_cost_after.json those after it (old outputs trimmed),
bench/agent_cost_shown.json those with the tools returning less (autoresearch/agents/shown.py,
autoresearch/gate/run_output.py), bench/agent_cost_window.json those with read_file returning
a window and Green's brief quoting each finding's code; docs/cost.md discusses them.

    python bench/bench_agent_cost.py --profile short [--compare ...]

runs a second, differently scripted agent (short conversations, one read per finding, and
it acts only on code it has been shown: see short_plan); bench/agent_cost_short_before.json
and bench/agent_cost_short_window.json hold its figures before and with the window.

With --parallel-green, one session per k of `agent.parallel_green` instead: Green's wall
time (each cycle's sanitized.md to its green.json), its turns, and whether the same fixes
and the same final tree were kept as at the first k.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fake_anthropic import FakeAnthropic, Reply, text_block, tokens, tool_use  # noqa: E402

MODEL = "claude-sonnet-5-5"
CYCLES = 3
# Where a cycle's 12 findings are (module, lines), in Red's reporting order.
MODULES = {
    "shop/orders.py": 800,
    "shop/shipping.py": 650,
    "shop/pricing.py": 500,
    "shop/inventory.py": 400,
    "shop/customers.py": 300,
    "shop/reports.py": 200,
}
PER_MODULE = [3, 2, 2, 2, 2, 1]
UNFIXABLE = {4, 8, 12}  # the findings (1-based, of each cycle) Green skips
STAGES = ("red", "green", "refactor")


# -- the target ------------------------------------------------------------------------


def finding_places() -> dict[tuple[int, int], str]:
    """(cycle, k) -> module of the finding."""
    places = {}
    for cycle in range(1, CYCLES + 1):
        k = 0
        for module, count in zip(MODULES, PER_MODULE, strict=True):
            for _ in range(count):
                k += 1
                places[(cycle, k)] = module
    return places


def module_source(module: str, lines: int, markers: list[tuple[int, int]]) -> tuple[str, dict]:
    """A module of about `lines` lines: plain functions, some carrying a finding's marker.
    Returns the text and the line of each marker."""
    stem = Path(module).stem
    out = [f'"""The {stem} part of the shop: rules, totals and checks."""', ""]
    if module == "shop/orders.py":  # one line for each cycle's Refactor to tidy
        out += [f"# tidy c{cycle}" for cycle in range(1, CYCLES + 1)]
    out += ["", ""]
    where: dict[tuple[int, int], int] = {}
    todo = list(markers)
    n = 0
    while len(out) < lines - 10 or todo:
        n += 1
        if todo and n % 3 == 0:
            cycle, k = todo.pop(0)
            out += [
                f"def rule_c{cycle}_{k}(value: float, limit: float = {n}.0) -> float:",
                f'    """Rule {k} of cycle {cycle}: clamp value to the {stem} limit."""',
                "    if value > limit:",
                "        value = limit",
            ]
            where[(cycle, k)] = len(out) + 1
            out += [f"    return value  # BUG c{cycle}-{k}", "", ""]
            continue
        out += [
            f"def {stem}_step_{n}(items: list[float], rate: float = 0.{n % 9 + 1}) -> float:",
            f'    """Step {n}: the {stem} total of items at the given rate."""',
            "    total = 0.0",
            "    for item in items:",
            "        total += item * rate",
            "    total = +total",
            "    return round(total, 2)",
            "",
            "",
        ]
    return "\n".join(out).rstrip() + "\n", where


def test_source(module: str) -> str:
    stem = Path(module).stem
    lines = [f"from shop import {stem}", "", ""]
    for n in range(1, 13):
        func = f"{stem}_step_{n}" if n % 3 else f"{stem}_step_{n + 1}"
        lines += [
            f"def test_{stem}_step_{n}():",
            f"    assert {stem}.{func}([1.0, 2.0]) >= 0",
            "",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def make_target(repo: Path) -> dict[tuple[int, int], str]:
    """The target repository; returns each finding's location (`path:line`)."""
    places = finding_places()
    locations: dict[tuple[int, int], str] = {}
    (repo / "shop").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "shop" / "__init__.py").write_text('"""A small shop."""\n')
    for module, lines in MODULES.items():
        markers = sorted(key for key, m in places.items() if m == module)
        text, where = module_source(module, lines, markers)
        (repo / module).write_text(text)
        locations |= {key: f"{module}:{line}" for key, line in where.items()}
        (repo / "tests" / f"test_{Path(module).stem}.py").write_text(test_source(module))
    (repo / "README.md").write_text("# shop\n\nRun the tests with `python -m pytest -q`.\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-q", "-m", "initial"],
    ):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )
    return locations


# -- the scripted agent ----------------------------------------------------------------


def team_of(body: dict[str, Any]) -> str:
    names = {t["name"] for t in body.get("tools") or []}
    for team, tool in (
        ("red", "report_finding"),
        ("green", "finish_fix"),
        ("refactor", "finish_refactor"),
    ):
        if tool in names:
            return team
    return "?"


def task_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]["content"]
    return first if isinstance(first, str) else "".join(b.get("text", "") for b in first)


def red_plan(task: str, locations: dict) -> list[tuple[str, dict]]:
    cycle = int(re.search(r"# Cycle (\d+)", task)[1])
    plan: list[tuple[str, dict]] = [("list_files", {}), ("search", {"pattern": r"def rule_c\d+"})]
    places = finding_places()
    for module in MODULES:
        plan.append(("read_file", {"path": module}))
        for (c, k), m in places.items():
            if c == cycle and m == module:
                severity = "high" if k % 2 else "medium"
                plan.append(
                    (
                        "report_finding",
                        {
                            "severity": severity,
                            "title": f"c{cycle}-{k}: the {Path(m).stem} limit is applied late",
                            "location": locations[(c, k)],
                            "issue": f"rule_c{cycle}_{k} clamps after rounding, so totals drift.",
                            "impact": "Orders near the limit are priced wrong.",
                        },
                    )
                )
    return plan


def green_plan(task: str) -> list[tuple[str, dict]]:
    plan: list[tuple[str, dict]] = []
    for fid, cycle, k, path in re.findall(
        r"### \[(F-\d+)\] c(\d+)-(\d+):.*?\n- Severity: .*?\n- Location: ([^:\n]+):", task
    ):
        cycle, k = int(cycle), int(k)
        stem = Path(path).stem
        plan += [
            ("read_file", {"path": path}),
            ("search", {"pattern": f"rule_c{cycle}_{k}|{stem}_step"}),
        ]
        if k in UNFIXABLE:
            plan.append(("skip_finding", {"finding_id": fid, "reason": "needs an API decision"}))
            continue
        marker = f"# BUG c{cycle}-{k}"
        plan += [
            ("read_file", {"path": f"tests/test_{stem}.py"}),
            ("edit_file", {"path": path, "old_str": marker, "new_str": f"# fixed c{cycle}-{k}"}),
            ("run_tests", {}),
            ("finish_fix", {"finding_id": fid, "summary": f"clamp before rounding (c{cycle}-{k})"}),
        ]
    return plan


def refactor_plan(task: str, n: int) -> list[tuple[str, dict]]:
    """Read two changed files, tidy the n-th tidy line (Refactor's n-th run), test, finish."""
    files = re.findall(r"^- (\S+\.py)$", task, re.M)
    plan: list[tuple[str, dict]] = [("read_file", {"path": f}) for f in files[:2]]
    tidy = {"path": "shop/orders.py", "old_str": f"# tidy c{n}", "new_str": f"# tidied c{n}"}
    plan += [
        ("search", {"pattern": r"# tidy c\d"}),
        ("edit_file", tidy),
        ("run_tests", {}),
        ("finish_refactor", {"summary": f"name the tidy step {n}"}),
    ]
    return plan


# -- the second profile: short conversations, one read per finding -------------------


def calls_and_results(body: dict[str, Any]) -> list[tuple[str, dict, str]]:
    """The conversation's tool calls so far, each with the text of its result."""
    texts = {
        b["tool_use_id"]: b["content"] if isinstance(b["content"], str) else ""
        for m in body["messages"][1:]
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    return [
        (b["name"], b["input"], texts.get(b["id"], ""))
        for m in body["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


def read_on(text: str) -> int | None:
    """Where a read_file result says to go on (either wording the harness has used)."""
    found = re.findall(r"start_line=(\d+)", text.splitlines()[-1] if text else "")
    return int(found[0]) if found else None


def short_step(body: dict[str, Any], steps: list[tuple[str, dict, str, str]]) -> tuple | None:
    """The next call of a plan of (tool, args, text that must have been seen first, path to
    read for it): before a step whose text the conversation has not shown yet (in the task
    or a result), the agent reads the path, then reads on where the result says, until it
    has: an agent that acts only on code it has seen, however much a read returns."""
    made = calls_and_results(body)
    seen = task_of(body)
    at = 0
    for name, args, needs, path in steps:
        read_once = False
        while needs and (needs not in seen or not read_once):
            if at >= len(made):
                last = made[at - 1][2] if read_once and at else ""
                nxt = read_on(last) if read_once else None
                if read_once and nxt is None:
                    break  # nowhere left to read: act on what it has
                return ("read_file", {"path": path, **({"start_line": nxt} if nxt else {})})
            seen += made[at][2]
            at += 1
            read_once = True
        if at >= len(made):
            return (name, args)
        at += 1
    return None


def short_plan(team: str, task: str, locations: dict, tidied: int) -> list[tuple]:
    """Red searches for the markers and reports what it finds (no read); Green reads each
    finding's module once (more only if the marker is not yet in sight), edits and hands
    in, or skips; Refactor reads orders.py, edits its tidy line and hands in."""
    if team == "red":
        cycle = int(re.search(r"# Cycle (\d+)", task)[1])
        steps = [("search", {"pattern": f"# BUG c{cycle}-"}, "", "")]
        steps += [(name, args, "", "") for name, args in red_plan(task, locations)[2:]]
        return [s for s in steps if s[0] != "read_file"]
    if team == "green":
        steps = []
        for fid, cycle, k, path in re.findall(
            r"### \[(F-\d+)\] c(\d+)-(\d+):.*?\n- Severity: .*?\n- Location: ([^:\n]+):", task
        ):
            marker = f"# BUG c{cycle}-{k}"
            if int(k) in UNFIXABLE:
                steps.append(
                    (
                        "skip_finding",
                        {"finding_id": fid, "reason": "needs an API decision"},
                        marker,
                        path,
                    )  # fmt: skip
                )
                continue
            edit = {"path": path, "old_str": marker, "new_str": f"# fixed c{cycle}-{k}"}
            steps.append(("edit_file", edit, marker, path))
            summary = f"clamp before rounding (c{cycle}-{k})"
            steps.append(("finish_fix", {"finding_id": fid, "summary": summary}, "", ""))
        return steps
    if team == "refactor":
        tidy = {
            "path": "shop/orders.py",
            "old_str": f"# tidy c{tidied}",
            "new_str": f"# tidied c{tidied}",
        }
        return [
            ("edit_file", tidy, f"# tidy c{tidied}", "shop/orders.py"),
            ("finish_refactor", {"summary": f"name the tidy step {tidied}"}, "", ""),
        ]
    return []


class Outputs:
    """What the tools returned, by tool: each result is written to the cache once (W), so
    its size is what it costs at 1.25x. Counted as the fake counts (its JSON's characters
    / 4), when the result first appears, that is in the request right after the call.

    `repeated` is the part of read_file's output that repeats an earlier read of the same
    text: in the same conversation (`in conversation`) or in another conversation of the
    same stage (`in stage`, Red's, Green's or Refactor's of one cycle).

    `floor` is what no shaping of the tools' outputs can take out while the agent asks for
    what it asks for: the prefix (tools and system prompt) written once a team and read on
    every turn, each conversation's task, and each text read_file returned written once a
    conversation (`write`); and, if those stay in the conversation (`kept`), read again on
    each later turn. Everything else a tool returns counts as nothing here."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.repeated: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        # (team, cycle) -> {(path, text): the conversation that first read it}
        self.seen: dict[tuple[str, str], dict[tuple[str, str], str]] = defaultdict(dict)
        self.floor: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.teams: set[str] = set()

    def add(self, team: str, body: dict[str, Any]) -> None:
        self._floor(team, body)
        messages = body["messages"]
        if len(messages) < 3 or messages[-1]["role"] != "user":
            return
        calls = {b["id"]: b for b in messages[-2]["content"] if b.get("type") == "tool_use"}
        task = task_of(body)
        cycle = (re.search(r"# Cycle (\d+)", task) or [None, "?"])[1]
        conversation = task[:4000]
        for block in messages[-1]["content"]:
            if block.get("type") != "tool_result":
                continue
            call = calls.get(block["tool_use_id"], {})
            name = call.get("name", "?")
            text = block["content"] if isinstance(block["content"], str) else ""
            size = tokens(len(json.dumps(text, ensure_ascii=False)))
            self.tokens[team][name] += size
            self.calls[team][name] += 1
            if name != "read_file":
                continue
            key = (str(call.get("input", {}).get("path")), text)
            seen = self.seen[(team, cycle)]
            if key in seen:
                where = "in conversation" if seen[key] == conversation else "in stage"
                self.repeated[team][where] += size
            else:
                seen[key] = conversation

    def _floor(self, team: str, body: dict[str, Any]) -> None:
        messages = body["messages"]
        floor = self.floor[team]
        prefix = tokens(sum(len(json.dumps(b)) for b in [*body["tools"], *body["system"]]))
        floor["prefix_read"] += prefix
        if team not in self.teams:
            self.teams.add(team)
            floor["write"] += prefix
        task = tokens(len(json.dumps(messages[0]["content"])))
        floor["write" if len(messages) == 1 else "kept_read"] += task
        names = {
            b["id"]: (b["name"], json.dumps(b["input"], sort_keys=True))
            for m in messages
            if m["role"] == "assistant"
            for b in m["content"]
            if b.get("type") == "tool_use"
        }
        texts: set[tuple[str, str]] = set()
        for number, m in enumerate(messages):
            for block in m["content"] if m["role"] == "user" and number else []:
                name, args = names.get(block.get("tool_use_id"), ("?", ""))
                text = block.get("content")
                if name != "read_file" or block.get("is_error") or not isinstance(text, str):
                    continue
                if text.startswith("[") or (args, text) in texts:  # a note, a cut, a repeat
                    continue
                texts.add((args, text))
                size = tokens(len(json.dumps(text, ensure_ascii=False)))
                floor["write" if number == len(messages) - 1 else "kept_read"] += size

    def as_dict(self) -> dict[str, Any]:
        return {
            "floor": {t: dict(v) for t, v in self.floor.items()},
            "tokens": {t: dict(v) for t, v in self.tokens.items()},
            "calls": {t: dict(v) for t, v in self.calls.items()},
            "repeated_reads": {t: dict(v) for t, v in self.repeated.items()},
        }


class Agent:
    """Answers each request with the next step of its plan for the request's task."""

    def __init__(self, locations: dict, turn_s: float, profile: str = "full") -> None:
        self.locations = locations
        self.turn_s = turn_s
        self.profile = profile
        self.tidied = 0
        self.outputs = Outputs()

    def __call__(self, body: dict[str, Any]) -> Reply:
        team, task = team_of(body), task_of(body)
        self.outputs.add(team, body)
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if self.profile == "short":
            self.tidied += team == "refactor" and done == 0
            step = short_step(body, short_plan(team, task, self.locations, self.tidied))
            if step is None:
                return Reply(content=[text_block("All done.")], delay_s=self.turn_s)
            content = [text_block(f"Next: {step[0]}."), tool_use(*step)]
            return Reply(content=content, stop_reason="tool_use", delay_s=self.turn_s)
        if team == "red":
            plan = red_plan(task, self.locations)
        elif team == "green":
            plan = green_plan(task)
        elif team == "refactor":
            self.tidied += done == 0  # Refactor runs once a cycle
            plan = refactor_plan(task, self.tidied)
        else:
            plan = []
        if done < len(plan):
            name, args = plan[done]
            content = [text_block(f"Next: {name}."), tool_use(name, args)]
            return Reply(content=content, stop_reason="tool_use", delay_s=self.turn_s)
        return Reply(content=[text_block("All done.")], delay_s=self.turn_s)


# -- the session -----------------------------------------------------------------------


def session_env(work: Path, fake_url: str, **extra: str) -> dict[str, str]:
    """The environment of a bench session run: this checkout's Python, the fake Messages
    server, a throwaway key and data folder, no proxy."""
    env = dict(os.environ)
    env.update(
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=str(ROOT),
        ANTHROPIC_BASE_URL=fake_url,
        ANTHROPIC_API_KEY="sk-bench-not-a-real-key",
        XDG_DATA_HOME=str(work / "data"),
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        **extra,
    )
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env.pop(var, None)
    return env


def run_session(work: Path, fake_url: str, agent: dict[str, Any], cores: int = 1) -> Path:
    spec = {
        "mode": "sweep",
        "target": str(work / "target"),
        "test_command": "python -m pytest -q",
        "max_cycles": CYCLES,
        "stop_below": None,
        "agent": {
            "backend": "claude",
            "model": MODEL,
            "request_timeout_s": 60,
            "max_retries": 0,
            **agent,
        },
    }
    spec_file = work / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    env = session_env(work, fake_url)
    args = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]
    args += ["--cores", str(cores), "sessions/bench/done", "--configfile", str(spec_file)]
    args += ["--quiet"]
    proc = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the session failed:\n{proc.stderr[-4000:]}")
    return work / "sessions" / "bench"


def input_dollars(row: dict[str, str], prices: dict[str, float]) -> float:
    """A request's cost less its output's: what its input cost at the ledger's prices (which
    price 1-hour cache writes apart, a split usage.tsv does not keep)."""
    return float(row["cost_usd"] or 0) - int(row["output_tokens"]) * prices["output"] / 1e6


def figures(session: Path, turn_s: float) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    prices = config["prices"][MODEL]
    stages: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    with (session / "usage.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["stop_reason"] != "request":
                stages[row["team"]]["conversations"] += 1
                continue
            s = stages[row["team"]]
            s["turns"] += int(row["requests"])
            s["uncached"] += int(row["input_tokens"])
            s["cache_write"] += int(row["cache_write_tokens"])
            s["cache_read"] += int(row["cache_read_tokens"])
            s["output"] += int(row["output_tokens"])
            s["input_usd"] += input_dollars(row, prices)
            s["usd"] += float(row["cost_usd"] or 0)
    with (session / "timings.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["stage"] in STAGES:
                stages[row["stage"]]["wall_s"] += float(row["wall_s"])
    worktree = (session / "worktree").resolve()
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=worktree, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    kept = sorted(s for s in log if s.startswith("fix: "))
    tree = subprocess.run(
        ["git", "rev-parse", "HEAD^{tree}"],
        cwd=worktree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "stages": {k: dict(v) for k, v in stages.items()},
        "kept": kept,
        "tree": tree,
        "turn_s": turn_s,
        "green_elapsed_s": green_elapsed(session),
    }


def green_elapsed(session: Path) -> float:
    """Green's wall time as a user waits for it: from each cycle's sanitized.md to its
    green.json (with agent.parallel_green, the lane jobs and the job that applies them)."""
    total = 0.0
    for cycle in sorted((session / "cycles").glob("[0-9][0-9][0-9]")):
        sanitized, green = cycle / "sanitized.md", cycle / "green.json"
        if sanitized.exists() and green.exists():
            total += green.stat().st_mtime - sanitized.stat().st_mtime
    return total


COLUMNS = ("turns", "uncached", "cache_write", "cache_read", "output", "input_usd", "usd", "wall_s")


def show(result: dict[str, Any], before: dict[str, Any] | None) -> None:
    kept = len(result["kept"])
    print(f"model {MODEL}, {CYCLES} cycles, model turn = {result['turn_s']}s sleep")
    print(f"agent keys: {result.get('agent') or '(the defaults)'}")
    print(f"kept fixes: {kept}")
    head = "{:<10}" + " {:>12}" * len(COLUMNS)
    print(head.format("stage", *COLUMNS))
    total: dict[str, float] = defaultdict(float)
    for stage in STAGES:
        s = result["stages"].get(stage, {})
        for c in COLUMNS:
            total[c] += s.get(c, 0)
        print(_row(stage, s))
    print(_row("total", total))
    print(_row("per fix", {c: total[c] / max(kept, 1) for c in COLUMNS}))
    if "outputs" in result:
        show_outputs(result["outputs"], (before or {}).get("outputs"), kept)
    if before is None:
        return
    old_total: dict[str, float] = defaultdict(float)
    for stage in STAGES:
        for c in COLUMNS:
            old_total[c] += before["stages"].get(stage, {}).get(c, 0)
    old_kept = len(before["kept"])
    print("\nbefore / after, per kept fix:")
    for c in COLUMNS:
        old = old_total[c] / max(old_kept, 1)
        new = total[c] / max(kept, 1)
        ratio = f"{old / new:.2f}x" if new else "-"
        print(f"  {c:<12} {_fmt(c, old):>12} -> {_fmt(c, new):>12}  ({ratio} fewer)")
    for stage in STAGES:
        old = before["stages"].get(stage, {}).get("input_usd", 0)
        new = result["stages"].get(stage, {}).get("input_usd", 0)
        print(
            f"  {stage} input $: {old:.4f} -> {new:.4f}" + (f" ({old / new:.2f}x)" if new else "")
        )
    print("same fixes kept:", before["kept"] == result["kept"])
    print("same final tree:", before["tree"] == result["tree"])


def show_outputs(outputs: dict[str, Any], before: dict[str, Any] | None, kept: int) -> None:
    """What the tools returned (tokens the cache writes once), by stage and tool."""
    print("\ntool outputs (tokens, each written to the cache once), by stage and tool:")
    names = sorted({n for per in outputs["tokens"].values() for n in per})
    print(f"{'stage':<10} {'tool':<16} {'calls':>6} {'tokens':>9} {'before':>9}")
    for stage in STAGES:
        for name in names:
            size = outputs["tokens"].get(stage, {}).get(name)
            if size is None:
                continue
            old = (before or {}).get("tokens", {}).get(stage, {}).get(name)
            calls = outputs["calls"][stage][name]
            print(
                f"{stage:<10} {name:<16} {calls:>6} {size:>9} {old if old is not None else '-':>9}"
            )
    for stage, where in outputs["repeated_reads"].items():
        for kind, size in where.items():
            print(f"  {stage}: read_file output repeating an earlier read {kind}: {size} tokens")
    if "floor" in outputs:
        show_floor(outputs["floor"], kept)


def show_floor(floor: dict[str, dict[str, int]], kept: int) -> None:
    """The input dollars no output shaping can take out, with this agent (see Outputs)."""
    price = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["prices"][MODEL]
    write, read = price["cache_write"] / 1e6, price["cache_read"] / 1e6
    total = defaultdict(int)
    for per in floor.values():
        for k, v in per.items():
            total[k] += v
    least = total["write"] * write + total["prefix_read"] * read
    shape = least + total["kept_read"] * read
    print(
        f"floor: prefix, tasks and each read_file text written once a conversation "
        f"({total['write']} tokens), the prefix read every turn ({total['prefix_read']}): "
        f"${least:.4f} (${least / max(kept, 1):.4f} a kept fix); those texts also read on "
        f"each later turn ({total['kept_read']}): ${shape:.4f} (${shape / max(kept, 1):.4f})"
    )


def _fmt(column: str, value: float) -> str:
    return (
        f"{value:.4f}"
        if column.endswith("usd")
        else f"{value:.1f}"
        if column == "wall_s"
        else f"{value:.0f}"
    )


def _row(label: str, s: dict[str, float]) -> str:
    return f"{label:<10}" + "".join(f" {_fmt(c, s.get(c, 0)):>12}" for c in COLUMNS)


def parallel_green(
    ks: list[int], turn_s: float, keep: Path | None, keys: dict[str, Any]
) -> dict[int, dict]:
    """One session per k of agent.parallel_green (with k cores, so the lanes run side by
    side), the same scripted agent in each."""
    results = {}
    for k in ks:
        with tempfile.TemporaryDirectory() as tmp:
            work = keep / f"k{k}" if keep else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            locations = make_target(work / "target")
            agent = Agent(locations, turn_s)
            with FakeAnthropic(responder=agent) as fake:
                session = run_session(work, fake.url, {**keys, "parallel_green": k}, cores=k)
            results[k] = figures(session, turn_s) | {"agent": {**keys, "parallel_green": k}}
    return results


def show_parallel(results: dict[int, dict]) -> None:
    first = results[min(results)]
    print(
        f"Green with agent.parallel_green: k, {CYCLES} cycles, model turn = "
        f"{first['turn_s']}s sleep"
    )
    print(
        f"{'k':>3} {'green wall s':>13} {'of k=1':>8} {'green turns':>12} {'kept':>5} "
        f"{'same fixes':>11} {'same tree':>10}"
    )
    for k, r in results.items():
        green = r["stages"].get("green", {})
        print(
            f"{k:>3} {r['green_elapsed_s']:>13.1f} "
            f"{r['green_elapsed_s'] / first['green_elapsed_s']:>8.2f} "
            f"{green.get('turns', 0):>12.0f} {len(r['kept']):>5} "
            f"{str(r['kept'] == first['kept']):>11} {str(r['tree'] == first['tree']):>10}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turn-s", type=float, default=0.05, help="sleep per model turn")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--compare", type=Path, help="figures of an earlier run (--json)")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument(
        "--profile",
        choices=("full", "short"),
        default="full",
        help="the agent: full (reads, searches, tests; the figures above) or short (Red "
        "searches, Green reads each finding's module once and hands in)",
    )
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an agent.* key for the session, e.g. findings_per_conversation=1 (YAML value)",
    )
    parser.add_argument(
        "--parallel-green",
        metavar="K,K",
        help="instead: Green's wall time at each agent.parallel_green k, e.g. 1,3",
    )
    args = parser.parse_args()
    agent_keys = {k: yaml.safe_load(v) for k, v in (a.split("=", 1) for a in args.agent)}
    if args.parallel_green:
        ks = [int(k) for k in args.parallel_green.split(",")]
        results = parallel_green(ks, args.turn_s, args.keep, agent_keys)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
        show_parallel(results)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        locations = make_target(work / "target")
        agent = Agent(locations, args.turn_s, args.profile)
        with FakeAnthropic(responder=agent) as fake:
            session = run_session(work, fake.url, agent_keys)
        result = figures(session, args.turn_s)
        result["agent"] = agent_keys
        result["profile"] = args.profile
        result["outputs"] = agent.outputs.as_dict()
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    before = json.loads(args.compare.read_text()) if args.compare else None
    show(result, before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Prompt-caching benchmark: a scripted 10-turn Green stage against the fake Messages API.

Runs the real `claude` backend and toolbox on a throwaway repository, with the fake server
from tests/ answering. The fake counts tokens as characters / 4 and simulates the prompt
cache from the request's `cache_control` breakpoints, so the figures show how much of each
request the cache would serve — the property that makes long stages affordable.

    .venv/bin/python bench/bench_claude_cache.py

Prints per-turn input tokens, the cache-read share of turns 2..10 (target >= 80%), the
number of requests, and the harness's own time per turn (everything except the HTTP call).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fake_anthropic import FakeAnthropic, message, text_block, tool_call  # noqa: E402

from autoresearch.agents.backends.base import StageLimits  # noqa: E402
from autoresearch.agents.backends.claude import ClaudeBackend  # noqa: E402
from autoresearch.agents.prompts import BriefContext, build_brief  # noqa: E402
from autoresearch.agents.tools import Toolbox  # noqa: E402

TARGET_SHARE = 0.80
PRICES = {"claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1}}


def make_repo(root: Path) -> None:
    """A small but realistic module (a few hundred lines) and its tests."""
    (root / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    funcs = []
    for i in range(60):
        funcs.append(
            f"def price_{i}(qty: int, unit: float) -> float:\n"
            f'    """Price of {i}: quantity times unit, with a bulk discount."""\n'
            f"    if qty > {10 + i}:\n"
            f"        return qty * unit * 0.9\n"
            f"    return qty * unit\n"
        )
    (root / "shop" / "pricing.py").write_text("\n\n".join(funcs))
    (root / "tests" / "test_pricing.py").write_text(
        "from shop.pricing import price_0\n\n\n"
        "def test_price():\n    assert price_0(1, 2.0) == 2.0\n"
    )
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@example.com", *cmd],
            cwd=root,
            check=True,
            capture_output=True,
        )


def script() -> list:
    edit1 = {"path": "shop/pricing.py", "old_str": "if qty > 10:", "new_str": "if qty >= 10:"}
    edit2 = {"path": "shop/pricing.py", "old_str": "if qty > 11:", "new_str": "if qty >= 11:"}
    return [
        tool_call("list_files", {}),
        tool_call("read_file", {"path": "shop/pricing.py"}),
        tool_call("search", {"pattern": r"qty > 1\d:"}),
        tool_call("read_file", {"path": "tests/test_pricing.py"}),
        tool_call("edit_file", edit1),
        tool_call("run_tests", {}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "bulk discount from 10"}),
        tool_call("read_file", {"path": "shop/pricing.py", "start_line": 1, "end_line": 20}),
        tool_call("edit_file", edit2),
        tool_call("finish_fix", {"finding_id": "F-002", "summary": "bulk discount from 11"}),
        message([text_block("All issues handled.")]),  # spare: the stage should end before
    ]


def main() -> int:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.url
        os.environ["ANTHROPIC_API_KEY"] = "sk-bench-not-a-real-key"
        repo = Path(tmp) / "repo"
        make_repo(repo)
        fixed: list[str] = []

        def finish_fix(finding_id: str, summary: str) -> str:
            fixed.append(finding_id)
            if len(fixed) == 2:
                toolbox.mark_finished()
            return f"tests passed; committed fix: [{finding_id}] {summary}"

        toolbox = Toolbox("green", repo, test_command="true", hooks={"finish_fix": finish_fix})
        findings = [
            {
                "id": f"F-00{n}",
                "severity": "medium",
                "title": f"bulk discount threshold off by one in price_{n - 1}",
                "location": f"shop/pricing.py:{3 + 8 * (n - 1)}",
                "issue": "The discount starts one unit later than documented.",
                "impact": "Customers at the threshold pay full price.",
            }
            for n in (1, 2)
        ]
        ctx = BriefContext(
            team="green",
            target_path=str(repo),
            stack="Python",
            test_command="pytest -q",
            branch="autoresearch/improve",
            conventions="Type hints everywhere; errors are raised, never returned.",
            findings=findings,
        )
        brief = build_brief(ctx, {}, StageLimits(max_turns=20))
        backend = ClaudeBackend(
            {
                "model": "claude-haiku-4-5",
                "max_tokens": 4096,
                "max_retries": 0,
                "request_timeout_s": 10,
            },
            PRICES,
        )
        fake.push(*script())

        model_time = 0.0
        create = backend.client.messages.create

        def timed_create(**kwargs):
            nonlocal model_time
            started = time.perf_counter()
            try:
                return create(**kwargs)
            finally:
                model_time += time.perf_counter() - started

        backend.client.messages.create = timed_create
        started = time.perf_counter()
        run = backend.run(brief, toolbox, lambda line: None)
        wall = time.perf_counter() - started

    turns = fake.requests
    print(f"stage: stop_reason={run.stop_reason} turns={run.turns} requests={len(turns)}")
    header = ("turn", "input", "uncached", "cache_write", "cache_read", "read %")
    print("{:>4} {:>8} {:>9} {:>12} {:>11} {:>7}".format(*header))
    for n, rec in enumerate(turns, 1):
        u = rec.usage
        total = u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        share = u["cache_read_input_tokens"] / total if total else 0.0
        print(
            f"{n:>4} {total:>8} {u['input_tokens']:>9} {u['cache_creation_input_tokens']:>12} "
            f"{u['cache_read_input_tokens']:>11} {share:>6.1%}"
        )
    later = turns[1:]
    total_later = sum(
        r.usage["input_tokens"]
        + r.usage["cache_creation_input_tokens"]
        + r.usage["cache_read_input_tokens"]
        for r in later
    )
    read_later = sum(r.usage["cache_read_input_tokens"] for r in later)
    prefix_later = read_later + sum(r.usage["cache_creation_input_tokens"] for r in later)
    share = read_later / total_later if total_later else 0.0
    print(f"turns 2..{len(turns)}: input {total_later} tokens, served from cache {read_later}")
    print(f"cache-read share of turns 2..{len(turns)}: {share:.1%} (target >= {TARGET_SHARE:.0%})")
    print(f"cacheable-prefix share (read + write): {prefix_later / total_later:.1%}")
    print(f"requests per stage: {run.usage.requests}")
    harness = wall - model_time
    print(
        f"harness time: {harness * 1000:.1f} ms total, {harness * 1000 / max(run.turns, 1):.1f} ms "
        f"per turn (model/HTTP time excluded: {model_time * 1000:.1f} ms)"
    )
    print(f"stage cost at haiku prices: ${run.usage.cost_usd:.5f}")
    ok = share >= TARGET_SHARE and run.stop_reason == "finished" and run.turns == 10
    print("RESULT:", "ok" if ok else "BELOW TARGET")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

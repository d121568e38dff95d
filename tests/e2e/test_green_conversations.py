"""Green with a model: one conversation per finding over one cached prefix (docs/cost.md).

A whole sweep cycle through Snakemake and the real SDK against the scripted fake Messages
API; the assertions are on what the fake received and on the session's commits."""

from __future__ import annotations

import json

import pytest
from conftest import git
from fake_anthropic import FakeAnthropic, _blocks, message, text_block, tokens, tool_call

GUARDED = (
    "def add(a, b):\n    return a + b\n\n\ndef mean(values):\n    if not values:\n"
    '        raise ValueError("mean of no values")\n    return sum(values) / len(values)\n'
)


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


def report(severity: str, title: str, line: int):
    return tool_call(
        "report_finding",
        {
            "severity": severity,
            "title": title,
            "location": f"calc.py:{line}",
            "issue": f"{title}: the callers get wrong results.",
            "impact": "Wrong results.",
        },
    )


def run_cycle(workflow, target, fake, **agent):
    workflow.extra_env = {"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "sk-test-fake"}
    spec = {
        "mode": "sweep",
        "target": str(target),
        "test_command": "python -m pytest -q",
        "max_cycles": 1,
        "agent": {
            "backend": "claude",
            "model": "claude-haiku-4-5",
            "max_tokens": 1024,
            "request_timeout_s": 10,
            "max_retries": 0,
            **agent,
        },
    }
    workflow.run("g", spec)


def green_bodies(fake) -> list[dict]:
    return [b for b in fake.bodies if any(t["name"] == "finish_fix" for t in b.get("tools", []))]


def conversations(fake) -> list[list[int]]:
    """Indexes into fake.requests of each Green conversation's requests, in order."""
    out: list[list[int]] = []
    for i, body in enumerate(fake.bodies):
        if not any(t["name"] == "finish_fix" for t in body.get("tools", [])):
            continue
        if len(body["messages"]) == 1:
            out.append([])
        out[-1].append(i)
    return out


def test_each_finding_has_its_own_conversation_over_a_byte_identical_cached_prefix(
    workflow, target, fake
):
    fake.push(
        report("high", "mean crashes on an empty list", 5),
        report("medium", "add accepts strings", 2),
        report("low", "mean has no docstring", 6),
        message([text_block("Done.")]),
        # Green: three conversations, one per finding.
        tool_call("write_file", {"path": "calc.py", "content": GUARDED}),
        # A finding of another conversation is not this one's to handle: refused.
        tool_call("skip_finding", {"finding_id": "F-003", "reason": "out of my hands"}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "guard mean against []"}),
        tool_call("skip_finding", {"finding_id": "F-002", "reason": "by design"}),
        tool_call("skip_finding", {"finding_id": "F-003", "reason": "cosmetic"}),
        # Refactor: nothing to change.
        message([text_block("Nothing to simplify.")]),
    )
    run_cycle(workflow, target, fake)
    talks = conversations(fake)
    assert len(talks) == 3
    tasks = [fake.bodies[talk[0]]["messages"][0]["content"][0]["text"] for talk in talks]
    for task, (fid, title) in zip(
        tasks,
        [
            ("F-001", "mean crashes on an empty list"),
            ("F-002", "add accepts strings"),
            ("F-003", "mean has no docstring"),
        ],
        strict=True,
    ):
        # Each brief names its own finding and no other.
        assert f"[{fid}] {title}" in task
        assert task.count("### [F-") == 1
    # ...and the code around its location as it is when the conversation starts, numbered
    # as read_file numbers it (F-001's fix has made calc.py 8 lines long by F-002's).
    assert "- Code:\n```\ncalc.py, lines 1-6 of 6:\n1\tdef add(a, b):\n" in tasks[0]
    assert "5\tdef mean(values):\n6\t    return sum(values) / len(values)\n```" in tasks[0]
    assert "calc.py, lines 1-8 of 8:\n1\tdef add(a, b):\n2\t    return a + b" in tasks[1]
    # The prefix (tools, system prompt) is the same bytes in every request of the stage...
    green = green_bodies(fake)
    prefix = {json.dumps([b["tools"], b["system"]], sort_keys=True) for b in green}
    assert len(prefix) == 1
    # ...so every conversation after the first reads it from the cache at its first turn.
    shared = sum(len(text) for text, _ in _blocks({**green[0], "messages": []}))
    for talk in talks[1:]:
        assert fake.requests[talk[0]].usage["cache_read_input_tokens"] >= tokens(shared)
    worktree = workflow.session("g") / "worktree"
    assert git(worktree, "log", "--format=%s").splitlines()[0] == (
        "fix: [F-001] guard mean against []"
    )
    refused = fake.bodies[talks[0][2]]["messages"][-1]["content"][0]
    assert refused["is_error"] and "unknown finding id 'F-003'" in refused["content"]
    record = json.loads((workflow.session("g") / "cycles/001/green.json").read_text())
    assert [(r["id"], r["reason"]) for r in record["skipped"]] == [
        ("F-002", "by design"),
        ("F-003", "cosmetic"),
    ]
    assert record["usage"]["requests"] == 5  # the stage's usage is all its conversations'


def test_an_unfinished_change_of_one_conversation_never_reaches_the_next_ones_commit(
    workflow, target, fake
):
    fake.push(
        report("high", "mean crashes on an empty list", 5),
        report("medium", "add accepts strings", 2),
        message([text_block("Done.")]),
        # F-001's conversation changes calc.py and ends without finish_fix...
        tool_call("write_file", {"path": "calc.py", "content": GUARDED + "LEFTOVER = 1\n"}),
        message([text_block("I could not finish this one.")]),
        # ...F-002's edits the same file and finishes.
        tool_call(
            "edit_file",
            {"path": "calc.py", "old_str": "return a + b", "new_str": "return a + b  # ok"},
        ),
        tool_call("finish_fix", {"finding_id": "F-002", "summary": "note add"}),
        message([text_block("Nothing to simplify.")]),
    )
    run_cycle(workflow, target, fake)
    worktree = workflow.session("g") / "worktree"
    fix = git(worktree, "log", "--format=%H", "--grep", r"^fix: \[F-002\]").split()
    assert len(fix) == 1
    diff = git(worktree, "show", fix[0])
    assert "return a + b  # ok" in diff
    assert "LEFTOVER" not in diff and "ValueError" not in diff
    record = json.loads((workflow.session("g") / "cycles/001/green.json").read_text())
    assert [(r["id"], r["reason"]) for r in record["skipped"]] == [("F-001", "not attempted")]


def test_each_finding_has_its_own_turns_so_one_running_out_leaves_the_next_theirs(
    workflow, target, fake
):
    fake.push(
        report("high", "mean crashes on an empty list", 5),
        report("medium", "add accepts strings", 2),
        report("low", "mean has no docstring", 6),
        # Green, one turn per finding: F-001's conversation runs out after its edit...
        tool_call("write_file", {"path": "calc.py", "content": GUARDED}),
        # ...and F-002's and F-003's still get their own turn each.
        tool_call("skip_finding", {"finding_id": "F-002", "reason": "by design"}),
        tool_call("skip_finding", {"finding_id": "F-003", "reason": "cosmetic"}),
        message([text_block("Nothing to simplify.")]),
    )
    run_cycle(workflow, target, fake, max_turns=3, max_turns_per_finding=1)
    assert [len(t) for t in conversations(fake)] == [1, 1, 1]
    record = json.loads((workflow.session("g") / "cycles/001/green.json").read_text())
    assert record["fixed"] == []
    assert [(r["id"], r["reason"]) for r in record["skipped"]] == [
        ("F-002", "by design"),
        ("F-003", "cosmetic"),
        ("F-001", "not attempted"),
    ]
    # F-001's unfinished edit was restored, never committed.
    worktree = workflow.session("g") / "worktree"
    assert "raise ValueError" not in (worktree / "calc.py").read_text()


def test_without_turns_per_finding_the_stages_max_turns_holds_for_all_its_conversations(
    workflow, target, fake
):
    fake.push(
        report("high", "mean crashes on an empty list", 5),
        report("medium", "add accepts strings", 2),
        report("low", "mean has no docstring", 6),
        # Red stops at max_turns: 3 here.
        tool_call("write_file", {"path": "calc.py", "content": GUARDED}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "guard mean against []"}),
        tool_call("skip_finding", {"finding_id": "F-002", "reason": "by design"}),
        # The stage's three turns are used up: F-003's conversation is not started.
        message([text_block("Nothing to simplify.")]),
    )
    run_cycle(workflow, target, fake, max_turns=3, max_turns_per_finding=None)
    talks = conversations(fake)
    assert [len(t) for t in talks] == [2, 1]
    record = json.loads((workflow.session("g") / "cycles/001/green.json").read_text())
    assert [r["id"] for r in record["fixed"]] == ["F-001"]
    assert [(r["id"], r["reason"]) for r in record["skipped"]] == [
        ("F-002", "by design"),
        ("F-003", "not attempted"),
    ]

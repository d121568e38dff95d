"""The claude backend, through the real anthropic SDK, against a scripted local fake API."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fake_anthropic import (
    FakeAnthropic,
    Reply,
    error,
    message,
    rate_limited,
    text_block,
    thinking_block,
    tool_call,
    tool_use,
)
from fake_messages_rules import problems

from autoresearch.agents import ledger
from autoresearch.agents.backends import get_backend
from autoresearch.agents.backends.base import (
    SessionStop,
    StageBrief,
    StageFailed,
    StageLimits,
    ToolResult,
)
from autoresearch.agents.backends.claude import STREAM_ABOVE_TOKENS, ClaudeBackend
from autoresearch.agents.tools import Toolbox

PRICES = {"claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.1}}
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def fake(monkeypatch):
    for var in (
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CUSTOM_HEADERS",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    with FakeAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        yield server


def backend(**agent) -> ClaudeBackend:
    spec = {
        "model": "claude-haiku-4-5",
        "max_tokens": 1024,
        "request_timeout_s": 5,
        "max_retries": 2,
    }
    spec.update(agent)
    return ClaudeBackend(spec, PRICES)


class Stage:
    """A green toolbox on a small worktree, with hooks that record what the harness got."""

    def __init__(self, root: Path, finish_on_fix: bool = True) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / "a.py").write_text("def add(a, b):\n    return a - b\n")
        self.fixes: list[dict] = []
        self.progress: list[str] = []

        def finish_fix(finding_id: str, summary: str) -> str:
            self.fixes.append({"finding_id": finding_id, "summary": summary})
            if finish_on_fix:
                self.toolbox.mark_finished()
            return f"committed fix: [{finding_id}] {summary}"

        self.toolbox = Toolbox(
            "green",
            root,
            test_command="true",
            hooks={"finish_fix": finish_fix, "skip_finding": lambda **kw: "skipped"},
        )

    def brief(self, **limits) -> StageBrief:
        return StageBrief(
            team="green",
            system="You are the Green team. Fix the issues.",
            task="# Issues\n### [F-001] add subtracts\n- Location: a.py:2",
            limits=StageLimits(**limits),
        )

    def run(self, be: ClaudeBackend, **limits):
        return be.run(self.brief(**limits), self.toolbox, self.progress.append)


def last_user_results(body: dict) -> list[dict]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


# -- the loop ---------------------------------------------------------------------------------


def test_tool_loop_executes_tools_and_feeds_results_back_until_finished(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        tool_call("read_file", {"path": "a.py"}),
        tool_call("edit_file", {"path": "a.py", "old_str": "a - b", "new_str": "a + b"}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "add adds"}),
    )
    run = stage.run(backend())
    assert run.stop_reason == "finished"
    assert run.turns == 3
    assert (tmp_path / "wt" / "a.py").read_text().endswith("return a + b\n")
    assert stage.fixes == [{"finding_id": "F-001", "summary": "add adds"}]
    assert len(fake.requests) == 3
    read_result = last_user_results(fake.bodies[1])[0]
    assert read_result["is_error"] is False
    assert "2\t    return a - b" in read_result["content"]
    # The assistant's tool_use is echoed back before its result.
    assert fake.bodies[1]["messages"][-2]["content"][0]["name"] == "read_file"
    assert fake.unscripted == 0


def test_usage_is_summed_over_calls_and_priced_from_the_spec(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(tool_call("read_file", {"path": "a.py"}), message([text_block("done")]))
    run = stage.run(backend())
    recorded = fake.requests
    assert run.usage.requests == 2
    assert run.usage.input_tokens == sum(r.usage["input_tokens"] for r in recorded)
    assert run.usage.cache_read_input_tokens == sum(
        r.usage["cache_read_input_tokens"] for r in recorded
    )
    assert run.usage.cache_creation_input_tokens == sum(
        r.usage["cache_creation_input_tokens"] for r in recorded
    )
    assert run.usage.output_tokens > 0
    # Prices are linear, so the summed per-call costs equal the cost of the summed usage.
    assert run.usage.cost_usd == pytest.approx(ledger.price("claude-haiku-4-5", run.usage, PRICES))
    assert run.usage.cost_usd > 0


def test_end_turn_without_finishing_returns_end_turn_with_the_final_text(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(message([text_block("Nothing to fix here.")]))
    run = stage.run(backend())
    assert (run.stop_reason, run.turns) == ("end_turn", 1)
    assert "Nothing to fix" in run.detail


def test_large_max_tokens_streams_and_small_does_not(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        tool_call("edit_file", {"path": "a.py", "old_str": "a - b", "new_str": "a + b"}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "streamed fix"}),
    )
    run = stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS * 2))
    assert run.stop_reason == "finished"
    assert all(body.get("stream") is True for body in fake.bodies)
    assert (tmp_path / "wt" / "a.py").read_text().endswith("return a + b\n")
    assert run.usage.requests == 2 and run.usage.output_tokens > 0

    fake.requests.clear()
    small = Stage(tmp_path / "wt2")
    fake.push(message([text_block("ok")]))
    small.run(backend(max_tokens=1024))
    assert not fake.bodies[0].get("stream")


def test_pause_turn_sends_the_paused_reply_back_and_continues(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        message([text_block("Working on it")], stop_reason="pause_turn"),
        message([text_block("done")]),
    )
    run = stage.run(backend())
    assert run.stop_reason == "end_turn"
    assert run.turns == 2
    second = fake.bodies[1]["messages"]
    assert second[-1]["role"] == "assistant"
    assert second[-1]["content"][0]["text"] == "Working on it"


def test_refusal_ends_the_stage_with_the_reason(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        message(
            [],
            stop_reason="refusal",
            stop_details={"type": "refusal", "category": "cyber", "explanation": "policy says no"},
        )
    )
    run = stage.run(backend())
    assert run.stop_reason == "refusal"
    assert "policy says no" in run.detail
    assert len(fake.requests) == 1


# -- truncation ---------------------------------------------------------------------------------


def test_truncated_tool_use_is_never_executed_and_the_turn_is_retried_with_double_max_tokens(
    fake, tmp_path
):
    stage = Stage(tmp_path / "wt")
    fake.push(
        Reply(
            content=[tool_use("write_file", {"path": "evil.py", "content": "half a fi"})],
            stop_reason="max_tokens",
        ),
        message([text_block("short answer instead")]),
    )
    run = stage.run(backend(max_tokens=1000))
    assert not (tmp_path / "wt" / "evil.py").exists()
    assert [b["max_tokens"] for b in fake.bodies] == [1000, 2000]
    # The retry asks the same turn again: the cut-off reply is not in its history.
    assert len(fake.bodies[1]["messages"]) == len(fake.bodies[0]["messages"]) == 1
    assert run.stop_reason == "end_turn"
    assert run.usage.requests == 2  # the truncated call was paid for and is counted


def test_retry_after_truncation_may_switch_to_streaming(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(message([text_block("cut")], stop_reason="max_tokens"), message([text_block("ok")]))
    stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS - 1000))
    assert not fake.bodies[0].get("stream")
    assert fake.bodies[1].get("stream") is True


def test_the_retry_after_truncation_stays_within_the_models_output_limit(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(message([text_block("cut")], stop_reason="max_tokens"), message([text_block("ok")]))
    run = stage.run(backend(max_tokens=40_000))  # twice that is above haiku's 64k
    assert run.stop_reason == "end_turn"
    assert [b["max_tokens"] for b in fake.bodies] == [40_000, 64_000]


def test_truncation_at_the_models_output_limit_fails_the_stage_saying_so(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        message([text_block("cut")], stop_reason="max_tokens"),
        message([text_block("cut")], stop_reason="max_tokens"),
    )
    with pytest.raises(StageFailed, match="output limit of 64000"):
        stage.run(backend(max_tokens=64_000))
    assert [b["max_tokens"] for b in fake.bodies] == [64_000, 64_000]


def test_second_truncation_fails_the_stage_naming_agent_max_tokens(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    cut = Reply(
        content=[tool_use("write_file", {"path": "x.py", "content": "..."})],
        stop_reason="max_tokens",
    )
    fake.push(cut, Reply(content=cut.content, stop_reason="max_tokens"))
    with pytest.raises(StageFailed, match="agent.max_tokens"):
        stage.run(backend(max_tokens=1000))
    assert not (tmp_path / "wt" / "x.py").exists()


def test_context_window_exceeded_twice_fails_the_stage(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    reply = message([text_block("...")], stop_reason="model_context_window_exceeded")
    fake.push(reply, message([text_block("...")], stop_reason="model_context_window_exceeded"))
    with pytest.raises(StageFailed, match="context window"):
        stage.run(backend())


# -- transport faults -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"), [(429, "rate_limit_error"), (529, "overloaded_error"), (500, "api_error")]
)
def test_transient_errors_are_retried_by_the_sdk_then_succeed(fake, tmp_path, status, kind):
    stage = Stage(tmp_path / "wt")
    fake.push(error(status, kind), error(status, kind), message([text_block("ok")]))
    run = stage.run(backend(max_retries=2))
    assert run.stop_reason == "end_turn"
    assert [r.headers.get("x-stainless-retry-count") for r in fake.requests] == ["0", "1", "2"]
    assert run.usage.requests == 1  # failed attempts are not billed


def test_retries_exhausted_fail_the_stage_naming_status_and_request_id(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        error(529, "overloaded_error", "Overloaded"),
        error(529, "overloaded_error", "Overloaded"),
        error(529, "overloaded_error", "Overloaded", headers={"request-id": "req_last_attempt_42"}),
    )
    with pytest.raises(StageFailed) as failure:
        stage.run(backend(max_retries=2))
    text = str(failure.value)
    assert "529" in text and "req_last_attempt_42" in text and "Rerun" in text
    assert len(fake.requests) == 3


def test_unreadable_streamed_reply_is_asked_again_and_the_loop_goes_on(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        Reply(
            content=[tool_use("read_file", {"path": "a.py"})],
            stop_reason="tool_use",
            raw_json_input='{"path": nope}',  # not JSON: the SDK cannot assemble the reply
        ),
        tool_call("read_file", {"path": "a.py"}),
        message([text_block("done")]),
    )
    run = stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS * 2))
    assert run.stop_reason == "end_turn"
    assert len(fake.requests) == 3
    assert fake.bodies[0]["messages"] == fake.bodies[1]["messages"]


def test_error_event_mid_stream_twice_fails_the_stage_with_its_type(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    for _ in range(2):
        fake.push(
            Reply(
                content=[text_block("partial")],
                stream_error={"type": "overloaded_error", "message": "Overloaded mid-stream"},
            )
        )
    with pytest.raises(StageFailed, match="overloaded_error"):
        stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS * 2))
    assert len(fake.requests) == 2


def test_a_500_mid_stream_after_some_deltas_is_not_acted_on_and_the_turn_is_asked_again(
    fake, tmp_path
):
    stage = Stage(tmp_path / "wt")
    fake.push(
        Reply(
            content=[
                text_block("I will write the file now, all of it."),
                tool_use("write_file", {"path": "evil.py", "content": "half"}),
            ],
            stop_reason="tool_use",
            stream_error={"type": "api_error", "message": "Internal server error"},
            stream_error_after=5,  # message_start, a text block start and three deltas
        ),
        message([text_block("done")]),
    )
    run = stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS * 2))
    assert run.stop_reason == "end_turn" and "done" in run.detail
    assert not (tmp_path / "wt" / "evil.py").exists()
    assert len(fake.requests) == 2
    assert fake.bodies[0]["messages"] == fake.bodies[1]["messages"]


@pytest.mark.parametrize("cut_after", [4, 9, 14])  # in the text, in the tool input, before the end
def test_a_stream_that_stops_without_message_stop_is_asked_again(fake, tmp_path, cut_after):
    stage = Stage(tmp_path / "wt")
    fake.push(
        Reply(
            content=[
                text_block("Writing it."),
                tool_use("write_file", {"path": "evil.py", "content": "print('half a file')"}),
            ],
            stop_reason="tool_use",
            cut_after=cut_after,
        ),
        message([text_block("done")]),
    )
    run = stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS * 2))
    assert not (tmp_path / "wt" / "evil.py").exists()
    assert (run.stop_reason, run.detail) == ("end_turn", "done")
    assert len(fake.requests) == 2
    assert fake.bodies[0]["messages"] == fake.bodies[1]["messages"]


def test_unreadable_reply_twice_fails_the_stage(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    for _ in range(2):
        fake.push(
            Reply(
                content=[tool_use("read_file", {"path": "a.py"})],
                stop_reason="tool_use",
                raw_json_input='{"path": nope}',
            )
        )
    with pytest.raises(StageFailed, match="unreadable"):
        stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS * 2))


@pytest.mark.parametrize(
    ("status", "kind", "msg", "expect"),
    [
        (404, "not_found_error", "model: claude-nope", "agent.model"),
        (401, "authentication_error", "invalid x-api-key", "ANTHROPIC_API_KEY"),
        (400, "invalid_request_error", "prompt is too long: 300000 tokens", "context window"),
        (403, "permission_error", "not allowed", "HTTP 403"),
    ],
)
def test_client_errors_fail_the_stage_with_a_clear_reason(
    fake, tmp_path, status, kind, msg, expect
):
    stage = Stage(tmp_path / "wt")
    fake.push(error(status, kind, msg, headers={"request-id": "req_client_err"}))
    with pytest.raises(StageFailed) as failure:
        stage.run(backend())
    assert expect in str(failure.value)
    assert "req_client_err" in str(failure.value)
    assert len(fake.requests) == 1  # 4xx other than 408/409/429 are not retried


def test_a_prompt_the_api_finds_too_long_fails_the_stage_naming_the_context_window(
    tmp_path, monkeypatch
):
    # The fake refuses this request itself, as the API would: the test expects that.
    with FakeAnthropic(refusals_expected=True) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        stage = Stage(tmp_path / "wt")
        brief = stage.brief()
        brief.task += "\n" + "x" * (4 * 200_000)
        server.push(message([text_block("never sent")]))
        with pytest.raises(StageFailed, match="context window"):
            backend().run(brief, stage.toolbox, stage.progress.append)
        assert len(server.refused) == 1 and "prompt is too long" in server.refused[0]


@pytest.mark.parametrize(
    ("status", "kind", "msg"),
    [
        (402, "billing_error", "payment required"),
        (400, "invalid_request_error", "Your credit balance is too low to access the API."),
        (403, "permission_error", "You have reached your spend limit."),
    ],
)
def test_billing_errors_stop_the_session(fake, tmp_path, status, kind, msg):
    stage = Stage(tmp_path / "wt")
    fake.push(error(status, kind, msg))
    with pytest.raises(SessionStop, match="billing"):
        stage.run(backend())


def test_a_429_is_retried_after_the_seconds_its_retry_after_header_asks(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(rate_limited(retry_after_s=1), message([text_block("ok")]))
    run = stage.run(backend(max_retries=1))
    assert run.stop_reason == "end_turn"
    first, second = fake.requests
    # A lower bound only: a loaded machine can make the gap longer, never shorter.
    assert second.received_at - first.received_at >= 0.95
    assert run.usage.requests == 1


def test_a_429_that_outlasts_the_retries_fails_the_stage_naming_the_rate_limit(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(rate_limited(retry_after_s=0.01), rate_limited(retry_after_s=0.01))
    with pytest.raises(StageFailed, match="HTTP 429.*rate_limit_error"):
        stage.run(backend(max_retries=1))
    assert len(fake.requests) == 2


def test_a_slow_first_byte_past_the_stage_deadline_ends_the_stage_without_acting_on_it(
    fake, tmp_path
):
    stage = Stage(tmp_path / "wt")
    # The reply would arrive long after the stage's time is up: it must not be acted on.
    fake.push(
        Reply(
            content=[tool_use("write_file", {"path": "late.py", "content": "x = 1\n"})],
            stop_reason="tool_use",
            delay_s=20,
        )
    )
    started = time.monotonic()
    run = stage.run(backend(request_timeout_s=60, max_retries=2), deadline_s=2)
    assert run.stop_reason == "deadline"
    assert "agent.stage_timeout_s" in run.detail
    assert not (tmp_path / "wt" / "late.py").exists()
    assert len(fake.requests) == 1  # no retry past the deadline
    assert time.monotonic() - started < 15  # well before the reply would have come


def test_timeout_is_retried_then_succeeds(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(Reply(content=[text_block("late")], delay_s=1.5), message([text_block("on time")]))
    started = time.monotonic()
    run = stage.run(backend(request_timeout_s=0.4, max_retries=1))
    assert run.stop_reason == "end_turn" and "on time" in run.detail
    assert len(fake.requests) == 2
    assert time.monotonic() - started < 5


def test_timeouts_exhausted_fail_the_stage_naming_the_timeout_key(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(Reply(delay_s=1.0), Reply(delay_s=1.0))
    with pytest.raises(StageFailed, match="agent.request_timeout_s"):
        stage.run(backend(request_timeout_s=0.3, max_retries=1))


def test_unreachable_server_fails_the_stage_naming_the_base_url(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    stage = Stage(tmp_path / "wt")
    with pytest.raises(StageFailed, match="ANTHROPIC_BASE_URL"):
        stage.run(backend(max_retries=0))


def test_cache_reads_larger_than_the_prompt_never_make_a_negative_cost(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    # A proxy that reports input as prompt minus cache reads, with reads above the prompt.
    odd = {"input_tokens": -1500, "cache_read_input_tokens": 2000, "output_tokens": 10}
    fake.push(
        tool_call("read_file", {"path": "a.py"}, usage=odd), message([text_block("ok")], usage=odd)
    )
    seen = []
    brief = stage.brief()
    brief.on_request = seen.append
    run = backend().run(brief, stage.toolbox, stage.progress.append)
    assert run.usage.input_tokens == 0
    assert run.usage.cache_read_input_tokens == 4000
    assert run.usage.cost_usd >= 0 and all(one.cost_usd >= 0 for one in seen)
    assert all(one.input_tokens >= 0 for one in seen)
    assert run.usage.cost_usd == pytest.approx(ledger.price("claude-haiku-4-5", run.usage, PRICES))


# -- malformed tool input -----------------------------------------------------------------------


def test_malformed_tool_input_gets_an_error_result_and_the_loop_continues(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        Reply(
            content=[
                tool_use("read_file", {"path": 5}),  # wrong type
                tool_use("read_file", {}),  # missing field
                tool_use("read_file", "a.py"),  # not an object
                tool_use("delete_everything", {"path": "."}),  # unknown tool
                tool_use(
                    "report_finding",
                    {
                        "severity": "high",
                        "title": "t",
                        "location": "a",
                        "issue": "i",
                        "impact": "m",
                    },
                ),  # not green's tool
            ],
            stop_reason="tool_use",
        ),
        message([text_block("giving up")]),
    )
    run = stage.run(backend())
    assert run.stop_reason == "end_turn"
    results = last_user_results(fake.bodies[1])
    assert len(results) == 5
    assert all(r["is_error"] for r in results)
    assert "path" in results[0]["content"] and "required" in results[1]["content"]
    assert "JSON object" in results[2]["content"]
    assert "unknown tool" in results[3]["content"]
    assert "not available to the green team" in results[4]["content"]
    # The non-object input is echoed back as an object, so the request stays valid.
    echoed = fake.bodies[1]["messages"][-2]["content"]
    assert all(isinstance(b["input"], dict) for b in echoed)


# -- what the strict fake checks, on the backend's own requests ---------------------------------


def test_thinking_and_parallel_tool_calls_go_back_as_the_api_requires(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        Reply(
            content=[
                thinking_block("Read it, then look for callers."),
                text_block("Two reads."),
                tool_use("read_file", {"path": "a.py"}),
                tool_use("search", {"pattern": "add"}),
            ],
            stop_reason="tool_use",
        ),
        Reply(
            content=[thinking_block("Now fix it."), tool_use("list_files", {})],
            stop_reason="tool_use",
        ),
        message([text_block("done")]),
    )
    run = stage.run(backend(max_tokens=STREAM_ABOVE_TOKENS * 2))  # streamed thinking too
    assert run.stop_reason == "end_turn"
    assert fake.refused == []
    assert all(problems(body, fake.issued_thinking) == [] for body in fake.bodies)
    echoed = fake.bodies[1]["messages"][1]["content"][0]
    assert echoed == thinking_block("Read it, then look for callers.")


def test_every_request_of_a_long_stage_passes_the_rules(fake, tmp_path):
    stage = Stage(tmp_path / "wt", finish_on_fix=False)
    fake.push(
        message([text_block("Looking.")], stop_reason="pause_turn"),
        Reply(
            content=[text_block(""), tool_use("read_file", {"path": "a.py"})],
            stop_reason="tool_use",
        ),
        message([], stop_reason="pause_turn"),
        tool_call("read_file", {"path": 5}),  # an error result
        tool_call("edit_file", {"path": "a.py", "old_str": "a - b", "new_str": "a + b"}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "add adds"}),
        message([text_block("done")]),
    )
    run = stage.run(backend())
    assert run.stop_reason == "end_turn"
    assert len(fake.requests) == 7 and fake.refused == []
    assert all(problems(body, fake.issued_thinking) == [] for body in fake.bodies)


# -- limits ----------------------------------------------------------------------------------------


def test_max_turns_stops_the_stage(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(*[tool_call("read_file", {"path": "a.py"}) for _ in range(5)])
    run = stage.run(backend(), max_turns=2)
    assert (run.stop_reason, run.turns, len(fake.requests)) == ("max_turns", 2, 2)


def test_deadline_stops_the_stage(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(*[tool_call("read_file", {"path": "a.py"}, delay_s=0.15) for _ in range(10)])
    run = stage.run(backend(), deadline_s=0.25)
    assert run.stop_reason == "deadline"
    assert 1 <= run.turns <= 3


def test_stage_budget_stops_the_stage(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(*[tool_call("read_file", {"path": "a.py"}) for _ in range(5)])
    run = stage.run(backend(), max_cost_usd=0.000001)
    assert (run.stop_reason, run.turns) == ("budget", 1)
    assert "budget" in run.detail


def test_finished_toolbox_ends_the_stage_even_mid_list_of_calls(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        Reply(
            content=[
                tool_use("finish_fix", {"finding_id": "F-001", "summary": "x"}),
                tool_use("read_file", {"path": "a.py"}),
            ],
            stop_reason="tool_use",
        )
    )
    run = stage.run(backend())
    assert run.stop_reason == "finished"
    assert len(fake.requests) == 1


# -- caching ---------------------------------------------------------------------------------------


def strip_cache_control(obj):
    if isinstance(obj, dict):
        return {k: strip_cache_control(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [strip_cache_control(v) for v in obj]
    return obj


def test_cache_breakpoints_and_a_byte_identical_prefix_across_turns(fake, tmp_path):
    stage = Stage(tmp_path / "wt", finish_on_fix=False)
    fake.push(
        tool_call("read_file", {"path": "a.py"}),
        tool_call("search", {"pattern": "return"}),
        tool_call("list_files", {}),
        message([text_block("done")]),
    )
    stage.run(backend())
    bodies = fake.bodies
    assert len(bodies) == 4
    for body in bodies:
        assert body["system"][-1]["cache_control"] == EPHEMERAL
        assert body["tools"][-1]["cache_control"] == EPHEMERAL
        assert all("cache_control" not in t for t in body["tools"][:-1])
        # The moving breakpoint: on the last block of the last message, nowhere else.
        marks = [
            (i, j)
            for i, m in enumerate(body["messages"])
            for j, b in enumerate(m["content"])
            if "cache_control" in b
        ]
        assert marks == [(len(body["messages"]) - 1, len(body["messages"][-1]["content"]) - 1)]
    first = json.dumps([bodies[0]["system"], bodies[0]["tools"]], sort_keys=True)
    assert all(json.dumps([b["system"], b["tools"]], sort_keys=True) == first for b in bodies)
    # Each request's history is the previous request's, extended.
    for before, after in zip(bodies, bodies[1:], strict=False):
        n = len(before["messages"])
        assert strip_cache_control(after["messages"][:n]) == strip_cache_control(before["messages"])
    # So from the second turn on, the fake's cache simulation reports reads.
    assert fake.requests[0].usage["cache_read_input_tokens"] == 0
    assert all(r.usage["cache_read_input_tokens"] > 0 for r in fake.requests[1:])


def test_tool_definitions_sent_match_the_toolbox_and_are_not_mutated(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    before = stage.toolbox.definitions()
    fake.push(message([text_block("ok")]))
    stage.run(backend())
    assert stage.toolbox.definitions() == before
    sent = strip_cache_control(fake.bodies[0]["tools"])
    assert sent == before


# -- progress --------------------------------------------------------------------------------------


def test_progress_reports_one_line_per_turn_with_tool_argument_tokens_and_cost(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(
        tool_call("read_file", {"path": "a.py"}),
        tool_call("search", {"pattern": "def add"}),
        tool_call("finish_fix", {"finding_id": "F-001", "summary": "s"}),
    )
    stage.run(backend())
    lines = stage.progress
    assert len(lines) == 3
    assert lines[0].startswith("turn 1: read_file(a.py)")
    assert "search(def add)" in lines[1]
    assert "finish_fix(F-001)" in lines[2]
    assert all("tokens" in line and "$" in line for line in lines)
    token_counts = [int(line.split("tokens ")[1].split()[0]) for line in lines]
    assert token_counts == sorted(token_counts) and token_counts[0] > 0


def test_tool_error_results_are_marked_in_progress(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(tool_call("read_file", {"path": "../etc/passwd"}), message([text_block("ok")]))
    stage.run(backend())
    assert "read_file(../etc/passwd) [error]" in stage.progress[0]
    assert last_user_results(fake.bodies[1])[0]["is_error"] is True


def test_hook_result_goes_back_to_the_model(fake, tmp_path):
    stage = Stage(tmp_path / "wt", finish_on_fix=False)
    stage.toolbox.hooks["skip_finding"] = lambda finding_id, reason: ToolResult(
        f"recorded skip of {finding_id}"
    )
    fake.push(
        tool_call("skip_finding", {"finding_id": "F-001", "reason": "unclear"}),
        message([text_block("ok")]),
    )
    stage.run(backend())
    assert last_user_results(fake.bodies[1])[0]["content"] == "recorded skip of F-001"


def test_missing_api_key_fails_the_stage_naming_the_variable(fake, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no credential files to discover
    stage = Stage(tmp_path / "wt")
    fake.push(message([text_block("ok")]))
    with pytest.raises(StageFailed, match="ANTHROPIC_API_KEY"):
        stage.run(backend())


# -- the model table: output limit, 1-hour cache ------------------------------------------------

HAIKU_TABLE = {"claude-haiku-4-5": {"max_output_tokens": 64_000, "cache_ttl_1h": True}}


@pytest.fixture
def no_models_api(fake, monkeypatch):
    """A server that serves messages but has no Models API (as local servers): only the
    spec's model table can say what the model's output limit is."""
    with FakeAnthropic(models=None) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def test_without_a_models_api_the_model_table_bounds_the_retry_after_a_cut_off(
    no_models_api, tmp_path
):
    stage = Stage(tmp_path / "wt")
    cut = message([text_block("cut")], stop_reason="max_tokens")
    no_models_api.push(cut, message([text_block("cut again")], stop_reason="max_tokens"))
    agent = {"backend": "claude", "model": "claude-haiku-4-5", "max_tokens": 40_000}
    be = get_backend({"agent": agent, "prices": PRICES, "models": HAIKU_TABLE})
    with pytest.raises(StageFailed, match="output limit of 64000.*agent.max_tokens"):
        stage.run(be)
    # Twice 40k would be above haiku's 64k: the API would answer 400, not a second try.
    assert [b["max_tokens"] for b in no_models_api.bodies] == [40_000, 64_000]


def test_a_cut_off_reply_of_a_model_with_no_known_limit_is_not_asked_again_with_more(
    no_models_api, tmp_path
):
    stage = Stage(tmp_path / "wt")
    no_models_api.push(message([text_block("cut")], stop_reason="max_tokens"))
    be = ClaudeBackend({"model": "claude-haiku-4-5", "max_tokens": 1000, "max_retries": 0}, PRICES)
    with pytest.raises(StageFailed) as failed:
        stage.run(be)
    assert "agent.max_tokens" in str(failed.value)
    assert "models.claude-haiku-4-5.max_output_tokens" in str(failed.value)
    assert [b["max_tokens"] for b in no_models_api.bodies] == [1000]


def test_a_max_tokens_above_the_documented_limit_fails_before_any_request(fake, tmp_path):
    with pytest.raises(StageFailed, match=r"agent\.max_tokens = 100000 .* 64000"):
        ClaudeBackend(
            {"model": "claude-haiku-4-5-20251001", "max_tokens": 100_000},
            PRICES,
            models=HAIKU_TABLE,
        )
    assert fake.bodies == []


def test_cache_ttl_1h_puts_the_prefix_in_the_hour_cache_and_prices_it_at_twice_input(
    fake, tmp_path
):
    stage = Stage(tmp_path / "wt")
    fake.push(tool_call("read_file", {"path": "a.py"}), message([text_block("done")]))
    be = ClaudeBackend(
        {"model": "claude-haiku-4-5", "max_tokens": 1024, "cache_ttl": "1h"},
        PRICES,
        models=HAIKU_TABLE,
    )
    run = stage.run(be)
    hour = {"type": "ephemeral", "ttl": "1h"}
    for body in fake.bodies:
        assert body["system"][-1]["cache_control"] == hour
        assert body["tools"][-1]["cache_control"] == hour
        # The conversation's own breakpoint stays at 5 minutes: its next read is seconds away.
        assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    first = fake.requests[0].usage
    assert 0 < first["cache_creation"]["ephemeral_1h_input_tokens"]
    assert run.usage.cache_write_1h_tokens == sum(
        r.usage["cache_creation"]["ephemeral_1h_input_tokens"] for r in fake.requests
    )
    u = run.usage
    five = u.cache_creation_input_tokens - u.cache_write_1h_tokens
    expected = (
        u.input_tokens * 1.0
        + u.output_tokens * 5.0
        + five * 1.25
        + u.cache_write_1h_tokens * 2.0  # PRICES gives no cache_write_1h: twice the input
        + u.cache_read_input_tokens * 0.1
    ) / 1e6
    assert run.usage.cost_usd == pytest.approx(expected)


def test_cache_ttl_1h_is_not_asked_for_a_model_the_table_does_not_offer_it_for(fake, tmp_path):
    stage = Stage(tmp_path / "wt")
    fake.push(message([text_block("done")]))
    table = {"claude-haiku-4-5": {"max_output_tokens": 64_000}}
    be = ClaudeBackend(
        {"model": "claude-haiku-4-5", "max_tokens": 1024, "cache_ttl": "1h"}, PRICES, models=table
    )
    stage.run(be)
    assert fake.bodies[0]["system"][-1]["cache_control"] == EPHEMERAL
    assert fake.requests[0].usage["cache_creation"]["ephemeral_1h_input_tokens"] == 0


# -- the conversation's size ---------------------------------------------------------------------


def test_old_tool_outputs_are_shortened_past_the_size_but_never_the_task_system_or_last_turns(
    fake, tmp_path
):
    stage = Stage(tmp_path / "wt", finish_on_fix=False)
    for n in range(4):  # four files of 300 lines: each read is ~3k tokens
        (tmp_path / "wt" / f"m{n}.py").write_text(
            "".join(f"value_{n}_{i} = {i}  # a line of module {n}\n" for i in range(300))
        )
    fake.push(
        *(tool_call("read_file", {"path": f"m{n}.py", "end_line": 300}) for n in range(4)),
        tool_call("read_file", {"path": "missing.py"}),  # an error: short, never shortened
        tool_call("list_files", {}),
        message([text_block("done")]),
    )
    be = backend(trim_above_tokens=5000, keep_turns=3)
    stage.run(be)
    bodies = fake.bodies
    task = bodies[0]["messages"][0]
    assert all(b["system"] == bodies[0]["system"] for b in bodies)
    assert all(strip_cache_control(b["messages"][0]) == strip_cache_control(task) for b in bodies)

    def results(body):
        return [
            block
            for m in body["messages"]
            if m["role"] == "user"
            for block in m["content"]
            if block.get("type") == "tool_result"
        ]

    last = results(bodies[-1])
    assert len(last) == 6
    shortened = [r for r in last if "shortened" in r["content"]]
    assert shortened, "a conversation past the size keeps every old output whole"
    # The last three turns' outputs are whole (one a short error, which never is cut).
    assert "value_3_299 = 299" in last[3]["content"] and "shortened" not in last[3]["content"]
    assert "shortened" not in last[4]["content"] and last[4]["is_error"]
    assert "m0.py" in last[5]["content"]
    for r in shortened:
        assert "read_file(m" in r["content"] and "value_" not in r["content"]
    # What was shortened stays the same bytes in every later request (the cache reads it).
    for before, after in zip(bodies, bodies[1:], strict=False):
        for old, new in zip(results(before), results(after), strict=False):
            if "shortened" in old["content"]:
                assert new == {k: v for k, v in old.items() if k != "cache_control"}

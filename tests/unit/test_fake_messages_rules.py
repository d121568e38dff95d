"""The strict fake Messages API: each documented rule refuses a malformed request, and the
server answers it in the API's error shape without using up its script."""

from __future__ import annotations

import copy
import json
import threading
import urllib.error
import urllib.request

import pytest
from conftest import wait_for
from fake_anthropic import FakeAnthropic, Reply, message, text_block, thinking_block
from fake_messages_rules import problems, signature_for, unknown_model

EPHEMERAL = {"type": "ephemeral"}


def valid() -> dict:
    """A request shaped like the backend's: a tool loop two turns deep."""
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are the Green team.", "cache_control": EPHEMERAL}],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file.",
                "input_schema": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
                "cache_control": EPHEMERAL,
            }
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix F-001."}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "b",
                        "is_error": False,
                        "cache_control": EPHEMERAL,
                    },
                ],
            },
        ],
    }


def refused(body: dict, *words: str) -> None:
    found = problems(body)
    assert found, "the request was accepted"
    text = " ".join(found)
    for word in words:
        assert word in text, (word, found)


def test_a_request_shaped_like_the_backends_is_accepted():
    assert problems(valid()) == []
    assert unknown_model(valid()) is None


# -- roles and turns ----------------------------------------------------------------------------


def test_a_conversation_must_start_with_the_user():
    body = valid()
    body["messages"].insert(0, {"role": "assistant", "content": "Hello."})
    refused(body, 'first message must use the "user" role')


def test_a_role_other_than_user_or_assistant_is_refused():
    body = valid()
    body["messages"][0]["role"] = "system"
    refused(body, "messages.0.role")


SYSTEM_BETA = frozenset({"mid-conversation-system-2026-04-07"})


def with_system_turn(content: object = "Available agent types: claude.") -> dict:
    """Claude Code's shape: a system turn after the first user turn, inside `messages`."""
    body = valid()
    body["messages"].insert(1, {"role": "system", "content": content})
    return body


def test_a_system_turn_in_messages_is_refused_without_the_beta_that_allows_it():
    refused(with_system_turn(), "messages.1.role", "'system'")
    assert problems(with_system_turn(), betas=frozenset({"some-other-beta-2025-01-01"}))


def test_a_system_turn_under_its_beta_is_accepted_and_the_turns_around_it_still_pair():
    assert problems(with_system_turn(), betas=SYSTEM_BETA) == []
    body = with_system_turn()
    body["messages"].insert(3, {"role": "system", "content": "between a tool_use and its result"})
    assert problems(body, betas=SYSTEM_BETA) == []
    body["messages"][4]["content"].pop(0)  # toolu_1's result gone: still refused
    assert any("toolu_1" in p for p in problems(body, betas=SYSTEM_BETA))


def test_a_system_turn_under_its_beta_holds_only_text_and_never_comes_first():
    image = [{"type": "image", "source": {"type": "url", "url": "http://x"}}]
    assert problems(with_system_turn(image), betas=SYSTEM_BETA)
    assert problems(with_system_turn("  "), betas=SYSTEM_BETA)
    body = valid()
    body["messages"].insert(0, {"role": "system", "content": "first"})
    assert problems(body, betas=SYSTEM_BETA)


def test_the_server_reads_the_beta_from_the_anthropic_beta_header():
    with FakeAnthropic(refusals_expected=True) as fake:
        fake.push(message([text_block("ok")]))
        assert post(fake.url, with_system_turn())[0] == 400
        beta = {"anthropic-beta": "claude-code-20250219,mid-conversation-system-2026-04-07"}
        assert post(fake.url, with_system_turn(), beta)[0] == 200


def test_no_messages_is_refused():
    body = valid()
    body["messages"] = []
    refused(body, "at least one message")


def test_consecutive_user_turns_are_merged_so_results_after_text_are_refused():
    # The API merges consecutive turns of one role; a tool_result then no longer leads.
    body = valid()
    body["messages"].insert(2, {"role": "user", "content": "Some text first."})
    refused(body, "must come first")


# -- tool_use and tool_result ---------------------------------------------------------------------


def test_a_tool_use_without_its_tool_result_is_refused():
    body = valid()
    body["messages"][2]["content"].pop(0)
    refused(body, "without `tool_result`", "toolu_1")


def test_a_tool_use_in_the_final_message_is_refused():
    body = valid()
    body["messages"].pop()
    refused(body, "without `tool_result`", "toolu_1, toolu_2")


def test_a_tool_result_for_an_id_never_asked_is_refused():
    body = valid()
    body["messages"][2]["content"][0]["tool_use_id"] = "toolu_never"
    refused(body, "unexpected `tool_use_id`", "toolu_never")


def test_a_tool_result_answering_an_older_turn_is_refused():
    body = valid()
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "Done reading."}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]
    refused(body, "unexpected `tool_use_id`")


def test_a_tool_result_after_text_in_its_message_is_refused():
    body = valid()
    body["messages"][2]["content"].insert(0, {"type": "text", "text": "Here you go."})
    refused(body, "must come first")


def test_a_tool_use_answered_twice_is_refused():
    body = valid()
    body["messages"][2]["content"].append(
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "again"}
    )
    refused(body, "answered twice")


def test_tool_blocks_in_the_wrong_role_are_refused():
    body = valid()
    body["messages"][0]["content"].append(
        {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {}}
    )
    refused(body, "only allowed in assistant")
    body = valid()
    body["messages"][1]["content"].append({"type": "tool_result", "tool_use_id": "toolu_1"})
    refused(body, "only allowed in user")


def test_tool_use_input_that_is_not_an_object_is_refused():
    body = valid()
    body["messages"][1]["content"][1]["input"] = "a.py"
    refused(body, "valid dictionary")


# -- text ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "  \n"])
def test_empty_or_blank_text_blocks_are_refused(text):
    body = valid()
    body["messages"][1]["content"][0]["text"] = text
    refused(body, "text content blocks must")


def test_an_empty_message_is_refused_except_a_final_assistant_one():
    body = valid()
    body["messages"][0]["content"] = []
    refused(body, "non-empty content")
    ending = {"model": "claude-haiku-4-5", "max_tokens": 10}
    ending["messages"] = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}]
    assert problems(ending) == []


def test_empty_text_inside_a_tool_result_is_refused():
    body = valid()
    body["messages"][2]["content"][0]["content"] = [{"type": "text", "text": ""}]
    refused(body, "content.0.content.0")


# -- system -------------------------------------------------------------------------------------


def test_system_may_be_a_string_or_text_blocks_only():
    body = valid()
    body["system"] = "Plain text is fine."
    assert problems(body) == []
    body["system"] = [{"type": "image", "source": {}}]
    refused(body, "only text blocks")
    body["system"] = {"text": "an object"}
    refused(body, "system: must be a string")
    body["system"] = [{"type": "text", "text": ""}]
    refused(body, "system.0")


# -- tools --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["read file", "read.file", "", "x" * 65, None])
def test_tool_names_outside_the_documented_pattern_are_refused(name):
    body = valid()
    body["tools"][0]["name"] = name
    refused(body, "tools.0.name")


def test_duplicate_tool_names_are_refused():
    body = valid()
    body["tools"].insert(0, copy.deepcopy(body["tools"][0]))
    del body["tools"][0]["cache_control"]
    refused(body, "unique")


@pytest.mark.parametrize(
    "schema",
    [
        None,
        {"type": "string"},
        {"properties": {}},
        {"type": "object", "properties": []},
        {"type": "object", "required": "path"},
    ],
)
def test_an_input_schema_that_is_not_an_object_schema_is_refused(schema):
    body = valid()
    body["tools"][0]["input_schema"] = schema
    refused(body, "tools.0.input_schema")


# -- max_tokens and model -----------------------------------------------------------------------


def test_max_tokens_above_the_models_output_limit_is_refused():
    body = valid()
    body["max_tokens"] = 64_000
    assert problems(body) == []
    body["max_tokens"] = 64_001
    refused(body, "64001 > 64000")
    body["model"] = "claude-sonnet-5-5"
    assert problems(body) == []


@pytest.mark.parametrize("tokens", [None, -1, "1024", 1.5, True])
def test_max_tokens_must_be_a_non_negative_integer(tokens):
    body = valid()
    body["max_tokens"] = tokens
    refused(body, "max_tokens")


def test_an_unknown_model_is_not_found_and_a_dated_id_is_known():
    body = valid()
    body["model"] = "claude-nope-1"
    assert unknown_model(body) == "model: claude-nope-1"
    body["model"] = "claude-haiku-4-5-20251001"
    assert unknown_model(body) is None
    body["max_tokens"] = 64_001
    refused(body, "64001 > 64000")


def test_a_prompt_longer_than_the_context_window_is_refused():
    body = valid()
    body["messages"][0]["content"][0]["text"] = "x" * (4 * 200_000)
    refused(body, "prompt is too long", "> 200000 maximum")
    body["model"] = "claude-sonnet-5-5"  # a 1M window
    assert problems(body) == []


# -- cache_control --------------------------------------------------------------------------------


def test_a_fifth_cache_breakpoint_is_refused():
    body = valid()
    body["messages"][0]["content"][0]["cache_control"] = EPHEMERAL
    assert problems(body) == []  # four
    body["messages"][1]["content"][0]["cache_control"] = EPHEMERAL
    refused(body, "maximum of 4", "Found 5")


def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused():
    hour = {"type": "ephemeral", "ttl": "1h"}
    body = valid()
    body["tools"][-1]["cache_control"] = hour
    body["system"][-1]["cache_control"] = hour
    assert problems(body) == []  # 1h, 1h, then the conversation's 5m
    body["tools"][-1]["cache_control"] = EPHEMERAL
    refused(body, "system.0.cache_control", "must not come after", "tools.0")


def test_breakpoints_nested_in_tool_results_count_too():
    body = valid()
    body["messages"][0]["content"][0]["cache_control"] = EPHEMERAL
    body["messages"][2]["content"][0]["content"] = [
        {"type": "text", "text": "a", "cache_control": EPHEMERAL}
    ]
    refused(body, "Found 5")


def test_a_breakpoint_on_a_thinking_block_is_refused():
    body = valid()
    block = {**thinking_block("hmm"), "cache_control": EPHEMERAL}
    body["messages"][1]["content"].insert(0, block)
    refused(body, "thinking blocks cannot be cached")


@pytest.mark.parametrize(
    "control", [{"type": "persistent"}, "ephemeral", {"type": "ephemeral", "ttl": "2h"}]
)
def test_a_malformed_cache_control_is_refused(control):
    body = valid()
    body["system"][0]["cache_control"] = control
    refused(body, "system.0.cache_control")


# -- thinking ---------------------------------------------------------------------------------


def with_thinking(body: dict) -> tuple[dict, dict]:
    thought = thinking_block("I should read the file.")
    body["messages"][1]["content"].insert(0, thought)
    return body, {"toolu_1": [thought], "toolu_2": [thought]}


def test_thinking_blocks_passed_back_unchanged_are_accepted():
    body, issued = with_thinking(valid())
    assert problems(body, issued) == []


def test_an_edited_thinking_block_is_refused():
    body, issued = with_thinking(valid())
    body["messages"][1]["content"][0]["thinking"] = "I should delete the file."
    refused(body, "Invalid `signature`")
    body, issued = with_thinking(valid())
    del body["messages"][1]["content"][0]["signature"]
    refused(body, "Invalid `signature`")


def test_a_dropped_thinking_block_in_the_turn_that_used_tools_is_refused():
    body, issued = with_thinking(valid())
    body["messages"][1]["content"].pop(0)
    found = problems(body, issued)
    assert any("passed back unchanged" in p for p in found), found


def test_a_thinking_block_moved_after_text_is_refused():
    body, issued = with_thinking(valid())
    content = body["messages"][1]["content"]
    content[0], content[1] = content[1], content[0]
    found = problems(body, issued)
    assert any("Expected `thinking`" in p for p in found), found


def test_thinking_of_an_earlier_finished_turn_may_be_dropped():
    body, issued = with_thinking(valid())
    body["messages"][1]["content"].pop(0)
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": "Thanks."},
    ]
    assert problems(body, issued) == []


def test_the_thinking_config_follows_the_reference():
    body = valid()
    body["thinking"] = {"type": "adaptive"}
    assert problems(body) == []
    body["thinking"] = {"type": "enabled", "budget_tokens": 512}
    refused(body, "1024")
    body["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    refused(body, "greater than `thinking.budget_tokens`")
    body["thinking"] = {"type": "sometimes"}
    refused(body, "thinking.type")


def test_the_signature_depends_on_the_text():
    assert signature_for("a") != signature_for("b")


# -- the server ----------------------------------------------------------------------------------


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/v1/messages",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_server_answers_a_refusal_in_the_apis_error_shape_and_keeps_its_script():
    body = valid()
    body["messages"][2]["content"].pop(0)
    with FakeAnthropic(refusals_expected=True) as fake:
        fake.push(message([text_block("ok")]))
        status, answer = post(fake.url, body)
        assert status == 400
        assert answer["type"] == "error"
        assert answer["error"]["type"] == "invalid_request_error"
        assert "toolu_1" in answer["error"]["message"]
        assert post(fake.url, valid())[0] == 200  # the scripted reply was still there
        assert len(fake.refused) == 1


def test_the_server_answers_an_unknown_model_with_not_found():
    with FakeAnthropic(refusals_expected=True) as fake:
        status, answer = post(fake.url, {**valid(), "model": "claude-nope-1"})
    assert status == 404
    assert answer["error"] == {"type": "not_found_error", "message": "model: claude-nope-1"}


def test_an_unexpected_refusal_fails_the_test_when_the_fake_closes():
    fake = FakeAnthropic().__enter__()
    post(fake.url, {**valid(), "max_tokens": 10**6})
    with pytest.raises(AssertionError, match="would refuse too"):
        fake.__exit__(None, None, None)


def test_a_fake_told_not_to_be_strict_accepts_anything():
    with FakeAnthropic(strict=False) as fake:
        fake.push(message([text_block("ok")]))
        assert post(fake.url, {"model": "nope", "messages": []})[0] == 200


def test_a_held_reply_is_sent_only_once_its_condition_holds():
    ready = threading.Event()
    with FakeAnthropic() as fake:
        fake.push(Reply(content=[text_block("ok")], hold_until=ready.is_set))
        answer: list[int] = []
        client = threading.Thread(target=lambda: answer.append(post(fake.url, valid())[0]))
        client.start()
        wait_for(lambda: len(fake.requests) == 1)
        assert client.is_alive() and answer == []  # received, not answered
        ready.set()
        client.join(timeout=30)
    assert answer == [200]

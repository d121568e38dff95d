"""What the Messages API refuses, as a pure check of one request body.

The fake server (`fake_anthropic.py`) answers a request these rules find fault with the way
the API does: HTTP 400 `invalid_request_error` (404 `not_found_error` for an unknown model),
before any scripted reply is used. Each rule names the documentation page it comes from;
`docs/fake-messages-api.md` lists them.

Where the pages and the issue that asked for this differ, the pages win: consecutive turns
of one role are merged into one turn (the Messages reference says so), not refused; the
tool_use/tool_result pairing is then checked on the merged turns.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

# https://platform.claude.com/docs/en/about-claude/models/overview (and each model's page):
# "Max output" per model id; `max_tokens` above it is a 400, an id not served a 404.
OUTPUT_LIMITS = {
    "claude-sonnet-5-5": 128_000,
    "claude-opus-5-5": 128_000,
    "claude-haiku-4-5": 64_000,
}
# The same pages' "Context window": a longer prompt is a 400 "prompt is too long".
CONTEXT_WINDOWS = {
    "claude-sonnet-5-5": 1_000_000,
    "claude-opus-5-5": 1_000_000,
    "claude-haiku-4-5": 200_000,
}
CHARS_PER_TOKEN = 4  # the fake's token estimate, the same as its usage accounting
# https://platform.claude.com/docs/en/build-with-claude/prompt-caching: up to 4 breakpoints.
MAX_BREAKPOINTS = 4
# https://platform.claude.com/docs/en/agents-and-tools/tool-use/define-tools: tool names.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# https://platform.claude.com/docs/en/build-with-claude/prompt-caching ("what cannot be
# cached"): thinking blocks cannot carry cache_control themselves.
UNCACHEABLE = {"thinking", "redacted_thinking"}
_DATED = re.compile(r"^(?P<alias>.+)-\d{8}$")
# Claude Code (2.1.197) puts a `system` turn inside `messages` and names this beta in its
# `anthropic-beta` header; no public page describes it. Without the header the API refuses
# such a turn, so the fake accepts one only when the request names the beta.
MID_CONVERSATION_SYSTEM = "mid-conversation-system-2026-04-07"

Block = dict[str, Any]


def output_limit(model: str) -> int | None:
    """The model's max_tokens ceiling; a dated id (…-20260928) has its alias's."""
    return _per_model(OUTPUT_LIMITS, model)


def context_window(model: str) -> int | None:
    return _per_model(CONTEXT_WINDOWS, model)


def _per_model(table: Mapping[str, int], model: str) -> int | None:
    if model in table:
        return table[model]
    dated = _DATED.match(model)
    return table.get(dated["alias"]) if dated else None


def signature_for(thinking: str) -> str:
    """The fake's signature of a thinking block: a block edited on its way back fails it."""
    return base64.b64encode(hashlib.sha256(f"fake-signature:{thinking}".encode()).digest()).decode()


def unknown_model(body: Mapping[str, Any]) -> str | None:
    """The 404 message for a model the API does not serve, else None."""
    model = body.get("model")
    if isinstance(model, str) and output_limit(model) is not None:
        return None
    return f"model: {model}"


def problems(
    body: Mapping[str, Any],
    issued: Mapping[str, list[Block]] | None = None,
    betas: frozenset[str] = frozenset(),
) -> list[str]:
    """Every reason the API would refuse `body` with a 400 (empty: it would accept it).

    `issued` maps each tool_use id the server sent to the thinking blocks sent with it in
    the same reply, so a conversation that drops or reorders them is refused. `betas` are
    the names of the request's `anthropic-beta` header: only a beta widens what is accepted.
    """
    found: list[str] = []
    found += _max_tokens(body)
    found += _system(body.get("system"))
    found += _tools(body.get("tools"))
    turns, more = _turns(body.get("messages"), MID_CONVERSATION_SYSTEM in betas)
    found += more
    found += _pairing(turns)
    found += _thinking(turns, issued or {})
    found += _thinking_config(body)
    found += _breakpoints(body)
    found += _prompt_length(body)
    return found


# -- the rules ------------------------------------------------------------------------------


def _max_tokens(body: Mapping[str, Any]) -> list[str]:
    # https://platform.claude.com/docs/en/api/messages/create: max_tokens is required,
    # minimum 0, and "different models have different maximum values" (models overview).
    tokens = body.get("max_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        return [f"max_tokens: must be an integer >= 0, got {tokens!r}"]
    limit = output_limit(str(body.get("model")))
    if limit is not None and tokens > limit:
        return [
            f"max_tokens: {tokens} > {limit}, which is the maximum allowed number of output "
            f"tokens for {body.get('model')}"
        ]
    return []


def _prompt_length(body: Mapping[str, Any]) -> list[str]:
    # https://platform.claude.com/docs/en/about-claude/models/overview (context window) and
    # https://platform.claude.com/docs/en/api/errors: a prompt over it is refused.
    window = context_window(str(body.get("model")))
    keys = ("system", "tools", "messages")
    chars = len(json.dumps({k: body.get(k) for k in keys}, ensure_ascii=False))
    tokens = chars // CHARS_PER_TOKEN
    if window is not None and tokens > window:
        return [f"prompt is too long: {tokens} tokens > {window} maximum"]
    return []


def _system(system: Any) -> list[str]:
    # https://platform.claude.com/docs/en/api/messages/create: system is a string or an
    # array of text blocks.
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return [f"system: must be a string or a list of text blocks, got {type(system).__name__}"]
    found = []
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            found.append(f"system.{i}: only text blocks are allowed in system")
        else:
            found += _text(f"system.{i}", block)
    return found


def _tools(tools: Any) -> list[str]:
    # https://platform.claude.com/docs/en/agents-and-tools/tool-use/define-tools: a name
    # matching ^[a-zA-Z0-9_-]{1,64}$, unique, and an input_schema that is a JSON Schema
    # object; https://platform.claude.com/docs/en/api/messages/create (tools).
    if tools is None:
        return []
    if not isinstance(tools, list):
        return ["tools: must be a list"]
    found: list[str] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            found.append(f"tools.{i}: must be an object")
            continue
        if tool.get("type") not in (None, "custom"):
            continue  # a server tool: its own schema, not checked here
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            found.append(f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        elif name in seen:
            found.append(f"tools: Tool names must be unique ({name!r} appears twice)")
        else:
            seen.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            found.append(f"tools.{i}.input_schema: must be a JSON Schema with type 'object'")
        elif "properties" in schema and not isinstance(schema["properties"], dict):
            found.append(f"tools.{i}.input_schema.properties: must be an object")
        elif "required" in schema and not (
            isinstance(schema["required"], list)
            and all(isinstance(r, str) for r in schema["required"])
        ):
            found.append(f"tools.{i}.input_schema.required: must be a list of strings")
    return found


def _text(where: str, block: Block) -> list[str]:
    # https://platform.claude.com/docs/en/api/errors (common validation errors): text
    # content blocks must be non-empty and contain non-whitespace text.
    text = block.get("text")
    if not isinstance(text, str) or not text:
        return [f"{where}: text content blocks must be non-empty"]
    if not text.strip():
        return [f"{where}: text content blocks must contain non-whitespace text"]
    return []


class _Turn:
    """One conversational turn: consecutive messages of a role, merged as the API merges them."""

    def __init__(self, role: str, index: int) -> None:
        self.role = role
        self.index = index  # of its first message
        self.blocks: list[tuple[str, Block]] = []  # (where, block)


def _turns(messages: Any, system_turns: bool = False) -> tuple[list[_Turn], list[str]]:
    # https://platform.claude.com/docs/en/api/messages/create (messages): roles are user and
    # assistant; "consecutive user or assistant turns in your request will be combined into
    # a single turn"; content is a string or a list of blocks; the first turn is the user's.
    if not isinstance(messages, list) or not messages:
        return [], ["messages: at least one message is required"]
    found: list[str] = []
    turns: list[_Turn] = []
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role == "system" and system_turns and i > 0:
            # Under the beta: text only, never first, and no turn of the conversation
            # (user and assistant turns around it still pair and merge as without it).
            found += _system_turn(i, msg.get("content"))
            continue
        if role not in ("user", "assistant"):
            found.append(f"messages.{i}.role: must be 'user' or 'assistant', got {role!r}")
            continue
        if not turns or turns[-1].role != role:
            turns.append(_Turn(role, i))
        content = msg.get("content")
        final_assistant = role == "assistant" and i == len(messages) - 1
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if content or not final_assistant else []
        if not isinstance(content, list):
            found.append(f"messages.{i}.content: must be a string or a list of content blocks")
            continue
        if not content and not final_assistant:
            found.append(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for j, block in enumerate(content):
            where = f"messages.{i}.content.{j}"
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                found.append(f"{where}: must be a content block with a type")
                continue
            kind = block["type"]
            if kind == "text":
                found += _text(where, block)
            elif kind == "tool_use" and role != "assistant":
                found.append(f"{where}: tool_use blocks are only allowed in assistant messages")
            elif kind == "tool_result" and role != "user":
                found.append(f"{where}: tool_result blocks are only allowed in user messages")
            elif kind == "tool_use" and not isinstance(block.get("input"), dict):
                found.append(f"{where}.input: Input should be a valid dictionary")
            elif kind == "tool_result":
                found += _tool_result(where, block)
            turns[-1].blocks.append((where, block))
    if turns and turns[0].role != "user":
        found.append('messages: first message must use the "user" role')
    return turns, found


def _system_turn(i: int, content: Any) -> list[str]:
    if isinstance(content, str):
        return _text(f"messages.{i}.content", {"text": content})
    if not isinstance(content, list) or not content:
        return [f"messages.{i}.content: a system message holds text"]
    found = []
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            found.append(f"messages.{i}.content.{j}: only text blocks are allowed in system")
        else:
            found += _text(f"messages.{i}.content.{j}", block)
    return found


def _tool_result(where: str, block: Block) -> list[str]:
    # https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls:
    # content is a string or a list of content blocks; is_error a boolean.
    found = []
    content = block.get("content")
    if isinstance(content, list):
        for k, inner in enumerate(content):
            if isinstance(inner, dict) and inner.get("type") == "text":
                found += _text(f"{where}.content.{k}", inner)
    elif content is not None and not isinstance(content, str):
        found.append(f"{where}.content: must be a string or a list of content blocks")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        found.append(f"{where}.is_error: must be a boolean")
    return found


def _pairing(turns: list[_Turn]) -> list[str]:
    # https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls: every
    # tool_use is answered by a tool_result with its id in the very next user message, the
    # results first in that message's content; a result must answer a tool_use of the
    # message just before it.
    found: list[str] = []
    for n, turn in enumerate(turns):
        if turn.role != "user":
            continue
        asked = _tool_use_ids(turns[n - 1]) if n > 0 else []
        answered: list[str] = []
        leading = True
        for where, block in turn.blocks:
            if block["type"] != "tool_result":
                leading = False
                continue
            tool_use_id = block.get("tool_use_id")
            if tool_use_id not in asked:
                found.append(
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{tool_use_id}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message."
                )
            elif tool_use_id in answered:
                found.append(f"{where}: tool_use id {tool_use_id} is answered twice")
            elif not leading:
                found.append(
                    f"{where}: tool_result blocks must come first in the user message, "
                    "before any other content"
                )
            answered.append(tool_use_id)
    for n, turn in enumerate(turns):
        if turn.role != "assistant":
            continue
        following = turns[n + 1] if n + 1 < len(turns) else None
        answered = {
            block.get("tool_use_id")
            for _, block in (following.blocks if following else [])
            if block["type"] == "tool_result"
        }
        missing = [i for i in _tool_use_ids(turn) if i not in answered]
        if missing:
            found.append(
                f"messages.{turn.index}: `tool_use` ids were found without `tool_result` "
                f"blocks immediately after: {', '.join(map(str, missing))}. Each `tool_use` "
                "block must have a corresponding `tool_result` block in the next message."
            )
    return found


def _tool_use_ids(turn: _Turn) -> list[str]:
    return [b.get("id") for _, b in turn.blocks if b["type"] == "tool_use"]


def _thinking(turns: list[_Turn], issued: Mapping[str, list[Block]]) -> list[str]:
    # https://platform.claude.com/docs/en/build-with-claude/extended-thinking (preserving
    # thinking blocks) and .../thinking-tool-workflows: thinking blocks go back complete,
    # unmodified and in order, with the tool_use they came with; a modified block is a 400.
    found: list[str] = []
    for turn in turns:
        for where, block in turn.blocks:
            if block["type"] == "thinking":
                signature = block.get("signature")
                if not isinstance(signature, str) or signature != signature_for(
                    str(block.get("thinking"))
                ):
                    found.append(f"{where}: Invalid `signature` in `thinking` block")
            elif block["type"] == "redacted_thinking" and not isinstance(block.get("data"), str):
                found.append(f"{where}.data: redacted_thinking blocks carry their data")
    # Only the turn whose tools are being answered must keep them: earlier ones may go.
    if len(turns) >= 2 and turns[-1].role == "user" and turns[-2].role == "assistant":
        turn = turns[-2]
        kinds = [b["type"] for _, b in turn.blocks]
        sent = [_strip(b) for _, b in turn.blocks if b["type"] in UNCACHEABLE]
        for tool_use_id in _tool_use_ids(turn):
            expected = [_strip(b) for b in issued.get(tool_use_id, [])]
            if expected and sent[: len(expected)] != expected:
                found.append(
                    f"messages.{turn.index}: the thinking blocks sent with tool_use "
                    f"{tool_use_id} must be passed back unchanged and in order"
                )
            elif expected and kinds[0] not in UNCACHEABLE:
                found.append(
                    f"messages.{turn.index}.content.0: Expected `thinking` or "
                    f"`redacted_thinking`, but found `{kinds[0]}`"
                )
    return found


def _strip(block: Block) -> Block:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _thinking_config(body: Mapping[str, Any]) -> list[str]:
    # https://platform.claude.com/docs/en/api/messages/create (thinking): adaptive, enabled
    # with budget_tokens >= 1024 (and below max_tokens), or disabled.
    config = body.get("thinking")
    if config is None:
        return []
    kind = config.get("type") if isinstance(config, dict) else None
    if kind not in ("adaptive", "enabled", "disabled"):
        return [f"thinking.type: must be adaptive, enabled or disabled, got {kind!r}"]
    if kind == "enabled":
        budget = config.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return ["thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"]
        if isinstance(body.get("max_tokens"), int) and budget >= body["max_tokens"]:
            return ["`max_tokens` must be greater than `thinking.budget_tokens`"]
    return []


def _breakpoints(body: Mapping[str, Any]) -> list[str]:
    # https://platform.claude.com/docs/en/build-with-claude/prompt-caching: at most 4
    # cache_control breakpoints, of type ephemeral (ttl 5m or 1h, the 1h ones first), on
    # tools, system blocks and message content blocks — not on thinking blocks, not on
    # empty text.
    found: list[str] = []
    marked: list[tuple[str, Block]] = []
    for i, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, dict) and "cache_control" in tool:
            marked.append((f"tools.{i}", tool))
    system = body.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        if isinstance(block, dict) and "cache_control" in block:
            marked.append((f"system.{i}", block))
    for i, msg in enumerate(body.get("messages") or []):
        content = msg.get("content") if isinstance(msg, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            if "cache_control" in block:
                marked.append((f"messages.{i}.content.{j}", block))
            for k, inner in enumerate(block.get("content") or []):
                if isinstance(inner, dict) and "cache_control" in inner:
                    marked.append((f"messages.{i}.content.{j}.content.{k}", inner))
    if len(marked) > MAX_BREAKPOINTS:
        found.append(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marked)}."
        )
    for where, block in marked:
        control = block["cache_control"]
        if not isinstance(control, dict) or control.get("type") != "ephemeral":
            found.append(f"{where}.cache_control: type must be 'ephemeral'")
        elif control.get("ttl", "5m") not in ("5m", "1h"):
            found.append(f"{where}.cache_control.ttl: must be '5m' or '1h'")
        if block.get("type") in UNCACHEABLE:
            found.append(f"{where}: {block['type']} blocks cannot be cached with cache_control")
        elif block.get("type") == "text" and not block.get("text"):
            found.append(f"{where}: cache_control cannot be set for empty text blocks")
    # The same page, on mixing lifetimes: a 1-hour entry must come before every 5-minute one
    # (in the cache's order: tools, system, messages).
    first_5m = None
    for where, block in marked:
        control = block["cache_control"]
        ttl = control.get("ttl", "5m") if isinstance(control, dict) else None
        if ttl == "5m" and first_5m is None:
            first_5m = where
        elif ttl == "1h" and first_5m is not None:
            found.append(
                f"{where}.cache_control: a ttl='1h' cache_control block must not come after "
                f"a ttl='5m' one ({first_5m})"
            )
    return found

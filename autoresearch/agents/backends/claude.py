"""The `claude` backend: a hand-written tool-use loop over the official `anthropic` SDK.

The SDK does the transport work (auth, ANTHROPIC_BASE_URL, retries with backoff for
429/529/5xx/timeouts, SSE parsing). This loop adds what a stage needs on top: tool
dispatch through the toolbox, prompt caching, stage limits, cost accounting and errors
that say what to do next.

Costs (docs/cost.md): the system prompt and tools are one cached prefix, with a 1-hour
lifetime when `agent.cache_ttl: 1h` and the model table says the model offers it; the
conversation behind it is cached turn by turn; once a conversation passes
`agent.trim_above_tokens`, the outputs of old tool calls are shortened, never the task,
the system prompt or the last `agent.keep_turns` turns.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

import anthropic

from autoresearch.agents import ledger
from autoresearch.agents.backends import api_key
from autoresearch.agents.backends.base import (
    SessionStop,
    StageBrief,
    StageFailed,
    StageRun,
    Toolbox,
    ToolResult,
    Usage,
)

# Above this max_tokens a non-streamed reply can outlast HTTP timeouts (the SDK refuses
# such calls outright past ~21k tokens), so long replies are streamed.
STREAM_ABOVE_TOKENS = 16_000
EPHEMERAL = {"type": "ephemeral"}
CACHE_TTLS = ("5m", "1h")
# Tool outputs up to this many characters are never shortened: the outcome of a
# finish_fix or an error is worth more than the few tokens it takes.
KEEP_RESULT_CHARS = 400
CHARS_PER_TOKEN = 4  # the estimate a conversation's size is held to; the API counts exactly
TRUNCATED = ("max_tokens", "model_context_window_exceeded")
# Words in an API error that mean money, not a fault: stop the session, do not retry stages.
_BILLING_WORDS = ("spend limit", "credit balance", "billing", "usage limit", "quota")
_KEY_HINT = "set ANTHROPIC_API_KEY (any placeholder value for a local server at ANTHROPIC_BASE_URL)"
# The argument worth showing in a progress line, by tool.
_MAIN_ARG = ("path", "pattern", "finding_id", "id", "title", "summary", "hypothesis")


class _Unreadable(Exception):
    """A reply arrived but could not be parsed into a message (or broke off mid-stream)."""


class _OutOfTime(Exception):
    """The stage's deadline came before the model's answer."""


_UNASKED = object()  # the model's output limit, before the Models API was asked


class ClaudeBackend:
    """Backend protocol implementation; `spec_agent` is the spec's `agent` mapping."""

    name = "claude"

    def __init__(
        self,
        spec_agent: dict[str, Any],
        prices: dict[str, Any],
        *,
        models: dict[str, Any] | None = None,
        client: Any | None = None,
    ) -> None:
        self.model = str(spec_agent.get("model") or "")
        if not self.model:
            raise StageFailed("no model configured: set the spec key agent.model")
        self.max_tokens = int(spec_agent.get("max_tokens") or 8192)
        facts = ledger.model_prices(self.model, models or {}) or {}
        # The model table's documented limit; without one the Models API is asked.
        self.documented_limit: int | None = facts.get("max_output_tokens")
        if self.documented_limit is not None and self.max_tokens > self.documented_limit:
            raise StageFailed(
                f"agent.max_tokens = {self.max_tokens} is above the output limit of "
                f"{self.model} ({self.documented_limit}, models.{self.model}.max_output_tokens);"
                f" lower the spec key agent.max_tokens to at most {self.documented_limit}"
            )
        ttl = str(spec_agent.get("cache_ttl") or "5m")
        if ttl not in CACHE_TTLS:
            raise StageFailed(f"agent.cache_ttl is {ttl!r}; expected one of {CACHE_TTLS}")
        # The 1-hour cache only where the table says the model offers it; else the default.
        self.prefix_cache = (
            {"type": "ephemeral", "ttl": "1h"}
            if ttl == "1h" and facts.get("cache_ttl_1h")
            else EPHEMERAL
        )
        trim = spec_agent.get("trim_above_tokens")
        self.trim_above_chars = None if trim is None else int(trim) * CHARS_PER_TOKEN
        self.keep_turns = int(spec_agent.get("keep_turns", 3))
        self.max_retries = int(spec_agent.get("max_retries", 4))
        self.request_timeout_s = float(spec_agent.get("request_timeout_s") or 600)
        self.prices = prices or {}
        self._output_limit_cache: Any = _UNASKED
        if client is None:
            try:
                client = _client(api_key.take(), self.max_retries, self.request_timeout_s)
            except anthropic.AnthropicError as err:
                raise StageFailed(
                    f"cannot set up the model API client: {err}; {_KEY_HINT}"
                ) from err
        self.client = client

    # -- the loop ------------------------------------------------------------------------

    def run(self, brief: StageBrief, toolbox: Toolbox, progress: Callable[[str], None]) -> StageRun:
        # Both built once per stage and never touched again: the cached prefix must stay
        # byte-identical from the first request to the last.
        system = [{"type": "text", "text": brief.system, "cache_control": self.prefix_cache}]
        tools = toolbox.definitions()
        if tools:
            tools[-1]["cache_control"] = self.prefix_cache
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": brief.task}]}
        ]
        limits = brief.limits
        usage = Usage()
        turns = 0
        started = time.monotonic()
        deadline_at = None if limits.deadline_s is None else started + limits.deadline_s
        max_tokens = self.max_tokens
        # The toolbox may point at text it already sent in this conversation, and only
        # while that text is still here: a new conversation, or a cut, resets what it knows.
        forget_shown = getattr(toolbox, "forget_shown", lambda: None)
        forget_shown()

        def stop(reason: str, detail: str = "") -> StageRun:
            return StageRun(usage=usage, turns=turns, stop_reason=reason, detail=detail)

        while True:
            if toolbox.finished:
                return stop("finished")
            if limits.max_turns is not None and turns >= limits.max_turns:
                return stop("max_turns", f"stopped after {turns} turns (agent.max_turns)")
            elapsed = time.monotonic() - started
            if limits.deadline_s is not None and elapsed >= limits.deadline_s:
                return stop("deadline", f"stopped after {elapsed:.0f}s (agent.stage_timeout_s)")
            if limits.max_cost_usd is not None and usage.cost_usd >= limits.max_cost_usd:
                return stop(
                    "budget",
                    f"stage cost ${usage.cost_usd:.4f} reached ${limits.max_cost_usd:.4f} "
                    "(budget.max_cost_usd_per_stage)",
                )

            try:
                response, max_tokens = self._complete(
                    system, tools, messages, max_tokens, usage, brief.on_request, deadline_at
                )
            except _OutOfTime:
                elapsed = time.monotonic() - started
                return stop(
                    "deadline",
                    f"stopped after {elapsed:.0f}s (agent.stage_timeout_s) while waiting for the "
                    "model's reply",
                )
            turns += 1
            messages.append({"role": "assistant", "content": _assistant_content(response)})
            reason = response.stop_reason

            if reason == "tool_use":
                results, called = self._run_tools(response, toolbox)
                if not results:  # nothing to answer: an empty user turn would be rejected
                    return stop("end_turn", _final_text(response))
                messages.append({"role": "user", "content": results})
                trimmed = self._trim(messages)
                if trimmed:
                    forget_shown()
                    progress(f"turn {turns}: shortened {trimmed} earlier tool outputs")
                progress(_progress_line(turns, ", ".join(called) or "tool_use", usage))
                continue
            progress(_progress_line(turns, reason or "no stop_reason", usage))
            if reason == "pause_turn":
                # The API paused a long turn; sending the conversation back resumes it.
                continue
            if reason == "refusal":
                details = getattr(response, "stop_details", None)
                explanation = getattr(details, "explanation", None) or "no explanation given"
                return stop("refusal", f"the model declined to continue: {explanation}")
            return stop("finished" if toolbox.finished else "end_turn", _final_text(response))

    # -- one model call ------------------------------------------------------------------

    def _complete(
        self,
        system: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        max_tokens: int,
        usage: Usage,
        on_request: Callable[[Usage], None] | None = None,
        deadline_at: float | None = None,
    ) -> tuple[Any, int]:
        """One turn, asked at most twice.

        A reply cut off by max_tokens is never acted on (its last tool call may be
        incomplete): the turn is asked again with twice the room, up to the model's output
        limit (a model whose limit is not known fails the stage instead). A streamed reply
        the SDK cannot assemble, or that breaks off before its end,
        is asked again as it was. A second failure fails the stage.
        """
        for attempt in (1, 2):
            try:
                response = self._request(system, tools, messages, max_tokens, deadline_at)
            except _Unreadable as err:
                if attempt == 2:
                    raise StageFailed(
                        f"the model sent an unreadable reply twice in a row ({err}); rerun to retry"
                    ) from err
                continue
            one = self._usage_of(response)
            usage.add(one)
            if on_request is not None:
                on_request(one)
            if response.stop_reason not in TRUNCATED:
                return response, max_tokens
            if attempt == 2 and response.stop_reason == "model_context_window_exceeded":
                raise StageFailed(
                    "the conversation no longer fits the model's context window; lower "
                    "agent.max_turns or narrow scope.include, then rerun"
                )
            limit = self._output_limit()
            if attempt == 2 and limit is not None and max_tokens >= limit:
                raise StageFailed(
                    f"the model's reply was cut off twice in a row at max_tokens={max_tokens}, "
                    f"the model's output limit of {limit} ({response.stop_reason}); a larger "
                    "agent.max_tokens cannot help: narrow the task (scope.include) and rerun"
                )
            if limit is None and response.stop_reason == "max_tokens":
                # More room would be a guess, and one above the model's limit is a 400.
                raise StageFailed(
                    f"the model's reply was cut off at max_tokens={max_tokens} and the output "
                    f"limit of {self.model} is not known, so it was not raised: raise the spec "
                    f"key agent.max_tokens, or set models.{self.model}.max_output_tokens, and "
                    "rerun"
                )
            if attempt == 2:
                raise StageFailed(
                    f"the model's reply was cut off at max_tokens={max_tokens} twice in a row "
                    f"({response.stop_reason}); raise the spec key agent.max_tokens"
                    + (f" (at most {limit})" if limit else "")
                    + " and rerun"
                )
            # The API refuses a max_tokens above the model's limit: more room stops there.
            if limit is not None:
                max_tokens = max(max_tokens, min(max_tokens * 2, limit))
        raise AssertionError("unreachable")

    def _output_limit(self) -> int | None:
        """The model's largest max_tokens: the model table's, else the Models API's (asked
        once), else None (older APIs, local servers): then max_tokens is never raised."""
        if self.documented_limit is not None:
            return self.documented_limit
        if self._output_limit_cache is _UNASKED:
            self._output_limit_cache = None
            try:
                quick = self.client.with_options(
                    max_retries=0, timeout=min(30.0, self.request_timeout_s)
                )
                limit = getattr(quick.models.retrieve(self.model), "max_tokens", None)
                if isinstance(limit, int) and limit > 0:
                    self._output_limit_cache = limit
            except anthropic.AnthropicError:
                pass
        return self._output_limit_cache

    def _request(
        self,
        system: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        max_tokens: int,
        deadline_at: float | None = None,
    ) -> Any:
        client = self.client
        bounded = False
        if deadline_at is not None:
            left = deadline_at - time.monotonic()
            if left <= 0:
                raise _OutOfTime()
            if left < self.request_timeout_s:
                # The stage's time runs out first: one attempt, waiting no longer than it.
                client = self.client.with_options(timeout=left, max_retries=0)
                bounded = True
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": _with_moving_breakpoint(messages),
        }
        if tools:
            kwargs["tools"] = tools
        try:
            if max_tokens > STREAM_ABOVE_TOKENS:
                with client.messages.stream(**kwargs) as stream:
                    final = stream.get_final_message()
                if final.stop_reason is None:
                    # No message_delta came: the stream closed early, its last block may be cut.
                    raise _Unreadable("the stream ended before the message did")
                return final
            return client.messages.create(**kwargs)
        except anthropic.APIStatusError as err:
            if err.status_code == 200:
                # An `error` event after the stream began: the reply is incomplete, and the
                # SDK does not retry it. Asked again like an unreadable reply.
                kind = _error_field(err.body, "type") or "error"
                raise _Unreadable(f"the stream broke off with {kind}: {err}"[:300]) from err
            raise self._status_failure(err, 0 if bounded else self.max_retries) from err
        except anthropic.APITimeoutError as err:
            if bounded:
                raise _OutOfTime() from err
            raise StageFailed(
                f"the model API did not answer within {self.request_timeout_s:g}s, "
                f"{self.max_retries} retries included; raise agent.request_timeout_s or rerun "
                "later (a rerun resumes at this stage)"
            ) from err
        except anthropic.APIConnectionError as err:
            raise StageFailed(
                f"cannot reach the model API at {self.client.base_url} after {self.max_retries} "
                f"retries ({err}); check ANTHROPIC_BASE_URL and the network, then rerun"
            ) from err
        except ValueError as err:
            # The SDK could not assemble a streamed reply (e.g. tool input that is not JSON).
            raise _Unreadable(str(err)[:300]) from err
        except TypeError as err:
            # How the SDK says that no credential was found.
            if "authentication" not in str(err):
                raise
            raise StageFailed(f"no credentials for the model API; {_KEY_HINT}") from err
        except anthropic.AnthropicError as err:
            raise StageFailed(f"the model API client failed: {err}; {_KEY_HINT}") from err

    def _status_failure(self, err: anthropic.APIStatusError, retries: int) -> Exception:
        status = err.status_code
        request_id = err.request_id or err.response.headers.get("request-id") or "unknown"
        kind = getattr(err, "type", None) or _error_field(err.body, "type") or ""
        message = getattr(err, "api_message", None) or _error_field(err.body, "message") or str(err)
        where = f"HTTP {status}, request id {request_id}"
        text = f"{kind} {message}".lower()
        if status == 402 or kind == "billing_error" or any(w in text for w in _BILLING_WORDS):
            return SessionStop(f"the model API refused for billing reasons ({where}): {message}")
        if status == 404 or kind == "not_found_error":
            return StageFailed(
                f"model {self.model!r} was not found ({where}): check the spec key agent.model "
                f"(and ANTHROPIC_BASE_URL if you use a local server): {message}"
            )
        if status == 401:
            return StageFailed(f"the API key was rejected ({where}): check ANTHROPIC_API_KEY")
        if status == 400 and "prompt is too long" in text:
            return StageFailed(
                f"the conversation no longer fits the model's context window ({where}); lower "
                "agent.max_turns or narrow scope.include, then rerun"
            )
        retried = f" after {retries} retries" if status in (408, 409, 429) or status >= 500 else ""
        return StageFailed(
            f"model API error{retried} ({where}, {kind or 'no error type'}): {message}. "
            "Rerun the same command to resume at this stage"
        )

    def _usage_of(self, response: Any) -> Usage:
        u = response.usage
        # Never below zero: some proxies report input as prompt minus cache reads, which
        # goes negative when they count more reads than prompt.
        written = max(0, u.cache_creation_input_tokens or 0)
        split = getattr(u, "cache_creation", None)
        one_hour = max(0, getattr(split, "ephemeral_1h_input_tokens", 0) or 0)
        one = Usage(
            input_tokens=max(0, u.input_tokens or 0),
            output_tokens=max(0, u.output_tokens or 0),
            cache_creation_input_tokens=written,
            cache_read_input_tokens=max(0, u.cache_read_input_tokens or 0),
            cache_write_1h_tokens=min(one_hour, written),
            requests=1,
        )
        cost = ledger.price(self.model, one, self.prices)
        one.cost_usd, one.unpriced = (0.0, 1) if cost is None else (cost, 0)
        return one

    # -- the conversation's size ---------------------------------------------------------

    def _trim(self, messages: list[dict[str, Any]]) -> int:
        """Shorten old tool outputs once the conversation passes `agent.trim_above_tokens`;
        how many were shortened.

        Never the task (the first message), never the last `keep_turns` turns, never a
        short output (an outcome, an error). A cut makes the cache be written again from
        the first changed block on, so it is made only when it takes out at least a
        quarter of the size allowed, and then it takes out all it may.
        """
        if self.trim_above_chars is None:
            return 0
        if sum(len(json.dumps(m["content"])) for m in messages) <= self.trim_above_chars:
            return 0
        kept = 2 * self.keep_turns  # each turn: the model's reply and the tools' results
        old = [
            block
            for m in messages[1 : max(1, len(messages) - kept)]
            if m["role"] == "user"
            for block in m["content"]
            if block.get("type") == "tool_result"
            and isinstance(block.get("content"), str)
            and not block.get("is_error")
            and len(block["content"]) > KEEP_RESULT_CHARS
        ]
        if sum(len(block["content"]) for block in old) < self.trim_above_chars // 4:
            return 0
        calls = {
            block["id"]: block
            for m in messages
            if m["role"] == "assistant"
            for block in m["content"]
            if block.get("type") == "tool_use"
        }
        for block in old:
            call = calls.get(block["tool_use_id"], {})
            what = _describe_call(call.get("name", "tool"), call.get("input"), ToolResult(""))
            lines = block["content"].count("\n") + 1
            block["content"] = (
                f"[output of {what} shortened to save context ({lines} lines, seen before); "
                "call the tool again if you still need it]"
            )
        return len(old)

    # -- tools ---------------------------------------------------------------------------

    def _run_tools(self, response: Any, toolbox: Toolbox) -> tuple[list[dict[str, Any]], list[str]]:
        """Carry out every tool_use block, in order; each gets exactly one tool_result."""
        results: list[dict[str, Any]] = []
        called: list[str] = []
        for block in response.content:
            if getattr(block, "type", None) != "tool_use":
                continue
            args = block.input
            if isinstance(args, dict):
                result = toolbox.call(block.name, args)
            else:
                result = ToolResult(
                    f"input for {block.name} must be a JSON object matching its input_schema; "
                    f"got {type(args).__name__}",
                    is_error=True,
                )
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.id,
                    "content": result.content or "(no output)",
                    "is_error": result.is_error,
                }
            )
            called.append(_describe_call(block.name, args, result))
        return results, called


# -- message helpers ------------------------------------------------------------------------


def _assistant_content(response: Any) -> list[dict[str, Any]]:
    """The reply as request params, kept as plain dicts so history is stable and replayable."""
    content: list[dict[str, Any]] = []
    for block in response.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            if block.text:  # the API rejects empty text blocks in a request
                content.append({"type": "text", "text": block.text})
        elif kind == "tool_use":
            # Malformed input is echoed as {} — the API accepts only objects here; the
            # tool_result already told the model what was wrong.
            args = block.input if isinstance(block.input, dict) else {}
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": args})
        else:  # thinking, server tools, ...: pass back untouched
            content.append(block.to_dict(mode="json", exclude_none=True))
    if not content:
        # An empty assistant turn is rejected on the next request.
        content.append({"type": "text", "text": "(no content)"})
    return content


def _with_moving_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the history with a cache breakpoint on its last block.

    The stored history never carries the marker, so every earlier message is sent the
    same way on every turn and the next turn can read what this one wrote to the cache.
    """
    if not messages:
        return messages
    last = copy.deepcopy(messages[-1])
    if last["content"]:
        # Always the 5-minute cache: the next turn, seconds away, reads it or never will.
        last["content"][-1]["cache_control"] = EPHEMERAL
    return [*messages[:-1], last]


def _describe_call(name: str, args: Any, result: ToolResult) -> str:
    main = ""
    if isinstance(args, dict):
        for key in _MAIN_ARG:
            if isinstance(args.get(key), str):
                main = args[key] if len(args[key]) <= 60 else args[key][:57] + "..."
                break
    refused = " [error]" if result.is_error else ""
    return f"{name}({main}){refused}"


def _progress_line(turn: int, what: str, usage: Usage) -> str:
    return f"turn {turn}: {what} | tokens {usage.tokens} | ${usage.cost_usd:.4f}"


def _final_text(response: Any) -> str:
    texts = [b.text for b in response.content if getattr(b, "type", None) == "text"]
    return "\n".join(texts).strip()[:2000]


def _error_field(body: object, key: str) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        value = body["error"].get(key)
        return value if isinstance(value, str) else None
    return None


# -- before the first stage ------------------------------------------------------------


def _client(found: api_key.Credentials, retries: int, timeout_s: float) -> Any:
    """The SDK's client, given the key read once (`api_key`): the SDK would read it from
    `os.environ`, where it no longer is. ANTHROPIC_BASE_URL is still the SDK's to read."""
    # The SDK takes one credential; the key first, as it did reading both from the environment.
    given = {"api_key": found.api_key} if found.api_key else {"auth_token": found.auth_token}
    return anthropic.Anthropic(**given, max_retries=retries, timeout=timeout_s)


def unknown_model(model: str, *, client: Any | None = None) -> str | None:
    """Ask the Models API once whether it serves `model`: None when it does (or when the
    server has no Models API, as some local servers), else what the API said.

    A mistyped model would otherwise fail only in the first stage, after setup.
    """
    try:
        client = client or _client(api_key.read(), 2, 30)
        client.models.retrieve(model)
        return None
    except anthropic.NotFoundError:
        pass
    except anthropic.AuthenticationError as err:
        return f"the API refused the key ({err.status_code}); {_KEY_HINT}"
    except anthropic.AnthropicError:
        return None  # unreachable now: the first stage reports it with its retries
    try:  # 404 for the model, or no Models API at all? The list tells.
        known = [m.id for m in client.models.list(limit=1000)]
    except anthropic.AnthropicError:
        return None
    close = [m for m in known if m.split("-")[:2] == model.split("-")[:2]] or known
    return f"the API serves no model {model!r}; it knows {', '.join(sorted(close)[:8])}"

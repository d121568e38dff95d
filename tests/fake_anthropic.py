"""A fake Messages API on 127.0.0.1 for testing the `claude` backend through the real SDK.

Tests script it reply by reply (`push`): a message (sent as JSON, or as an SSE stream
when the request asks for one), an HTTP error with headers, or a delay. Every request body
is recorded so a test can check what each turn carried.

Usage is computed the way the API reports it, from the request itself: tokens are
estimated as characters / 4, and prompt caching is simulated — the blocks up to each
`cache_control` breakpoint form a prefix that is written to the cache; a later request
reads the longest such prefix found at, or up to 20 blocks before, one of its own
breakpoints; the rest up to its last breakpoint is a cache write, and what follows that
is plain input.

`GET /v1/models` and `GET /v1/models/{id}` answer from `models` (the ids the fake
knows); `models=None` answers 404 on both, as a server without the Models API does.

Strict by default: a request the real API would refuse (`fake_messages_rules.problems`) is
answered 400 `invalid_request_error` (an unknown model 404 `not_found_error`) without using
a scripted reply, and the fake fails the test when it closes. A test that sends such a
request on purpose says so with `refusals_expected=True`; `strict=False` turns the rules off.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fake_messages_rules as rules

_ids = itertools.count(1)
LOOKBACK = 20  # blocks the API searches back from a breakpoint for an earlier cache entry


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use(name: str, input: Any, id: str | None = None) -> dict[str, Any]:  # noqa: A002
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


def thinking_block(thinking: str) -> dict[str, Any]:
    """A thinking block signed the way the fake checks it when it comes back."""
    return {"type": "thinking", "thinking": thinking, "signature": rules.signature_for(thinking)}


@dataclass
class Reply:
    """One scripted answer. `content`/`stop_reason` make a message; `status` != 200 an error."""

    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    status: int = 200
    error_type: str = ""
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    stream: bool | None = None  # None: answer in the form the request asked for
    raw_json_input: str | None = None  # stream this text as the tool input (malformed JSON)
    usage: dict[str, int] | None = None  # override the computed usage
    stop_details: dict[str, Any] | None = None
    stream_error: dict[str, Any] | None = None  # send this SSE error event mid-stream...
    stream_error_after: int = 1  # ...after this many events (1: right after message_start)
    cut_after: int | None = None  # close the stream after this many events, no message_stop
    # Answer only once this holds (something the client started in the background got
    # somewhere), or after hold_timeout_s: a wait on the real condition, not a sleep.
    hold_until: Callable[[], bool] | None = None
    hold_timeout_s: float = 120.0


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn", **kw: Any) -> Reply:
    return Reply(content=content, stop_reason=stop_reason, **kw)


def tool_call(name: str, input: Any, **kw: Any) -> Reply:  # noqa: A002
    return Reply(content=[tool_use(name, input)], stop_reason="tool_use", **kw)


def error(status: int, error_type: str, msg: str = "scripted error", **kw: Any) -> Reply:
    headers = {"request-id": f"req_fake_{status}_{next(_ids)}", "retry-after-ms": "10"}
    headers.update(kw.pop("headers", {}))
    return Reply(status=status, error_type=error_type, error_message=msg, headers=headers, **kw)


def rate_limited(retry_after_s: float) -> Reply:
    """A 429 as the API sends it: `retry-after` in seconds, no millisecond hint."""
    return Reply(
        status=429,
        error_type="rate_limit_error",
        error_message="Number of request tokens has exceeded your per-minute rate limit",
        headers={"request-id": f"req_fake_429_{next(_ids)}", "retry-after": f"{retry_after_s:g}"},
    )


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]
    usage: dict[str, int]
    handled_s: float = 0.0
    received_at: float = 0.0  # time.monotonic() when the request arrived
    refused: str = ""  # the strict fake's error message, when it refused the request


def _canonical(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, ensure_ascii=False)


def _ttl(block: Any) -> str | None:
    """The lifetime a block's breakpoint asks for, or None for a block without one."""
    if not isinstance(block, dict) or "cache_control" not in block:
        return None
    return str((block["cache_control"] or {}).get("ttl") or "5m")


def _blocks(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The request as the cache sees it: tools, then system, then messages, in order,
    each with the ttl of its breakpoint (None: no breakpoint)."""
    out: list[tuple[str, str | None]] = []
    for tool in body.get("tools") or []:
        out.append((_canonical(tool), _ttl(tool)))
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        out.append((_canonical(block), _ttl(block)))
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for i, block in enumerate(content or []):
            out.append((msg["role"] + str(i) + _canonical(block), _ttl(block)))
    return out


def tokens(chars: int) -> int:
    return max(1, chars // 4) if chars else 0


KNOWN_MODELS = ["claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-4-5"]


def _model(model_id: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": "2026-01-01T00:00:00Z",
    }
    limit = rules.output_limit(model_id)
    if limit is not None:
        info["max_tokens"] = limit  # as the Models API reports each model's output limit
    return info


class FakeAnthropic:
    """Start with `with FakeAnthropic() as fake:`; point ANTHROPIC_BASE_URL at `fake.url`."""

    def __init__(
        self,
        models: list[str] | None = KNOWN_MODELS,
        *,
        strict: bool = True,
        refusals_expected: bool = False,
        responder: Callable[[dict[str, Any]], Reply | None] | None = None,
    ) -> None:
        self.models = models
        # Answers a request when the script is empty: an agent that reads what it was sent.
        self.responder = responder
        self.strict = strict
        self.refusals_expected = refusals_expected
        self.issued_thinking: dict[str, list[dict[str, Any]]] = {}  # tool_use id -> its thinking
        self.model_requests: list[str] = []
        self.queue: list[Reply] = []
        self.requests: list[Recorded] = []
        self.cache: set[str] = set()
        self.lock = threading.Lock()
        self.unscripted = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                fake._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                fake._models(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # a client that timed out is expected
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        if exc[0] is None and self.refused and not self.refusals_expected:
            raise AssertionError(
                "the fake Messages API refused requests the real one would refuse too:\n"
                + "\n".join(self.refused)
            )

    @property
    def refused(self) -> list[str]:
        return [r.refused for r in self.requests if r.refused]

    def push(self, *replies: Reply) -> FakeAnthropic:
        with self.lock:
            self.queue.extend(replies)
        return self

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    # -- serving ---------------------------------------------------------------------------

    def _models(self, handler: BaseHTTPRequestHandler) -> None:
        """The Models API: the list, or one model by id (the query string is ignored)."""
        path = handler.path.split("?", 1)[0].rstrip("/")
        with self.lock:
            self.model_requests.append(path)  # kept apart: tests count Messages requests
        status, data = (
            404,
            {
                "type": "error",
                "error": {"type": "not_found_error", "message": f"Not found: {path}"},
            },
        )
        if self.models is not None and path == "/v1/models":
            listed = [_model(m) for m in self.models]
            status, data = (
                200,
                {
                    "data": listed,
                    "has_more": False,
                    "first_id": self.models[0] if self.models else None,
                    "last_id": self.models[-1] if self.models else None,
                },
            )
        elif self.models is not None and path.startswith("/v1/models/"):
            wanted = path.rsplit("/", 1)[1]
            if wanted in self.models:
                status, data = 200, _model(wanted)
        payload = json.dumps(data).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = _blocks(body)
        total = sum(len(b) for b, _ in blocks)
        digest = hashlib.sha256()
        boundaries: list[tuple[str, int]] = []  # (hash of the prefix, its chars) after each block
        marks: list[int] = []  # indexes of blocks carrying a breakpoint
        chars = 0
        for index, (text, ttl) in enumerate(blocks):
            digest.update(text.encode())
            chars += len(text)
            boundaries.append((digest.copy().hexdigest(), chars))
            if ttl is not None:
                marks.append(index)
        # Like the API: at each breakpoint, look back up to LOOKBACK blocks for a prefix
        # an earlier request wrote, and use the longest one found.
        read_chars = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                key, size = boundaries[index]
                if key in self.cache:
                    read_chars = max(read_chars, size)
                    break
        last_chars = boundaries[marks[-1]][1] if marks else 0
        write_chars = max(0, last_chars - read_chars)
        # What is written up to a 1h breakpoint goes to the 1-hour cache, as the API
        # reports it in usage.cache_creation.
        one_hour = 0
        start = read_chars
        for mark in marks:
            end = boundaries[mark][1]
            if end > start:
                if blocks[mark][1] == "1h":
                    one_hour += end - start
                start = end
        self.cache.update(boundaries[mark][0] for mark in marks)
        written = tokens(write_chars)
        written_1h = min(written, tokens(one_hour))
        return {
            "input_tokens": tokens(total - read_chars - write_chars),
            "cache_read_input_tokens": tokens(read_chars),
            "cache_creation_input_tokens": written,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written - written_1h,
                "ephemeral_1h_input_tokens": written_1h,
            },
        }

    def _refusal(self, body: dict[str, Any], beta_header: str) -> Reply | None:
        """The API's answer to a request it would not serve, or None."""
        if not self.strict:
            return None
        missing = rules.unknown_model(body)
        if missing:
            return error(404, "not_found_error", missing, headers={"x-should-retry": "false"})
        betas = frozenset(b.strip() for b in beta_header.split(",") if b.strip())
        found = rules.problems(body, self.issued_thinking, betas)
        if found:
            return error(
                400, "invalid_request_error", "; ".join(found), headers={"x-should-retry": "false"}
            )
        return None

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        started = time.perf_counter()
        received = time.monotonic()
        length = int(handler.headers.get("content-length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        with self.lock:
            # Under the lock: it reads what replies issued.
            refusal = self._refusal(body, handler.headers.get("anthropic-beta") or "")
            # A refused request never reaches the model: the script is not used up.
            reply = refusal or (self.queue.pop(0) if self.queue else None)
            if reply is None and self.responder is not None:
                reply = self.responder(body)
            usage = self._usage(body) if reply is None or reply.status == 200 else {}
            record = Recorded(
                body=body,
                headers=dict(handler.headers.items()),
                usage=usage,
                received_at=received,
                refused=f"{refusal.status} {refusal.error_message}" if refusal else "",
            )
            self.requests.append(record)
            if reply is not None and reply.status == 200:
                thoughts = [b for b in reply.content if b.get("type") in rules.UNCACHEABLE]
                for block in reply.content:
                    if block.get("type") == "tool_use":
                        self.issued_thinking[block["id"]] = thoughts
        if reply is None:
            self.unscripted += 1
            reply = error(
                500,
                "api_error",
                "the fake server's script is empty",
                headers={"x-should-retry": "false"},
            )
        if reply.delay_s:
            time.sleep(reply.delay_s)
        if reply.hold_until is not None:
            deadline = time.monotonic() + reply.hold_timeout_s
            while not reply.hold_until() and time.monotonic() < deadline:
                time.sleep(0.05)
        try:
            if reply.status != 200:
                self._send_error(handler, reply)
            else:
                out_usage = {**usage, "output_tokens": tokens(len(json.dumps(reply.content)))}
                out_usage.update(reply.usage or {})
                msg = {
                    "id": f"msg_{next(_ids):05d}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", ""),
                    "content": reply.content,
                    "stop_reason": reply.stop_reason,
                    "stop_sequence": None,
                    "usage": out_usage,
                }
                if reply.stop_details:
                    msg["stop_details"] = reply.stop_details
                streamed = body.get("stream", False) if reply.stream is None else reply.stream
                if streamed:
                    self._send_stream(handler, msg, reply)
                else:
                    self._send_json(handler, 200, msg, reply.headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        record.handled_s = time.perf_counter() - started - reply.delay_s

    def _send_json(
        self, handler: BaseHTTPRequestHandler, status: int, obj: Any, headers: dict[str, str]
    ) -> None:
        data = json.dumps(obj).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("connection", "close")
        headers = {"request-id": f"req_fake_ok_{next(_ids)}", **headers}
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)
        handler.close_connection = True

    def _send_error(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        body = {
            "type": "error",
            "error": {"type": reply.error_type, "message": reply.error_message},
        }
        self._send_json(handler, reply.status, body, reply.headers)

    def _send_stream(
        self, handler: BaseHTTPRequestHandler, msg: dict[str, Any], reply: Reply
    ) -> None:
        usage = msg["usage"]
        start = {**msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start})
        ]
        for index, block in enumerate(msg["content"]):
            events += _block_events(index, block, reply)
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("connection", "close")
        handler.send_header("request-id", f"req_fake_stream_{next(_ids)}")
        handler.end_headers()
        if reply.stream_error:
            cut = reply.stream_error_after
            events = [*events[:cut], ("error", {"type": "error", "error": reply.stream_error})]
        if reply.cut_after is not None:
            events = events[: reply.cut_after]  # the connection just closes
        for name, data in events:
            handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()
        handler.close_connection = True


def _block_events(
    index: int, block: dict[str, Any], reply: Reply
) -> list[tuple[str, dict[str, Any]]]:
    """content_block_start and the deltas of one block, as the API streams them."""

    def start(content_block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": content_block},
        )

    def delta(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return (
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": body},
        )

    if block["type"] == "text":
        text = block["text"]
        pieces = [text[i : i + 7] for i in range(0, len(text), 7)] or [""]
        return [start({"type": "text", "text": ""})] + [
            delta({"type": "text_delta", "text": piece}) for piece in pieces
        ]
    if block["type"] == "thinking":
        text = block["thinking"]
        pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
        return [
            start({"type": "thinking", "thinking": "", "signature": ""}),
            *[delta({"type": "thinking_delta", "thinking": piece}) for piece in pieces],
            delta({"type": "signature_delta", "signature": block["signature"]}),
        ]
    if block["type"] != "tool_use":
        return [start(block)]
    head = {k: v for k, v in block.items() if k != "input"}
    raw = reply.raw_json_input if reply.raw_json_input is not None else json.dumps(block["input"])
    return [start({**head, "input": {}})] + [
        delta({"type": "input_json_delta", "partial_json": raw[i : i + 5]})
        for i in range(0, len(raw), 5)
    ]

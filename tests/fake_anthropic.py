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
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)
LOOKBACK = 20  # blocks the API searches back from a breakpoint for an earlier cache entry


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use(name: str, input: Any, id: str | None = None) -> dict[str, Any]:  # noqa: A002
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


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
    stream_error: dict[str, Any] | None = None  # send this SSE error event after message_start


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn", **kw: Any) -> Reply:
    return Reply(content=content, stop_reason=stop_reason, **kw)


def tool_call(name: str, input: Any, **kw: Any) -> Reply:  # noqa: A002
    return Reply(content=[tool_use(name, input)], stop_reason="tool_use", **kw)


def error(status: int, error_type: str, msg: str = "scripted error", **kw: Any) -> Reply:
    headers = {"request-id": f"req_fake_{status}_{next(_ids)}", "retry-after-ms": "10"}
    headers.update(kw.pop("headers", {}))
    return Reply(status=status, error_type=error_type, error_message=msg, headers=headers, **kw)


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]
    usage: dict[str, int]
    handled_s: float = 0.0


def _canonical(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, ensure_ascii=False)


def _blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request as the cache sees it: tools, then system, then messages, in order."""
    out: list[tuple[str, bool]] = []
    for tool in body.get("tools") or []:
        out.append((_canonical(tool), "cache_control" in tool))
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        out.append((_canonical(block), "cache_control" in block))
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for i, block in enumerate(content or []):
            marked = isinstance(block, dict) and "cache_control" in block
            out.append((msg["role"] + str(i) + _canonical(block), marked))
    return out


def tokens(chars: int) -> int:
    return max(1, chars // 4) if chars else 0


KNOWN_MODELS = ["claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-4-5"]


def _model(model_id: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": "2026-01-01T00:00:00Z",
    }


class FakeAnthropic:
    """Start with `with FakeAnthropic() as fake:`; point ANTHROPIC_BASE_URL at `fake.url`."""

    def __init__(self, models: list[str] | None = KNOWN_MODELS) -> None:
        self.models = models
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
        for index, (text, marked) in enumerate(blocks):
            digest.update(text.encode())
            chars += len(text)
            boundaries.append((digest.copy().hexdigest(), chars))
            if marked:
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
        self.cache.update(boundaries[mark][0] for mark in marks)
        return {
            "input_tokens": tokens(total - read_chars - write_chars),
            "cache_read_input_tokens": tokens(read_chars),
            "cache_creation_input_tokens": tokens(write_chars),
        }

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        started = time.perf_counter()
        length = int(handler.headers.get("content-length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        with self.lock:
            reply = self.queue.pop(0) if self.queue else None
            usage = self._usage(body) if reply is None or reply.status == 200 else {}
            record = Recorded(body=body, headers=dict(handler.headers.items()), usage=usage)
            self.requests.append(record)
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
            if block["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                text = block["text"]
                for piece in [text[i : i + 7] for i in range(0, len(text), 7)] or [""]:
                    events.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "text_delta", "text": piece},
                            },
                        )
                    )
            else:
                head = {k: v for k, v in block.items() if k != "input"}
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {**head, "input": {}},
                        },
                    )
                )
                raw = (
                    reply.raw_json_input
                    if reply.raw_json_input is not None
                    else json.dumps(block["input"])
                )
                for piece in [raw[i : i + 5] for i in range(0, len(raw), 5)]:
                    events.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": piece},
                            },
                        )
                    )
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
            events = [events[0], ("error", {"type": "error", "error": reply.stream_error})]
        for name, data in events:
            handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()
        handler.close_connection = True

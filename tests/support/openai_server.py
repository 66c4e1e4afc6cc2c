"""A scripted OpenAI-compatible HTTP server on a real socket, for tests and benchmarks.

It speaks the parts of the OpenAI HTTP API that ragsvc uses, over HTTP/1.1 with keep-alive, on asyncio
streams only:

- ``GET /v1/models``: ``{"object": "list", "data": [{"id": ..., "object": "model", ...}]}``
- ``GET /health``: ``{"status": "ok"}``
- ``POST /v1/chat/completions`` with ``stream: true``: a chunked ``text/event-stream`` of
  ``chat.completion.chunk`` events (a role chunk, one chunk per scripted delta, a chunk with
  ``finish_reason: "stop"``, a usage chunk with ``choices: []`` when ``stream_options.include_usage`` is
  true), then ``data: [DONE]``. With ``stream: false``, one ``chat.completion``. A model the server does
  not list gets the 404 ``model_not_found`` error OpenAI answers.

Reported usage: ``prompt_tokens`` is the number of whitespace-separated words in the request's messages,
``completion_tokens`` the number of deltas sent.

A test scripts the answers through the constructor's keyword arguments, which are also public attributes it
may change between requests, and reads back what the server saw: ``requests``, ``streams`` and
``connections``. Every time is a ``time.monotonic()`` reading, so it compares with the test's own::

    async with ScriptedOpenAIServer(deltas=["Hello", " world"], token_delay_s=0.05) as server:
        ...  # point a client at server.base_url ("http://127.0.0.1:PORT/v1")
        stream = server.streams[0]
        await asyncio.wait_for(stream.request.connection.closed.wait(), 1.0)
        assert stream.request.connection.closed_by == "client"

Request bodies must carry a Content-Length (httpx always sends one for JSON); HTTP pipelining is not served.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import json
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

Deltas = Sequence[str] | Callable[[dict[str, Any]], Sequence[str]]
"""The content deltas of an answer, or a function of the parsed request body returning them."""

_READ_SIZE = 65536


class Fault(enum.Enum):
    """How a completion goes wrong after ``fault_after`` deltas."""

    STALL = "stall"  # send nothing more and keep the connection open, until the client leaves
    DISCONNECT = "disconnect"  # drop the connection mid-body
    GARBAGE = "garbage"  # send a line that is not JSON (a non-streamed body that is not JSON), then finish


@dataclass(eq=False)
class ConnectionRecord:
    """One TCP connection: when it opened, and when and by which side it was closed."""

    opened_at: float
    closed_at: float | None = None
    closed_by: Literal["client", "server"] | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)


@dataclass(eq=False)
class RecordedRequest:
    """One HTTP request as received. Header names are lower-cased; ``body`` is the parsed JSON, or None."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float
    connection: ConnectionRecord


@dataclass(eq=False)
class StreamRecord:
    """One streamed chat completion: ``head_sent_at`` is the first byte of the response, ``first_token_at``
    the first content delta; ``completed`` is true once ``data: [DONE]`` went out."""

    request: RecordedRequest
    head_sent_at: float
    first_token_at: float | None = None
    tokens_sent: int = 0
    completed: bool = False


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _Wire:
    """The reading side of a connection, buffered here so that watching for the client hanging up (a read
    that returns EOF) never loses bytes of its next request."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buffer = bytearray()

    async def fill(self) -> bool:
        """Buffers what the client sent next; False when it closed its side."""
        data = await self._reader.read(_READ_SIZE)
        self._buffer += data
        return bool(data)

    async def read_request(self) -> _Request | None:
        """The next request, or None when the client closed the connection first."""
        while (head_end := self._buffer.find(b"\r\n\r\n")) < 0:
            if not await self.fill():
                return None
        request_line, *header_lines = self._buffer[:head_end].decode("latin-1").split("\r\n")
        del self._buffer[: head_end + 4]
        method, target, _version = request_line.split(" ", 2)
        headers = {
            name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)
        }
        length = int(headers.get("content-length", "0"))
        while len(self._buffer) < length:
            if not await self.fill():
                return None
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return _Request(method, target.split("?", 1)[0], headers, body)


class ScriptedOpenAIServer:
    """An OpenAI-compatible server answering from a script; an async context manager serving on 127.0.0.1.

    - ``deltas``: the content deltas every completion streams (or a function of the request body).
    - ``models``: the model ids served; a completion for any other model gets a 404 ``model_not_found``.
    - ``first_token_delay_s``: the wait before the first delta; ``token_delay_s`` the wait between deltas.
    - ``status``: when set, every request is answered with this status and an OpenAI-style error body, with
      a ``Retry-After: <retry_after>`` header when ``retry_after`` is set (seconds or an HTTP date).
    - ``fault``: when set, the completion goes wrong (see `Fault`) after ``fault_after`` deltas.
    """

    def __init__(
        self,
        *,
        deltas: Deltas = ("Hello", ",", " world", "."),
        models: Sequence[str] = ("llama3.2",),
        first_token_delay_s: float = 0.0,
        token_delay_s: float = 0.0,
        status: int | None = None,
        retry_after: str | None = None,
        fault: Fault | None = None,
        fault_after: int = 0,
    ) -> None:
        self.deltas = deltas
        self.models = list(models)
        self.first_token_delay_s = first_token_delay_s
        self.token_delay_s = token_delay_s
        self.status = status
        self.retry_after = retry_after
        self.fault = fault
        self.fault_after = fault_after
        self.requests: list[RecordedRequest] = []
        self.streams: list[StreamRecord] = []
        self.connections: list[ConnectionRecord] = []
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not running")
        return self._server.sockets[0].getsockname()[1]

    @property
    def base_url(self) -> str:
        """The OpenAI API root, as clients take it: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> ScriptedOpenAIServer:
        self._server = await asyncio.start_server(self._serve_connection, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Stops listening and drops every open connection (recorded as closed by the server)."""
        assert self._server is not None
        self._server.close()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """asyncio's callback for a new connection. Shutdown cancels it, which ends it quietly (asyncio would
        log a cancelled callback task as an unhandled error)."""
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await self._converse(reader, writer)
        finally:
            self._handlers.discard(handler)

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = ConnectionRecord(opened_at=time.monotonic())
        self.connections.append(connection)
        wire = _Wire(reader)
        closed_by: Literal["client", "server"] = "server"
        try:
            while self._server is not None and self._server.is_serving():
                request = await wire.read_request()
                if request is None:
                    closed_by = "client"
                    break
                recorded = RecordedRequest(
                    method=request.method,
                    path=request.path,
                    headers=request.headers,
                    body=_parse_json(request.body),
                    received_at=time.monotonic(),
                    connection=connection,
                )
                self.requests.append(recorded)
                answered = await _unless_client_leaves(wire, self._respond(recorded, writer))
                if answered is None:
                    closed_by = "client"
                    break
                if not answered or request.headers.get("connection", "").lower() == "close":
                    break
        finally:
            connection.closed_at = time.monotonic()
            connection.closed_by = closed_by
            connection.closed.set()
            writer.close()

    async def _respond(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        """Answers one request; False when the connection must close after it."""
        if self.status is not None:
            headers = {} if self.retry_after is None else {"Retry-After": self.retry_after}
            kind = "server_error" if self.status >= 500 else "invalid_request_error"
            code = "rate_limit_exceeded" if self.status == 429 else None
            body = _error_body(HTTPStatus(self.status).phrase, kind, code)
            await _send_json(writer, self.status, body, headers)
            return True
        route = (request.method, request.path)
        if route == ("GET", "/health"):
            await _send_json(writer, 200, {"status": "ok"})
        elif route == ("GET", "/v1/models"):
            data = [{"id": model, "object": "model", "created": 0, "owned_by": "scripted"} for model in self.models]
            await _send_json(writer, 200, {"object": "list", "data": data})
        elif route == ("POST", "/v1/chat/completions"):
            return await self._complete(request, writer)
        else:
            await _send_json(writer, 404, _error_body(f"no route {request.method} {request.path}", "not_found", None))
        return True

    async def _complete(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            message = "the body must be a JSON object with messages"
            await _send_json(writer, 400, _error_body(message, "invalid_request_error", None))
            return True
        model = body.get("model")
        if model not in self.models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            await _send_json(writer, 404, _error_body(message, "invalid_request_error", "model_not_found"))
            return True
        deltas = list(self.deltas(body) if callable(self.deltas) else self.deltas)
        prompt_tokens = sum(len(str(message.get("content", "")).split()) for message in body["messages"])
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, writer, model, deltas, prompt_tokens, include_usage)
        return await self._answer_whole(writer, model, deltas, prompt_tokens)

    async def _stream(
        self,
        request: RecordedRequest,
        writer: asyncio.StreamWriter,
        model: str,
        deltas: list[str],
        prompt_tokens: int,
        include_usage: bool,
    ) -> bool:
        writer.write(_head(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}, chunked=True))
        record = StreamRecord(request=request, head_sent_at=time.monotonic())
        self.streams.append(record)
        base: dict[str, Any] = {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion.chunk"}
        base |= {"created": int(time.time()), "model": model}
        if include_usage:
            base["usage"] = None  # as OpenAI sends it on every chunk but the usage chunk

        async def send(event: str) -> None:
            data = f"data: {event}\n\n".encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        def chunk(delta: dict[str, str], finish_reason: str | None = None) -> str:
            return json.dumps(base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

        await send(chunk({"role": "assistant", "content": ""}))
        await asyncio.sleep(self.first_token_delay_s)
        for index, text in enumerate(deltas):
            if self.fault is not None and index == self.fault_after:
                if self.fault is Fault.STALL:
                    await _forever()
                if self.fault is Fault.DISCONNECT:
                    return False
                await send("{not json")
            if index:
                await asyncio.sleep(self.token_delay_s)
            await send(chunk({"content": text}))
            if record.first_token_at is None:
                record.first_token_at = time.monotonic()
            record.tokens_sent += 1
        await send(chunk({}, "stop"))
        if include_usage:
            usage = _usage(prompt_tokens, len(deltas))
            await send(json.dumps(base | {"choices": [], "usage": usage}))
        await send("[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        record.completed = True
        return True

    async def _answer_whole(
        self, writer: asyncio.StreamWriter, model: str, deltas: list[str], prompt_tokens: int
    ) -> bool:
        await asyncio.sleep(self.first_token_delay_s + self.token_delay_s * max(len(deltas) - 1, 0))
        if self.fault is Fault.STALL:
            await _forever()
        if self.fault is Fault.DISCONNECT:
            return False
        if self.fault is Fault.GARBAGE:
            writer.write(_head(200, {"Content-Type": "application/json", "Content-Length": "9"}) + b"{not json")
            await writer.drain()
            return True
        choice = {"index": 0, "message": {"role": "assistant", "content": "".join(deltas)}, "finish_reason": "stop"}
        completion = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": _usage(prompt_tokens, len(deltas)),
        }
        await _send_json(writer, 200, completion)
        return True


async def _unless_client_leaves(wire: _Wire, response: Coroutine[Any, Any, bool]) -> bool | None:
    """Runs `response` while watching the connection; None when the client hung up first (or the write
    failed because it had), else what `response` returned."""
    sending = asyncio.ensure_future(response)
    watching = asyncio.ensure_future(wire.fill())
    try:
        while not sending.done():
            await asyncio.wait({sending, watching}, return_when=asyncio.FIRST_COMPLETED)
            if watching.done() and not sending.done():
                if not watching.result():
                    return None
                watching = asyncio.ensure_future(wire.fill())
        return sending.result()
    except ConnectionError:
        return None
    finally:
        sending.cancel()
        watching.cancel()
        await asyncio.gather(sending, watching, return_exceptions=True)


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()


def _parse_json(body: bytes) -> Any:
    """The request body as JSON; None when empty or not JSON (the route answers 400)."""
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    total = prompt_tokens + completion_tokens
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": total}


def _error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _head(status: int, headers: dict[str, str], *, chunked: bool = False) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Connection: keep-alive"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send_json(
    writer: asyncio.StreamWriter, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
    writer.write(_head(status, headers) + body)
    await writer.drain()

"""What the scripted LLM servers (OpenAI-compatible, Ollama) share: HTTP/1.1 with keep-alive on a real
loopback socket, asyncio streams only, recording every request, streamed answer and connection.

A subclass answers one request in `_respond` and streams scripted deltas with `_stream_deltas`, which applies
the delays and faults every scripted server offers. Every time recorded is a ``time.monotonic()`` reading, so a
test compares it with its own. Request bodies must carry a Content-Length (httpx always sends one for JSON);
HTTP pipelining is not served.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import enum
import hashlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal

Deltas = Sequence[str] | Callable[[dict[str, Any]], Sequence[str]]
"""The content deltas of an answer, or a function of the parsed request body returning them."""
Delay = float | Callable[[dict[str, Any]], float]
"""A wait in seconds, or a function of the parsed request body returning it."""

_READ_SIZE = 65536


class Fault(enum.Enum):
    """How an answer goes wrong after ``fault_after`` deltas."""

    STALL = "stall"  # send nothing more and keep the connection open, until the client leaves
    DISCONNECT = "disconnect"  # drop the connection mid-body
    GARBAGE = "garbage"  # send a line that is not JSON (a non-streamed body that is not JSON), then finish
    ERROR = "error"  # send the API's own error event (a model runner failing mid-answer), then end the body
    TRUNCATE = "truncate"  # end the body cleanly, without the events that finish an answer


class Outcome(enum.Enum):
    """How `ScriptedHTTPServer._stream_deltas` ended."""

    FINISHED = "finished"  # every delta sent: send what finishes the answer, then end the body
    CUT = "cut"  # a fault: end the body now
    DROPPED = "dropped"  # a fault dropped the connection


@dataclass(eq=False)
class ConnectionRecord:
    """One TCP connection: when it opened, and when and by which side it was closed."""

    opened_at: float
    idle_since: float | None = None  # when its last response ended (None: none yet)
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
    """One streamed answer: ``head_sent_at`` is the first byte of the response, ``first_token_at`` and
    ``last_token_at`` when the first and the last content delta went out; ``completed`` is true once the
    whole answer was sent."""

    request: RecordedRequest
    head_sent_at: float
    first_token_at: float | None = None
    last_token_at: float | None = None
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
        """Buffers what the client sent next; False when it closed its side (or reset the connection)."""
        try:
            data = await self._reader.read(_READ_SIZE)
        except ConnectionResetError:
            return False
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


class ScriptedHTTPServer(abc.ABC):
    """An async context manager serving on 127.0.0.1:<free port>. Scripted answers are public attributes a
    test may change between requests:

    - ``deltas``: the content deltas every answer streams (or a function of the request body).
    - ``first_token_delay_s``: the wait before the first delta (or a function of the request body);
      ``token_delay_s`` the wait between deltas.
    - ``status``: when set, every request is answered with this status and the API's error body.
    - ``fail_next``: the next this many answer requests (`answer_paths`) are answered ``fail_status`` (503) with
      ``Retry-After: fail_retry_after`` when that is set: a server briefly unable to serve.
    - ``idle_close_s``: a request that arrives on a connection idle this long is dropped with the connection,
      unanswered, as when the server closes an idle keep-alive connection just as the client reuses it.
    - ``close_after_answer``: the connection is closed after each answer, though its response announced
      keep-alive (llama.cpp's server does this after every streamed completion).
    - ``model_status``: a status for the answers (completions, chats) of one model only, e.g. ``{"a": 503}``.
    - ``fault``: when set, the answer goes wrong (see `Fault`) after ``fault_after`` deltas.

    What the server saw: ``requests``, ``streams`` and ``connections``.
    """

    # The port `__aenter__` listens on: 0 takes a free one; a test restarting a server on the same port sets it.
    listen_port = 0
    # The paths of the requests that generate an answer (chats, completions).
    answer_paths: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        deltas: Deltas,
        first_token_delay_s: Delay = 0.0,
        token_delay_s: float = 0.0,
        status: int | None = None,
        model_status: dict[str, int] | None = None,
        fault: Fault | None = None,
        fault_after: int = 0,
        fail_next: int = 0,
        fail_status: int = 503,
        fail_retry_after: str | None = None,
        idle_close_s: float | None = None,
        close_after_answer: bool = False,
    ) -> None:
        self.deltas = deltas
        self.first_token_delay_s = first_token_delay_s
        self.fail_next = fail_next
        self.fail_status = fail_status
        self.fail_retry_after = fail_retry_after
        self.idle_close_s = idle_close_s
        self.close_after_answer = close_after_answer
        self.token_delay_s = token_delay_s
        self.status = status
        self.model_status = dict(model_status or {})
        self.fault = fault
        self.fault_after = fault_after
        self.requests: list[RecordedRequest] = []
        self.streams: list[StreamRecord] = []
        self.connections: list[ConnectionRecord] = []
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not running")
        return self._server.sockets[0].getsockname()[1]

    async def __aenter__(self) -> Any:
        self._server = await asyncio.start_server(self._serve_connection, "127.0.0.1", self.listen_port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Stops listening and drops every open connection (recorded as closed by the server)."""
        assert self._server is not None
        self._server.close()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    def scripted_deltas(self, body: dict[str, Any]) -> list[str]:
        return list(self.deltas(body) if callable(self.deltas) else self.deltas)

    @abc.abstractmethod
    async def _respond(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        """Answers one request; False when the connection must close after it."""

    async def _stream_deltas(
        self,
        record: StreamRecord,
        deltas: Sequence[str],
        send_delta: Callable[[str], Awaitable[None]],
        send_event: Callable[[str], Awaitable[None]],
        error_event: str,
    ) -> Outcome:
        """Sends each delta with `send_delta`, keeping the scripted delays and fault and recording the times.
        `send_event` sends one raw event in the API's framing; `error_event` is the API's error event."""
        self.streams.append(record)
        delay = self.first_token_delay_s
        await asyncio.sleep(delay(record.request.body) if callable(delay) else delay)
        for index, text in enumerate(deltas):
            if self.fault is not None and index == self.fault_after:
                if self.fault is Fault.STALL:
                    await _forever()
                if self.fault is Fault.DISCONNECT:
                    return Outcome.DROPPED
                if self.fault is Fault.TRUNCATE:
                    return Outcome.CUT
                if self.fault is Fault.ERROR:
                    await send_event(error_event)
                    return Outcome.CUT
                await send_event("{not json")
            if index:
                await asyncio.sleep(self.token_delay_s)
            await send_delta(text)
            record.last_token_at = time.monotonic()
            if record.first_token_at is None:
                record.first_token_at = record.last_token_at
            record.tokens_sent += 1
        return Outcome.FINISHED

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
                idle = connection.idle_since
                if self.idle_close_s is not None and idle is not None and recorded.received_at - idle >= self.idle_close_s:
                    break  # closed at its idle timeout as the request arrived: unanswered
                if self.fail_next > 0 and request.path in self.answer_paths:
                    self.fail_next -= 1
                    headers = {} if self.fail_retry_after is None else {"Retry-After": self.fail_retry_after}
                    error = {"error": HTTPStatus(self.fail_status).phrase}
                    await _send_json(writer, self.fail_status, error, headers)
                    connection.idle_since = time.monotonic()
                    continue
                answered = await _unless_client_leaves(wire, self._respond(recorded, writer))
                connection.idle_since = time.monotonic()
                if answered is None:
                    closed_by = "client"
                    break
                if not answered or request.headers.get("connection", "").lower() == "close":
                    break
                if self.close_after_answer and request.path in self.answer_paths:
                    break
        finally:
            connection.closed_at = time.monotonic()
            connection.closed_by = closed_by
            connection.closed.set()
            writer.close()


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


_WORD = re.compile(r"[a-z0-9]+")


def hashed_embedding(text: str, dimension: int = 64) -> list[float]:
    """A deterministic bag-of-words embedding, L2-normalised: each lower-cased word adds 1 at a position given by
    its hash, so texts sharing words have a high cosine similarity and unrelated ones a low one."""
    vector = [0.0] * dimension
    for word in _WORD.findall(text.lower()):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dimension] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()


def _parse_json(body: bytes) -> Any:
    """The request body as JSON; None when empty or not JSON (the route answers 400)."""
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


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


async def _send_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    """One chunk of a chunked body."""
    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
    await writer.drain()


async def _end_chunks(writer: asyncio.StreamWriter) -> None:
    writer.write(b"0\r\n\r\n")
    await writer.drain()

"""A keep-alive HTTP/1.1 transport for httpx, on an asyncio protocol: what the LLM clients' streams go through.

httpx's default transport (httpcore over h11 and anyio) hands a streamed body over an HTTP chunk at a time, with
h11's state machine and anyio's cancel scopes around each: an LLM sending an event per chunk costs one trip per
event, even when the events arrived in one network read. This transport decodes every complete chunk of a read
at once, so a response body comes a network read at a time: a burst is one block, and a block is cheap.

What it does: HTTP/1.1 over TCP or TLS (httpx's default certificate store), one request at a time per connection,
the connections whose response was read to its end kept per origin for the next request (at most `max_idle`,
httpx's default keep-alive limit); a response closed before its end closes its connection (hangs up on the
server).

Keep-alive without dropped requests. A server closes a connection that stayed idle for its keep-alive timeout
(llama.cpp's, like any cpp-httplib server's, is 5 s, announced as `Keep-Alive: timeout=5`); a request sent on it as
it closes is lost ("Server disconnected without sending a response"). So a connection is not reused once it has
been idle for longer than the timeout its server announced, less KEEP_ALIVE_MARGIN_S; and a request that fails on
a reused connection before any byte of a response arrived is sent once more, on a new connection (what browsers
do for the same race). Nothing else is ever sent twice: a failure on a new connection, or after a response began,
is the caller's. Bodies framed by chunked transfer coding, Content-Length, or the connection's end; 1xx responses
skipped. The request's `timeout` extension bounds connecting (`connect`) and each wait for the server (`read`):
requests are written without waiting (the kernel and asyncio buffer them) and connections are not limited in
number, so `write` and `pool` do not apply. Failures are httpx's exceptions (ConnectError, ConnectTimeout,
ReadTimeout, ReadError, RemoteProtocolError). Not supported: proxies (`generation.http.transport_for` uses
httpx's own transport when one is configured), HTTP/2, pipelining.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator, Callable

import httpx

MAX_HEAD_BYTES = 65536
# A kept connection is dropped this long before its server's announced keep-alive timeout would close it.
KEEP_ALIVE_MARGIN_S = 1.0
_KEEP_ALIVE_TIMEOUT = re.compile(rb"(?:^|,)\s*timeout\s*=\s*(\d+)", re.IGNORECASE)
# Reading pauses while this much of a body is waiting to be consumed.
MAX_BUFFERED_BYTES = 262144
_DEFAULT_PORTS = {b"http": 80, b"https": 443}

Origin = tuple[bytes, str, int]
# What the transport does with a connection once its response is over: keep it (if reusable) or close it.
Release = Callable[["Connection", bool], None]


class StreamTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, max_idle: int = 20, ssl_context: ssl.SSLContext | None = None) -> None:
        self._max_idle = max_idle
        self._ssl_context = ssl_context
        self._idle: dict[Origin, list[Connection]] = {}
        self._open: set[Connection] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.raw_scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}", request=request)
        origin = (url.raw_scheme, url.host, url.port or _DEFAULT_PORTS[url.raw_scheme])
        timeouts = request.extensions.get("timeout", {})
        message = _head(request) + _framed(request, await request.aread())
        connection = self._reused(origin)
        if connection is not None:
            try:
                return await self._exchange(connection, request, message, timeouts.get("read"))
            except (httpx.RemoteProtocolError, httpx.ReadError):
                if connection.received:  # a response had begun: not the stale keep-alive race
                    raise
        connection = await self._connect(origin, timeouts.get("connect"), request)
        return await self._exchange(connection, request, message, timeouts.get("read"))

    async def _exchange(
        self, connection: Connection, request: httpx.Request, message: bytes, read_timeout_s: float | None
    ) -> httpx.Response:
        self._open.add(connection)
        try:
            return await connection.exchange(request, message, read_timeout_s, self._release)
        except BaseException:
            self._discard(connection)
            raise

    async def aclose(self) -> None:
        for connection in list(self._open):
            self._discard(connection)
        self._idle.clear()

    def _reused(self, origin: Origin) -> Connection | None:
        """An idle connection to `origin` that the server has not closed meanwhile and will not close as it is
        used (see the module docstring)."""
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.usable() and not connection.expiring():
                return connection
            self._discard(connection)
        return None

    async def _connect(self, origin: Origin, timeout_s: float | None, request: httpx.Request) -> Connection:
        scheme, host, port = origin
        secure = scheme == b"https"
        if secure and self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, connection = await loop.create_connection(
                    lambda: Connection(origin), host, port, ssl=self._ssl_context if secure else None
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=request) from exc
        return connection

    def _release(self, connection: Connection, reusable: bool) -> None:
        """A response's end: its connection is kept for the next request, or closed."""
        idle = self._idle.setdefault(connection.origin, [])
        if reusable and connection.usable() and len(idle) < self._max_idle:
            connection.idle_since = asyncio.get_running_loop().time()
            idle.append(connection)
        else:
            self._discard(connection)

    def _discard(self, connection: Connection) -> None:
        connection.close()
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)


def _head(request: httpx.Request) -> bytes:
    """The request line and headers (httpx has set Host, Content-Length and the client's defaults)."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    lines += [b"%s: %s" % pair for pair in request.headers.raw]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _framed(request: httpx.Request, body: bytes) -> bytes:
    """The body as sent: in one chunk when httpx announced a chunked body (a stream of unknown length)."""
    if not _has_token(request.headers.raw, b"transfer-encoding", b"chunked"):
        return body
    return (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"


class Connection(asyncio.Protocol):
    """One connection: what the server sent and has not been consumed yet, and who waits for more."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._ended = False  # the server closed its side, or the connection was lost
        self._lost: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.received = False  # a byte of the current exchange's response arrived
        self.idle_since = 0.0  # event loop time at which it went back to the pool
        self.keep_alive_s: float | None = None  # the server's announced keep-alive timeout, once it announced one

    # asyncio's callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self.received = True
        self._buffer += data
        if len(self._buffer) >= MAX_BUFFERED_BYTES and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True
        self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._lost = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # used by the transport

    def usable(self) -> bool:
        """Open, and nothing unread from the server (an idle connection it closed has ended)."""
        return not self._ended and not self._buffer and self._transport is not None and not self._transport.is_closing()

    def expiring(self) -> bool:
        """Idle for so long that its server may be closing it now (see KEEP_ALIVE_MARGIN_S)."""
        if self.keep_alive_s is None:
            return False
        idle_s = asyncio.get_running_loop().time() - self.idle_since
        return idle_s >= self.keep_alive_s - KEEP_ALIVE_MARGIN_S

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._ended = True

    async def exchange(
        self, request: httpx.Request, message: bytes, read_timeout_s: float | None, release: Release
    ) -> httpx.Response:
        """Sends `message` and reads the response head; the body streams from the response."""
        assert self._transport is not None
        self.received = False
        self._transport.write(message)  # a failure to send shows as the connection lost, below
        while True:
            status, reason, version, headers = await self._response_head(request, read_timeout_s)
            if not 100 <= status < 200:
                break
        self.keep_alive_s = _keep_alive_timeout(headers)
        body = Body(self, request, read_timeout_s, release, _framing(request, status, headers))
        keep_alive = version == b"HTTP/1.1" and not _has_token(headers, b"connection", b"close")
        body.reusable = keep_alive and not _has_token(request.headers.raw, b"connection", b"close")
        return httpx.Response(
            status, headers=headers, stream=body, request=request,
            extensions={"http_version": version, "reason_phrase": reason},
        )

    async def _response_head(
        self, request: httpx.Request, timeout_s: float | None
    ) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("the response head is too large", request=request)
            await self.more(request, timeout_s, "Server disconnected without sending a response.")
        head = bytes(self._buffer[:end])
        del self._buffer[: end + 4]
        status_line, *lines = head.split(b"\r\n")
        try:
            version, code, *reason = status_line.split(b" ", 2)
            status = int(code)
            headers = []
            for line in lines:
                name, value = line.split(b":", 1)
                if not name or name != name.strip() or line[0] in b" \t":
                    raise ValueError(line)
                headers.append((name, value.strip()))
        except ValueError as exc:
            raise httpx.RemoteProtocolError(f"a malformed response head: {head[:200]!r}", request=request) from exc
        if not version.startswith(b"HTTP/1.") or not 100 <= status <= 999:
            raise httpx.RemoteProtocolError(f"not an HTTP/1.x response: {status_line[:80]!r}", request=request)
        return status, reason[0] if reason else b"", version, headers

    async def more(self, request: httpx.Request, timeout_s: float | None, ended: str) -> None:
        """Waits until the server sends more; raises `ended` (RemoteProtocolError) if it ended instead."""
        if self._ended:
            if self._lost is not None:
                raise httpx.ReadError(f"the connection failed: {self._lost!r}", request=request) from self._lost
            raise httpx.RemoteProtocolError(ended, request=request)
        if self._paused and self._transport is not None:
            self._transport.resume_reading()
            self._paused = False
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except TimeoutError as exc:
            raise httpx.ReadTimeout("the server sent nothing in time", request=request) from exc
        finally:
            self._waiter = None
        if not self._buffer:
            await self.more(request, timeout_s, ended)

    def take(self, limit: int | None = None) -> bytes:
        """What the server sent and nobody consumed yet (at most `limit` bytes)."""
        if limit is None or limit >= len(self._buffer):
            data = bytes(self._buffer)
            self._buffer.clear()
        else:
            data = bytes(self._buffer[:limit])
            del self._buffer[:limit]
        return data

    def peek(self) -> bytearray:
        return self._buffer




class Framing:
    """How a body ends: `length` bytes (None: at the connection's end), or chunked."""

    def __init__(self, length: int | None, chunked: bool) -> None:
        self.length = length
        self.chunked = chunked


def _framing(request: httpx.Request, status: int, headers: list[tuple[bytes, bytes]]) -> Framing:
    if request.method == "HEAD" or status in (204, 304):
        return Framing(0, chunked=False)
    if _has_token(headers, b"transfer-encoding", b"chunked"):
        return Framing(None, chunked=True)
    lengths = {value for name, value in headers if name.lower() == b"content-length"}
    if len(lengths) > 1:
        raise httpx.RemoteProtocolError("conflicting Content-Length headers", request=request)
    if lengths:
        try:
            length = int(lengths.pop())
        except ValueError as exc:
            raise httpx.RemoteProtocolError("a malformed Content-Length", request=request) from exc
        if length < 0:
            raise httpx.RemoteProtocolError("a negative Content-Length", request=request)
        return Framing(length, chunked=False)
    return Framing(None, chunked=False)


def _keep_alive_timeout(headers: list[tuple[bytes, bytes]]) -> float | None:
    """The idle timeout of a `Keep-Alive: timeout=N, max=M` header, in seconds; None without one."""
    for name, value in headers:
        if name.lower() == b"keep-alive" and (match := _KEEP_ALIVE_TIMEOUT.search(value)):
            return float(match.group(1))
    return None


def _has_token(headers: list[tuple[bytes, bytes]], name: bytes, token: bytes) -> bool:
    return any(
        key.lower() == name and token in (part.strip().lower() for part in value.split(b","))
        for key, value in headers
    )


_INCOMPLETE = "peer closed connection without sending complete message body"


class Body(httpx.AsyncByteStream):
    """A response body as it arrives, a network read at a time (chunked coding removed). Read to its end, its
    connection goes back to the pool; closed before, the connection is closed."""

    def __init__(
        self, connection: Connection, request: httpx.Request, timeout_s: float | None, release: Release,
        framing: Framing,
    ) -> None:
        self._connection = connection
        self._request = request
        self._timeout_s = timeout_s
        self._release = release
        self._framing = framing
        self.reusable = False
        self._done = False
        self._closed = False
        self._left = framing.length  # a fixed-length body's bytes still to come
        self._chunk_left = 0  # the current chunk's data bytes still to come, then its CRLF

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self._done:
            if data := self._chunked() if self._framing.chunked else self._plain():
                yield data
            elif not self._done:
                await self._more()
        await self.aclose()

    async def _more(self) -> None:
        if self._left is None and not self._framing.chunked:  # the body ends with the connection
            try:
                await self._connection.more(self._request, self._timeout_s, "")
            except httpx.RemoteProtocolError:
                self._done = True
                self.reusable = False
            return
        await self._connection.more(self._request, self._timeout_s, _INCOMPLETE)

    def _plain(self) -> bytes:
        data = self._connection.take(self._left)
        if self._left is not None:
            self._left -= len(data)
            self._done = self._left == 0
        return data

    def _chunked(self) -> bytes:
        """The data of every complete chunk in the buffer (and of the last one, so far); leaves a partial size
        line or trailer in it."""
        buffer = self._connection.peek()
        parts: list[bytearray] = []
        position = 0
        length = len(buffer)
        while position < length:
            if self._chunk_left > 0:  # inside a chunk's data (cut by the end of a read)
                taken = buffer[position : position + self._chunk_left]
                parts.append(taken)
                position += len(taken)
                self._chunk_left -= len(taken)
                if self._chunk_left == 0:
                    self._chunk_left = -1  # its CRLF comes next
                continue
            if self._chunk_left == -1:
                if length - position < 2:
                    break
                if buffer[position : position + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError("a chunk does not end with CRLF", request=self._request)
                position += 2
                self._chunk_left = 0
                continue
            end = buffer.find(b"\r\n", position)
            if end < 0:
                if length - position > 1024:
                    raise httpx.RemoteProtocolError("a chunk size line is too long", request=self._request)
                break
            try:
                size = int(buffer[position:end].split(b";", 1)[0], 16)
            except ValueError as exc:
                raise httpx.RemoteProtocolError("a malformed chunk size", request=self._request) from exc
            if size < 0:
                raise httpx.RemoteProtocolError("a malformed chunk size", request=self._request)
            if size == 0:  # the last chunk, then trailer fields (ignored) up to an empty line
                if (stop := buffer.find(b"\r\n\r\n", end)) < 0:
                    break
                position = stop + 4
                self._done = True
                break
            start, stop = end + 2, end + 2 + size
            if stop + 2 > length:  # the chunk goes on in the next read
                position, self._chunk_left = start, size
                continue
            if buffer[stop : stop + 2] != b"\r\n":
                raise httpx.RemoteProtocolError("a chunk does not end with CRLF", request=self._request)
            parts.append(buffer[start:stop])
            position = stop + 2
        del buffer[:position]
        return b"".join(parts)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._release(self._connection, self.reusable and self._done)

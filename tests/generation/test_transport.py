"""StreamTransport against a raw HTTP/1.1 server on a real socket that sends scripted bytes: body framings (chunked
split anywhere, Content-Length, the connection's end), a read's chunks as one block, keep-alive reuse, hanging
up on a body closed early, and every failure as httpx's exception."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from ragsvc.generation.openai_compat import OpenAICompatGenerator
from ragsvc.generation.transport import StreamTransport
from tests.server.test_tls import make_ca, make_leaf

# A reply: byte pieces sent one after the other (each flushed, with a pause between, so they arrive apart).
Reply = Sequence[bytes]


@dataclass
class RawServer:
    """Answers the n-th request with replies[n] (the last one again after that); then closes the connection
    when `close_after` is set. Records the requests' heads and counts the connections."""

    replies: Sequence[Reply]
    close_after: bool = False
    pause_s: float = 0.02
    heads: list[bytes] = field(default_factory=list)
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.heads.append(head)
                length = next(
                    (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
                    0,
                )
                await reader.readexactly(length)
                for number, piece in enumerate(self.replies[min(len(self.heads), len(self.replies)) - 1]):
                    if number:
                        await asyncio.sleep(self.pause_s)
                    writer.write(piece)
                    await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):  # the client left, or shutdown
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(server: RawServer) -> AsyncIterator[str]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def client(timeout_s: float = 5.0) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=StreamTransport(), timeout=timeout_s) as http:
        yield http


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


async def blocks(http: httpx.AsyncClient, url: str) -> list[bytes]:
    async with http.stream("POST", url, json={"q": 1}) as response:
        return [block async for block in response.aiter_raw()]


async def test_a_chunked_body_split_anywhere_is_decoded() -> None:
    body = chunked(b"data: one\n\n", b"data: two\n\n") [:-5] + b"0;ext=1\r\nX-Trailer: t\r\n\r\n"
    stream = HEAD_CHUNKED + body
    # Every way of cutting the bytes in two: inside a size line, a CRLF, the data, the trailer.
    for cut in range(1, len(stream)):
        server = RawServer([[stream[:cut], stream[cut:]]], pause_s=0.002)
        async with serving(server) as url, client() as http:
            assert b"".join(await blocks(http, url)) == b"data: one\n\ndata: two\n\n", cut


async def test_the_chunks_of_one_read_come_as_one_block_and_the_connection_is_kept() -> None:
    events = [b"data: %d\n\n" % n for n in range(20)]
    server = RawServer([[HEAD_CHUNKED + chunked(*events)]])
    async with serving(server) as url, client() as http:
        first = await blocks(http, url)
        second = await blocks(http, url)
    assert first == second == [b"".join(events)]
    assert server.connections == 1
    assert server.heads[0].startswith(b"POST / HTTP/1.1\r\n") and b"\r\ncontent-length: 7\r\n" in server.heads[0].lower()


async def test_a_content_length_body_and_one_ended_by_the_connection() -> None:
    fixed = RawServer([[b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello", b" world"]])
    async with serving(fixed) as url, client() as http:
        assert (await http.get(url)).text == "hello world"
        assert (await http.get(url)).text == "hello world"
    assert fixed.connections == 1
    until_closed = RawServer([[b"HTTP/1.0 200 OK\r\n\r\nhello", b" world"]], close_after=True)
    async with serving(until_closed) as url, client() as http:
        assert (await http.get(url)).text == "hello world"
        assert (await http.get(url)).text == "hello world"
    assert until_closed.connections == 2


async def test_informational_responses_are_skipped_and_empty_bodies_end_at_once() -> None:
    server = RawServer([[b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 204 No Content\r\n\r\n"]])
    async with serving(server) as url, client() as http:
        response = await http.post(url, json={})
        again = await http.post(url, json={})
    assert response.status_code == again.status_code == 204 and response.content == b""
    assert server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    server = RawServer([[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]], close_after=True)
    async with serving(server) as url, client() as http:
        assert (await http.get(url)).text == "ok"
        await asyncio.sleep(0.05)  # the server's FIN arrives
        assert (await http.get(url)).text == "ok"
    assert server.connections == 2


@dataclass
class CrossingServer:
    """Answers the first request of every connection, and drops the connection when its second request arrives,
    unanswered: the server closed it as the client reused it (the stale keep-alive race). With `partial`, the
    second request gets the first bytes of a response before the drop. Records each request's connection number."""

    keep_alive: bytes = b""
    partial: bool = False
    served: list[int] = field(default_factory=list)
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            for turn in range(2):
                await reader.readuntil(b"\r\n\r\n")
                self.served.append(number)
                if turn == 1:
                    if self.partial:
                        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
                        await writer.drain()
                    break
                writer.write(b"HTTP/1.1 200 OK\r\n%sContent-Length: 2\r\n\r\nok" % self.keep_alive)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


async def test_a_request_dropped_unanswered_on_a_reused_connection_is_sent_once_more_on_a_new_one() -> None:
    server = CrossingServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/"
    async with listener, client() as http:
        assert (await http.get(url)).text == "ok"
        assert (await http.post(url, json={"q": 1})).text == "ok"
    assert server.served == [1, 1, 2], "sent on the kept connection, dropped, then sent on a new one"


async def test_a_response_that_had_begun_is_never_sent_again_nor_a_request_on_a_new_connection() -> None:
    server = CrossingServer(partial=True)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/"
    async with listener, client() as http:
        assert (await http.get(url)).text == "ok"
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url)
    assert server.served == [1, 1]
    dropping = RawServer([[b""]], close_after=True)  # a new connection closed without a response
    async with serving(dropping) as url, client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url)
    assert dropping.connections == 1


async def test_a_connection_near_its_announced_keep_alive_timeout_is_not_reused() -> None:
    server = CrossingServer(keep_alive=b"Keep-Alive: timeout=2, max=100\r\n")
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/"
    async with listener, client() as http:
        assert (await http.get(url)).text == "ok"
        await asyncio.sleep(1.1)  # past the timeout less KEEP_ALIVE_MARGIN_S: the server may be closing it now
        assert (await http.get(url)).text == "ok"
    assert server.served == [1, 2], "the second request went on a new connection, never on the expiring one"


async def test_a_body_closed_before_its_end_hangs_up() -> None:
    hung_up = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD_CHUNKED + b"5\r\nfirst\r\n")  # and the rest never: only the client can end this
        if await reader.read() == b"":
            hung_up.set()
        writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with listener, client() as http:
        async with http.stream("GET", f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}") as response:
            async for block in response.aiter_raw():
                assert block == b"first"
                break
        await asyncio.wait_for(hung_up.wait(), 1.0)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ([b""], httpx.RemoteProtocolError),  # closed without a response
        ([HEAD_CHUNKED + b"5\r\nfirst\r\n"], httpx.RemoteProtocolError),  # closed mid-body
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"], httpx.RemoteProtocolError),
        ([b"NOT HTTP\r\n\r\n"], httpx.RemoteProtocolError),
        ([HEAD_CHUNKED + b"zz\r\n"], httpx.RemoteProtocolError),
        ([HEAD_CHUNKED + b"2\r\nabcd\r\n"], httpx.RemoteProtocolError),  # a chunk longer than its size
    ],
)
async def test_broken_responses_are_protocol_errors(reply: Reply, error: type[Exception]) -> None:
    async with serving(RawServer([reply], close_after=True)) as url, client() as http:
        with pytest.raises(error):
            await http.get(url)


async def test_a_server_sending_nothing_is_a_read_timeout_and_nobody_listening_a_connect_error() -> None:
    server = RawServer([[HEAD_CHUNKED + b"5\r\nfirst\r\n", b"0\r\n\r\n"]], pause_s=5.0)
    async with serving(server) as url, client(timeout_s=0.2) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(url)
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(url)


async def test_a_generator_behind_an_environment_proxy_goes_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    models = b'{"object": "list", "data": [{"id": "llama3.2"}]}'
    proxy = RawServer([[b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(models), models)]])
    async with serving(proxy) as proxy_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with contextlib.aclosing(OpenAICompatGenerator("http://llm.invalid:8080/v1", model="llama3.2")) as llm:
            assert await llm.available_models() == ["llama3.2"]
    assert proxy.heads[0].startswith(b"GET http://llm.invalid:8080/v1/models HTTP/1.1\r\n")


async def test_https_with_a_trusted_certificate_and_not_with_another(tmp_path: Path) -> None:
    ca, ca_key, ca_cert = make_ca("test CA")
    leaf = make_leaf("localhost", ca_key, ca_cert, server=True)
    (tmp_path / "cert.pem").write_bytes(leaf.cert)
    (tmp_path / "key.pem").write_bytes(leaf.key)
    serving_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving_tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    trusting = ssl.create_default_context(cadata=ca.cert.decode())
    server = RawServer([[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]])
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=serving_tls)
    url = f"https://localhost:{listener.sockets[0].getsockname()[1]}/"
    async with listener:
        async with httpx.AsyncClient(transport=StreamTransport(ssl_context=trusting)) as http:
            assert (await http.get(url)).text == "ok"
            assert (await http.get(url)).text == "ok"
        async with client() as http:  # the default store does not know the test CA
            with pytest.raises(httpx.ConnectError):
                await http.get(url)
    assert server.connections == 1

"""Transient LLM failures retried (generation/retry.py, generation/transport.py), against both scripted servers on
real sockets: a server that closes idle keep-alive connections as they are reused, one that answers 503 with
Retry-After, one that is not listening yet. What had started streaming is never sent again."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time

import pytest

from ragsvc.domain import ChatMessage, GenerationDelta, GenerationRequest, Role
from ragsvc.errors import LLMUnavailable
from ragsvc.generation.http import HttpGenerator
from ragsvc.generation.retry import MAX_WAIT_S, RetryPolicy
from tests.generation.backends import BACKENDS, Backend
from tests.support.http_server import Fault
from tests.support.streams import collect_into

pytestmark = pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)

QUICK = RetryPolicy(retries=2, backoff_s=0.1)


def request(deadline: float | None = None) -> GenerationRequest:
    return GenerationRequest(
        messages=(ChatMessage(Role.USER, "Which port?"),),
        query="Which port?",
        context=(),
        model="",
        max_tokens=0,
        deadline=deadline,
    )


async def text(generator: HttpGenerator, req: GenerationRequest | None = None) -> str:
    return "".join([delta.text async for delta in generator.generate(req or request())])


def chat_requests(server, backend: Backend) -> list:
    return [r for r in server.requests if r.path == backend.chat_path]


async def test_a_request_the_server_drops_on_an_idle_connection_is_sent_again_at_once(backend: Backend) -> None:
    """The stale keep-alive race: the server closes a connection idle for 0.2 s just as the next request arrives
    on it. Without backoff retries, the transport sends the request once more, on a new connection."""
    async with backend.server(idle_close_s=0.2) as server:
        async with contextlib.aclosing(backend.generator(server, retry=RetryPolicy(retries=0))) as generator:
            assert await text(generator) == "Hello, world."
            await asyncio.sleep(0.3)
            started = time.monotonic()
            assert await text(generator) == "Hello, world."
            elapsed_s = time.monotonic() - started
    first, dropped, again = chat_requests(server, backend)
    assert dropped.connection is first.connection, "the kept connection was reused ..."
    assert again.connection is not first.connection, "... and the request sent again on a new one"
    assert elapsed_s < 0.5, "at once, not after a backoff"


async def test_back_to_back_requests_to_a_server_closing_after_each_answer_all_succeed(backend: Backend) -> None:
    """llama.cpp's server closes the connection after every streamed completion, though it announced keep-alive:
    a request sent at once after the previous answer (a side call after an answer, an answer after a
    classification) may go out on the connection as it closes. It is sent again on a new one (issue 29's
    "Server disconnected without sending a response"), without any backoff retry."""
    async with backend.server(close_after_answer=True) as server:
        async with contextlib.aclosing(backend.generator(server, retry=RetryPolicy(retries=0))) as generator:
            texts = [await text(generator) for _ in range(10)]
    assert texts == ["Hello, world."] * 10
    answered = chat_requests(server, backend)
    assert len({id(r.connection) for r in answered}) >= 10, "never two answers on one connection"


async def test_503_is_retried_after_its_retry_after(backend: Backend) -> None:
    async with backend.server(fail_next=2, fail_retry_after="1") as server:
        async with contextlib.aclosing(backend.generator(server, retry=QUICK)) as generator:
            assert await text(generator) == "Hello, world."
    times = [r.received_at for r in server.requests if r.path == backend.chat_path]
    assert len(times) == 3, "two 503s, then the answer"
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times)), "Retry-After: 1"


async def test_retries_end_after_the_count_of_r_001_21_with_a_growing_backoff(backend: Backend) -> None:
    async with backend.server(fail_next=10) as server:
        async with contextlib.aclosing(backend.generator(server, retry=QUICK)) as generator:
            with pytest.raises(LLMUnavailable) as caught:
                await text(generator)
    times = [r.received_at for r in server.requests if r.path == backend.chat_path]
    assert len(times) == 3, "the first try and two retries"
    first_wait, second_wait = times[1] - times[0], times[2] - times[1]
    assert first_wait >= 0.05 and second_wait >= 0.1, "half of 0.1 s, then of 0.2 s, at least"
    assert "503" in caught.value.message and caught.value.transient


async def test_a_retry_after_past_the_deadline_or_too_long_is_not_waited_for(backend: Backend) -> None:
    async with backend.server(fail_next=10, fail_retry_after="2") as server:
        async with contextlib.aclosing(backend.generator(server, retry=QUICK)) as generator:
            started = time.monotonic()
            with pytest.raises(LLMUnavailable) as caught:
                await text(generator, request(deadline=asyncio.get_running_loop().time() + 1.0))
            assert time.monotonic() - started < 0.5
            assert caught.value.retry_after_s == 2.0, "the server's wait goes to the client"
            server.fail_retry_after = str(int(MAX_WAIT_S) + 5)
            with pytest.raises(LLMUnavailable) as caught:
                await text(generator)
            assert caught.value.retry_after_s == MAX_WAIT_S + 5
    assert len(chat_requests(server, backend)) == 2, "one try each"


async def test_a_stream_that_had_started_is_never_sent_again(backend: Backend) -> None:
    async with backend.server(deltas=["one", " two"], fault=Fault.DISCONNECT, fault_after=1) as server:
        async with contextlib.aclosing(backend.generator(server, retry=QUICK)) as generator:
            received: list[GenerationDelta] = []
            with pytest.raises(LLMUnavailable):
                await collect_into(received, generator.generate(request()))
    assert [delta.text for delta in received] == ["one"]
    assert len(chat_requests(server, backend)) == 1


async def test_a_client_error_is_not_retried(backend: Backend) -> None:
    async with backend.server(fail_next=10, fail_status=400) as server:
        async with contextlib.aclosing(backend.generator(server, retry=QUICK)) as generator:
            with pytest.raises(LLMUnavailable) as caught:
                await text(generator)
    assert len(chat_requests(server, backend)) == 1 and not caught.value.transient


async def test_a_server_not_listening_yet_is_retried(backend: Backend) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = backend.server()
    server.listen_port = port
    url = f"http://127.0.0.1:{port}" + ("/v1" if backend.name == "openai" else "")
    async with contextlib.aclosing(backend.generator(url, retry=RetryPolicy(retries=2, backoff_s=0.4))) as generator:
        answering = asyncio.ensure_future(text(generator))
        await asyncio.sleep(0.1)  # the first try was refused; the server comes up during the backoff
        async with server:
            assert await answering == "Hello, world."
    assert len(chat_requests(server, backend)) == 1


async def test_a_health_probe_is_not_retried_but_a_model_list_for_an_answer_is(backend: Backend) -> None:
    """A probe reports the server as it is now (the next probe is its retry); the model list an answer needs is
    fetched with the answer's retries."""
    async with backend.server(status=503) as server:
        async with contextlib.aclosing(backend.generator(server, retry=QUICK)) as generator:
            with pytest.raises(LLMUnavailable):
                await generator.check_health()
            probed = len([r for r in server.requests if r.path == backend.models_path])
            with pytest.raises(LLMUnavailable):
                await generator.available_models()
            listed = len([r for r in server.requests if r.path == backend.models_path]) - probed
    assert (probed, listed) == (1, 1 + QUICK.retries)

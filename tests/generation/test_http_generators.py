"""What both LLM generators (OpenAI-compatible SSE, Ollama NDJSON) must do alike, each against its scripted server
on a real socket: stream as tokens arrive, map every failure to the same error, say which failures another
model may not share, check availability from a briefly kept model list, and hang up at once when closed."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from ragsvc.domain import ChatMessage, GenerationDelta, GenerationRequest, Role, Usage
from ragsvc.errors import LLMTimeout, LLMUnavailable, ModelUnavailable
from ragsvc.generation.fallback import worth_another_model
from ragsvc.generation.http import HttpGenerator
from tests.generation.backends import BACKENDS, Backend
from tests.support.http_server import Fault
from tests.support.polling import eventually
from tests.support.streams import collect_into

pytestmark = pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)

MESSAGES = (
    ChatMessage(Role.SYSTEM, "Answer from the context only."),
    ChatMessage(Role.USER, "Which port does the server use?"),
)


def request(model: str = "") -> GenerationRequest:
    return GenerationRequest(messages=MESSAGES, query="Which port?", context=(), model=model, max_tokens=0)


async def collect(generator: HttpGenerator, req: GenerationRequest | None = None) -> list[GenerationDelta]:
    return [delta async for delta in generator.generate(req or request())]


async def test_streams_deltas_as_they_arrive_then_usage(backend: Backend) -> None:
    deltas = ["The", " server", " uses", " port", " 50051."]
    async with backend.server(deltas=deltas, token_delay_s=0.05) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            # With each delta, how many the server had sent when it arrived.
            arrivals = [(server.streams[0].tokens_sent, delta) async for delta in generator.generate(request())]

    received = [delta for _, delta in arrivals]
    # What arrived in one network read is one delta (a loaded machine may read two at once): the text is whole.
    assert "".join(delta.text for delta in received) == "".join(deltas)
    # Usage last, with what arrived with it: the servers count 5 + 6 words of prompt and one token per delta.
    assert received[-1].usage == Usage(prompt_tokens=11, completion_tokens=5)
    assert all(delta.usage is None for delta in received[:-1])
    # Each delta is yielded when it arrives (0.05 s apart), not once the answer is complete.
    assert arrivals[0][0] < len(deltas) and arrivals[0][1].text
    assert generator.name == f"{backend.name}:llama3.2" == generator.model_name("llama3.2")
    assert generator.capabilities.follows_instructions


async def test_what_arrived_while_the_consumer_was_busy_is_one_delta_with_the_usage(backend: Backend) -> None:
    """What arrived in one network read is one delta: here, everything the server sent while the consumer was busy
    with the first delta."""
    deltas = [f" token{i}" for i in range(30)]
    async with backend.server(deltas=deltas, token_delay_s=0.002) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            async with contextlib.aclosing(generator.generate(request())) as stream:
                first = await anext(stream)
                await eventually(lambda: server.streams[0].completed, within_s=10)
                await asyncio.sleep(0.05)  # the loop reads what the server sent into this side's buffer
                rest = [delta async for delta in stream]
    assert first.text + "".join(delta.text for delta in rest) == "".join(deltas)
    assert len(rest) <= 1, "the rest came in one read"
    assert (rest or [first])[-1].usage == Usage(prompt_tokens=11, completion_tokens=30)


async def test_a_finished_stream_leaves_the_connection_for_the_next(backend: Backend) -> None:
    async with backend.server() as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            first = "".join(d.text for d in await collect(generator))
            await collect(generator)
    assert first == "Hello, world."
    chats = [r for r in server.requests if r.path == backend.chat_path]
    assert chats[1].connection is chats[0].connection


async def test_server_down_is_llm_unavailable_worth_another_model(backend: Backend) -> None:
    async with contextlib.aclosing(backend.generator(backend.down_url())) as generator:
        with pytest.raises(LLMUnavailable) as caught:
            await collect(generator)
    assert worth_another_model(caught.value)


@pytest.mark.parametrize(("status", "worth"), [(500, True), (502, True), (503, True), (429, True), (400, False), (401, False)])
async def test_error_statuses_are_llm_unavailable(backend: Backend, status: int, worth: bool) -> None:
    async with backend.server(status=status) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            with pytest.raises(LLMUnavailable) as caught:
                await collect(generator)
    assert str(status) in caught.value.message
    assert worth_another_model(caught.value) is worth


async def test_an_unserved_model_is_model_unavailable(backend: Backend) -> None:
    async with backend.server(models=("llama3.2",)) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            with pytest.raises(ModelUnavailable) as caught:
                await collect(generator, request(model="qwen3:8b"))
    assert "qwen3:8b" in caught.value.message and caught.value.metadata == {"model": "qwen3:8b"}
    assert not worth_another_model(caught.value)


async def test_a_stalled_stream_is_llm_timeout(backend: Backend) -> None:
    async with backend.server(deltas=["one", " two", " three"], fault=Fault.STALL, fault_after=1) as server:
        async with contextlib.aclosing(backend.generator(server, timeout_s=0.3)) as generator:
            received: list[GenerationDelta] = []
            started = time.monotonic()
            with pytest.raises(LLMTimeout) as caught:
                await collect_into(received, generator.generate(request()))
    assert caught.value.stage == "generation" and not worth_another_model(caught.value)
    assert [delta.text for delta in received] == ["one"]
    assert 0.3 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("fault", "worth"), [(Fault.DISCONNECT, True), (Fault.ERROR, True), (Fault.GARBAGE, False), (Fault.TRUNCATE, False)]
)
async def test_a_broken_stream_is_llm_unavailable(backend: Backend, fault: Fault, worth: bool) -> None:
    """Dropped mid-answer, an error event from the server (a crashed runner), a line that is not JSON, a body
    that ends before the answer does: each after the delta that came before it."""
    async with backend.server(deltas=["one", " two"], fault=fault, fault_after=1) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            received: list[GenerationDelta] = []
            with pytest.raises(LLMUnavailable) as caught:
                await collect_into(received, generator.generate(request()))
    assert [delta.text for delta in received] == ["one"]
    assert worth_another_model(caught.value) is worth


async def test_health_asks_the_server_every_time(backend: Backend) -> None:
    async with backend.server(models=("qwen3:8b", "llama3.2")) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            await generator.check_health()
            await generator.check_health()
            assert backend.listed("qwen3:8b") in await generator.available_models()
    assert [r.path for r in server.requests] == [backend.models_path] * 3


async def test_health_fails_on_a_failing_server_a_missing_model_or_no_server(backend: Backend) -> None:
    async with backend.server(status=503) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            with pytest.raises(LLMUnavailable):
                await generator.check_health()
    async with backend.server(models=("qwen3:8b",)) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            with pytest.raises(ModelUnavailable) as caught:
                await generator.check_health()
    assert "qwen3:8b" in caught.value.message, "the message says what the server does serve"
    async with contextlib.aclosing(backend.generator(backend.down_url())) as generator:
        with pytest.raises(LLMUnavailable):
            await generator.check_health()


async def test_availability_comes_from_the_model_list_kept_briefly(backend: Backend) -> None:
    async with backend.server(models=("llama3.2", "qwen3:8b")) as server:
        async with contextlib.aclosing(backend.generator(server, models_ttl_s=60)) as generator:
            await asyncio.gather(*(generator.ensure_available("qwen3:8b") for _ in range(5)))
            await generator.ensure_available("llama3.2")
            with pytest.raises(ModelUnavailable):
                await generator.ensure_available("deepseek-r1:32b")
            assert [r.path for r in server.requests] == [backend.models_path], "one fetch, shared and kept"

            server.models.append(backend.listed("deepseek-r1:32b"))  # pulled meanwhile
            with pytest.raises(ModelUnavailable):
                await generator.ensure_available("deepseek-r1:32b")  # the kept list does not know it yet
        # With no time to keep it (RAG_MODEL_LIST_TTL_SECONDS 0) the list is asked for again: the TTL is the
        # generator's setting (ModelList's own clock-driven expiry is tested in test_model_list.py).
        async with contextlib.aclosing(backend.generator(server, models_ttl_s=0)) as generator:
            await generator.ensure_available("deepseek-r1:32b")
            await generator.ensure_available("deepseek-r1:32b")
    assert [r.path for r in server.requests] == [backend.models_path] * 3


async def test_a_failed_model_list_is_not_kept(backend: Backend) -> None:
    async with backend.server(status=503) as server:
        async with contextlib.aclosing(backend.generator(server, models_ttl_s=60)) as generator:
            with pytest.raises(LLMUnavailable) as caught:
                await generator.ensure_available("llama3.2")
            assert worth_another_model(caught.value)
            server.status = None
            await generator.ensure_available("llama3.2")
    assert len(server.requests) == 2


async def test_closing_the_stream_hangs_up_at_once(backend: Backend) -> None:
    deltas = [f" token{i}" for i in range(40)]
    async with backend.server(deltas=deltas, token_delay_s=0.05) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            received: list[str] = []
            async with contextlib.aclosing(generator.generate(request())) as stream:
                async for delta in stream:
                    received.append(delta.text)
                    if len(received) == 2:
                        break
            stopped = time.monotonic()
            connection = server.streams[0].request.connection
            await asyncio.wait_for(connection.closed.wait(), timeout=1.0)

    assert received == deltas[:2]
    assert connection.closed_by == "client"
    assert connection.closed_at is not None and connection.closed_at - stopped < 0.2
    assert not server.streams[0].completed and server.streams[0].tokens_sent < len(deltas)


async def test_cancelling_the_consumer_hangs_up_at_once(backend: Backend) -> None:
    async with backend.server(deltas=["one", " two", " three"], fault=Fault.STALL, fault_after=2) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            received: list[str] = []
            two_received = asyncio.Event()

            async def consume() -> None:
                async for delta in generator.generate(request()):
                    received.append(delta.text)
                    if len(received) == 2:
                        two_received.set()

            consumer = asyncio.create_task(consume())
            await asyncio.wait_for(two_received.wait(), timeout=1.0)
            consumer.cancel()
            cancelled = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await consumer
            connection = server.streams[0].request.connection
            await asyncio.wait_for(connection.closed.wait(), timeout=1.0)

    assert received == ["one", " two"]
    assert connection.closed_by == "client"
    assert connection.closed_at is not None and connection.closed_at - cancelled < 0.2
    assert server.streams[0].tokens_sent == 2 and not server.streams[0].completed

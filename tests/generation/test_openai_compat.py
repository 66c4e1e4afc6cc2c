"""OpenAICompatGenerator against a scripted OpenAI-compatible server on a real socket."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from email.utils import formatdate

import pytest

from ragsvc.domain import ChatMessage, GenerationDelta, GenerationRequest, Role, Usage
from ragsvc.errors import LLMTimeout, LLMUnavailable, ModelUnavailable
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from tests.support.openai_server import Fault, ScriptedOpenAIServer

MESSAGES = (
    ChatMessage(Role.SYSTEM, "Answer from the context only."),
    ChatMessage(Role.USER, "Which port does the server use?"),
)


def request(
    *, model: str = "", max_tokens: int = 0, temperature: float | None = None, seed: int | None = None
) -> GenerationRequest:
    return GenerationRequest(
        messages=MESSAGES,
        query="Which port?",
        context=(),
        model=model,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
    )


def closed_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def collect(generator: OpenAICompatGenerator, req: GenerationRequest) -> list[GenerationDelta]:
    return [delta async for delta in generator.generate(req)]


async def test_streams_deltas_in_order_as_they_arrive_then_usage() -> None:
    deltas = ["The", " server", " uses", " port", " 50051."]
    async with ScriptedOpenAIServer(deltas=deltas, token_delay_s=0.05) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            arrivals: list[tuple[float, GenerationDelta]] = []
            async for delta in generator.generate(request()):
                arrivals.append((time.monotonic(), delta))

    received = [delta for _, delta in arrivals]
    assert [delta.text for delta in received[:-1]] == deltas
    # Usage comes last, alone: the server counts 5 + 6 words of prompt and one token per delta.
    assert received[-1] == GenerationDelta(text="", usage=Usage(prompt_tokens=11, completion_tokens=5))
    # Each delta is yielded when it arrives (0.05 s apart), not once the answer is complete.
    assert arrivals[-2][0] - arrivals[0][0] >= 0.15


async def test_sends_the_openai_request() -> None:
    async with ScriptedOpenAIServer(models=["llama3.2", "qwen2.5"]) as server:
        generator = OpenAICompatGenerator(server.base_url, model="llama3.2", api_key="sk-test")
        async with contextlib.aclosing(generator):
            await collect(generator, request(model="qwen2.5", max_tokens=64, temperature=0.2, seed=7))

    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body == {
        "model": "qwen2.5",
        "messages": [
            {"role": "system", "content": "Answer from the context only."},
            {"role": "user", "content": "Which port does the server use?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 64,
        "temperature": 0.2,
        "seed": 7,
    }


async def test_defaults_to_its_model_and_omits_unset_options() -> None:
    async with ScriptedOpenAIServer() as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            texts = [delta.text for delta in await collect(generator, request())]
            await collect(generator, request())

    assert "".join(texts) == "Hello, world."
    body = server.requests[0].body
    assert body["model"] == "llama3.2"
    assert not {"max_tokens", "temperature", "seed"} & body.keys()
    assert "authorization" not in server.requests[0].headers
    # A finished stream is read to its end, so the next generation reuses the connection.
    assert server.requests[1].connection is server.requests[0].connection


async def test_server_down_is_llm_unavailable() -> None:
    generator = OpenAICompatGenerator(f"http://127.0.0.1:{closed_port()}/v1", model="llama3.2")
    async with contextlib.aclosing(generator):
        with pytest.raises(LLMUnavailable):
            await collect(generator, request())


@pytest.mark.parametrize(
    ("status", "retry_after", "retry_after_s"),
    [(500, None, 1.0), (503, None, 1.0), (503, "7", 7.0), (429, "3", 3.0)],
)
async def test_server_errors_are_llm_unavailable(
    status: int, retry_after: str | None, retry_after_s: float
) -> None:
    async with ScriptedOpenAIServer(status=status, retry_after=retry_after) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            with pytest.raises(LLMUnavailable) as caught:
                await collect(generator, request())

    assert caught.value.retry_after_s == retry_after_s
    assert str(status) in caught.value.message


async def test_retry_after_as_an_http_date() -> None:
    async with ScriptedOpenAIServer(status=429, retry_after=formatdate(time.time() + 30, usegmt=True)) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            with pytest.raises(LLMUnavailable) as caught:
                await collect(generator, request())

    assert 25 <= caught.value.retry_after_s <= 30


async def test_unknown_model_is_model_unavailable() -> None:
    async with ScriptedOpenAIServer(models=["llama3.2"]) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            with pytest.raises(ModelUnavailable) as caught:
                await collect(generator, request(model="gpt-nonexistent"))

    assert "gpt-nonexistent" in caught.value.message
    assert caught.value.metadata == {"model": "gpt-nonexistent"}


async def test_stalled_stream_is_llm_timeout() -> None:
    async with ScriptedOpenAIServer(deltas=["one", " two", " three"], fault=Fault.STALL, fault_after=1) as server:
        generator = OpenAICompatGenerator(server.base_url, model="llama3.2", timeout_s=0.3)
        async with contextlib.aclosing(generator):
            received: list[str] = []
            started = time.monotonic()
            with pytest.raises(LLMTimeout) as caught:
                async for delta in generator.generate(request()):
                    received.append(delta.text)

    assert caught.value.stage == "generation"
    assert received == ["one"]
    assert 0.3 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize("fault", [Fault.DISCONNECT, Fault.GARBAGE])
async def test_broken_stream_is_llm_unavailable(fault: Fault) -> None:
    async with ScriptedOpenAIServer(deltas=["one", " two"], fault=fault, fault_after=1) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            received: list[str] = []
            with pytest.raises(LLMUnavailable):
                async for delta in generator.generate(request()):
                    received.append(delta.text)

    assert received == ["one"]


async def test_check_health_passes_when_the_model_is_served() -> None:
    async with ScriptedOpenAIServer(models=["qwen2.5", "llama3.2:latest"]) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            await generator.check_health()
            assert await generator.available_models() == ["qwen2.5", "llama3.2:latest"]

    assert [(sent.method, sent.path) for sent in server.requests] == [("GET", "/v1/models")] * 2


async def test_check_health_fails_on_a_failing_server() -> None:
    async with ScriptedOpenAIServer(status=503) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            with pytest.raises(LLMUnavailable):
                await generator.check_health()


async def test_check_health_fails_when_the_server_is_down() -> None:
    generator = OpenAICompatGenerator(f"http://127.0.0.1:{closed_port()}/v1", model="llama3.2")
    async with contextlib.aclosing(generator):
        with pytest.raises(LLMUnavailable):
            await generator.check_health()


async def test_check_health_fails_when_the_model_is_missing() -> None:
    async with ScriptedOpenAIServer(models=["qwen2.5"]) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            with pytest.raises(ModelUnavailable) as caught:
                await generator.check_health()

    assert "qwen2.5" in caught.value.message


async def test_closing_the_stream_hangs_up_at_once() -> None:
    deltas = [f" token{i}" for i in range(40)]
    async with ScriptedOpenAIServer(deltas=deltas, token_delay_s=0.05) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
            received: list[str] = []
            async with contextlib.aclosing(generator.generate(request())) as stream:
                async for delta in stream:
                    received.append(delta.text)
                    if len(received) == 2:
                        break
            stopped = time.monotonic()
            connection = server.connections[0]
            await asyncio.wait_for(connection.closed.wait(), timeout=1.0)

    assert received == deltas[:2]
    assert connection.closed_by == "client"
    assert connection.closed_at is not None and connection.closed_at - stopped < 1.0
    assert not server.streams[0].completed
    assert server.streams[0].tokens_sent < len(deltas)


async def test_cancelling_the_consumer_hangs_up_at_once() -> None:
    async with ScriptedOpenAIServer(deltas=["one", " two", " three"], fault=Fault.STALL, fault_after=2) as server:
        async with contextlib.aclosing(OpenAICompatGenerator(server.base_url, model="llama3.2")) as generator:
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
            connection = server.connections[0]
            await asyncio.wait_for(connection.closed.wait(), timeout=1.0)

    assert received == ["one", " two"]
    assert connection.closed_by == "client"
    assert connection.closed_at is not None and connection.closed_at - cancelled < 1.0
    assert server.streams[0].tokens_sent == 2 and not server.streams[0].completed

"""OpenAICompatGenerator's own protocol against the scripted OpenAI-compatible server on a real socket. What it
shares with the Ollama generator (streaming, errors, availability, hanging up) is in test_http_generators.py."""

from __future__ import annotations

import contextlib
import json
import time
from email.utils import formatdate

import pytest

from ragsvc.domain import ChatMessage, GenerationDelta, GenerationRequest, Role
from ragsvc.errors import LLMUnavailable
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from tests.support.openai_server import ScriptedOpenAIServer

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


async def collect(generator: OpenAICompatGenerator, req: GenerationRequest) -> list[GenerationDelta]:
    return [delta async for delta in generator.generate(req)]


async def test_sends_the_openai_request() -> None:
    async with ScriptedOpenAIServer(models=["llama3.2", "qwen2.5"]) as server:
        generator = OpenAICompatGenerator(server.base_url, model="llama3.2", api_key="sk-test")
        async with contextlib.aclosing(generator):
            await collect(generator, request(model="qwen2.5", max_tokens=64, temperature=0.2, seed=7))

    sent = next(r for r in server.requests if r.method == "POST")
    assert sent.path == "/v1/chat/completions"
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
    first, second = (r for r in server.requests if r.method == "POST")
    assert first.body["model"] == "llama3.2"
    assert not {"max_tokens", "temperature", "seed", "stop"} & first.body.keys()
    assert "authorization" not in first.headers
    # A finished stream is read to its end, so the next generation reuses the connection.
    assert second.connection is first.connection


async def test_every_request_carries_its_own_headers_though_they_are_built_once() -> None:
    async with ScriptedOpenAIServer() as server:
        generator = OpenAICompatGenerator(server.base_url, model="llama3.2", api_key="sk-test")
        async with contextlib.aclosing(generator):
            await collect(generator, request())
            await generator.available_models()
            await collect(generator, request(max_tokens=64))

    posts = [r for r in server.requests if r.method == "POST"]
    get = next(r for r in server.requests if r.method == "GET")
    for sent in posts:
        assert sent.headers["user-agent"] == "ragsvc" and sent.headers["authorization"] == "Bearer sk-test"
        assert sent.headers["accept"] == "text/event-stream" and sent.headers["content-type"] == "application/json"
    # Each body's own length (httpx sets it on the request's copy of the headers, never on the ones kept).
    lengths = [len(json.dumps(r.body, ensure_ascii=False, separators=(",", ":")).encode()) for r in posts]
    assert [int(r.headers["content-length"]) for r in posts] == lengths and lengths[0] < lengths[1]
    assert get.headers["accept"] == "application/json" and "content-type" not in get.headers
    assert get.headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("status", "retry_after", "retry_after_s"),
    [(500, None, 1.0), (503, None, 1.0), (503, "7", 7.0), (429, "3", 3.0)],
)
async def test_retry_after_is_kept_for_the_client(status: int, retry_after: str | None, retry_after_s: float) -> None:
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

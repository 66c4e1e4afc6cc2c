"""OllamaGenerator's own protocol against the scripted Ollama server on a real socket. What it shares with the
OpenAI-compatible generator (streaming, errors, availability, hanging up) is in test_http_generators.py."""

from __future__ import annotations

import contextlib

import pytest

from ragsvc.domain import ChatMessage, GenerationDelta, GenerationRequest, Role, Usage
from ragsvc.generation.ollama import OllamaGenerator
from tests.support.ollama_server import ScriptedOllamaServer

MESSAGES = (ChatMessage(Role.SYSTEM, "Be brief."), ChatMessage(Role.USER, "Which port?"))
WINDOWS = {"llama3.2": 8192, "qwen3:8b": 32768}


def request(**fields: object) -> GenerationRequest:
    values: dict[str, object] = {
        "messages": MESSAGES,
        "query": "Which port?",
        "context": (),
        "model": "",
        "max_tokens": 0,
    } | fields
    return GenerationRequest(**values)  # type: ignore[arg-type]


async def collect(generator: OllamaGenerator, req: GenerationRequest) -> list[GenerationDelta]:
    return [delta async for delta in generator.generate(req)]


async def test_sends_the_ollama_chat_request_with_the_model_window() -> None:
    async with ScriptedOllamaServer(models=("llama3.2:latest", "qwen3:8b")) as server:
        generator = OllamaGenerator(server.base_url, model="llama3.2", context_windows=WINDOWS, keep_alive="10m")
        async with contextlib.aclosing(generator):
            await collect(generator, request(model="qwen3:8b", max_tokens=2048, temperature=0.0, seed=42))

    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/api/chat")
    assert sent.headers["accept"] == "application/x-ndjson"
    assert sent.body == {
        "model": "qwen3:8b",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Which port?"}],
        "stream": True,
        "keep_alive": "10m",
        "options": {"num_ctx": 32768, "num_predict": 2048, "temperature": 0.0, "seed": 42},
    }


async def test_defaults_to_its_model_and_omits_unset_options() -> None:
    async with ScriptedOllamaServer() as server:
        generator = OllamaGenerator(server.base_url, model="llama3.2", context_windows=WINDOWS)
        async with contextlib.aclosing(generator):
            deltas = await collect(generator, request())

    assert "".join(d.text for d in deltas) == "Hello, world."
    assert deltas[-1].usage == Usage(prompt_tokens=4, completion_tokens=4)
    body = server.requests[0].body
    assert body["model"] == "llama3.2" and body["keep_alive"] == "5m"
    assert body["options"] == {"num_ctx": 8192}, "the window is always sent: Ollama's own default is small"


@pytest.mark.parametrize(("keep_alive", "sent"), [("5m", "5m"), ("-1", -1), ("300", 300), ("1.5", 1.5), ("0", 0)])
async def test_keep_alive_is_a_duration_or_seconds(keep_alive: str, sent: object) -> None:
    async with ScriptedOllamaServer() as server:
        generator = OllamaGenerator(server.base_url, model="llama3.2", keep_alive=keep_alive)
        async with contextlib.aclosing(generator):
            await collect(generator, request())
    assert server.requests[0].body["keep_alive"] == sent


async def test_lists_models_from_tags() -> None:
    async with ScriptedOllamaServer(models=("llama3.2:latest", "qwen3:8b"), embedding_models=()) as server:
        async with contextlib.aclosing(OllamaGenerator(server.base_url, model="llama3.2")) as generator:
            assert await generator.available_models() == ["llama3.2:latest", "qwen3:8b"]
            await generator.ensure_available("llama3.2")  # "llama3.2" is "llama3.2:latest"
            await generator.ensure_available("qwen3:8b")
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/api/tags")] * 2

"""A scripted Ollama server on a real socket, for tests (no Ollama server can be installed where they run).

It speaks the parts of Ollama's HTTP API that ragsvc uses, over HTTP/1.1 with keep-alive:

- ``GET /``: ``Ollama is running``; ``GET /api/version``: ``{"version": ...}``
- ``GET /api/tags``: ``{"models": [{"name": "llama3.2:latest", "model": ..., "details": {...}}, ...]}``
- ``POST /api/embed`` with ``input`` a string or a list of strings: ``{"model", "embeddings": [[...]],
  "total_duration", "load_duration", "prompt_eval_count"}``; vectors from ``embed`` (default: the OpenAI scripted
  server's `hashed_embedding`).
- ``POST /api/chat``: with ``stream`` true (Ollama's default) an ``application/x-ndjson`` stream, one
  ``{"model", "created_at", "message": {"role": "assistant", "content": delta}, "done": false}`` line per scripted
  delta, then a ``"done": true`` line with ``done_reason``, ``prompt_eval_count``, ``eval_count`` and durations;
  with ``stream`` false one JSON object with the whole message.

A model is served when its name, or its name with ``:latest`` added, is listed in ``models`` (chat) or
``embedding_models`` (embed); any other gets Ollama's 404 ``{"error": "model \\"x\\" not found, try pulling it
first"}``. ``status`` answers every request with that status and an ``{"error": ...}`` body (``model_status`` the
chats of one model); ``fault`` makes an answer go wrong after ``fault_after`` deltas (see `Fault`; for /api/embed
STALL and GARBAGE apply at once). The connection handling, recording, delays and faults are
`tests.support.http_server`'s, shared with the scripted OpenAI-compatible server.

The connection handling, recording, delays and faults are `tests.support.http_server`'s, shared with the scripted
OpenAI server; like it, the server records ``requests``, ``streams`` and ``connections``::

    async with ScriptedOllamaServer(deltas=["Hi", "!"]) as server:
        ...  # point a client at server.base_url ("http://127.0.0.1:PORT")
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any

from tests.support.http_server import (
    Deltas,
    Fault,
    Outcome,
    RecordedRequest,
    ScriptedHTTPServer,
    StreamRecord,
    _end_chunks,
    _forever,
    _head,
    _send_chunk,
    _send_json,
    hashed_embedding,
)

VERSION = "0.12.0"


class ScriptedOllamaServer(ScriptedHTTPServer):
    """An Ollama server answering from a script; an async context manager serving on 127.0.0.1.

    - ``models``: the chat models served; ``embedding_models`` and ``embed``: the embedding models served and the
      function giving their vectors.
    - and `ScriptedHTTPServer`'s: ``deltas``, delays, ``status``, ``model_status``, ``fault``.
    """

    answer_paths = ("/api/chat",)

    def __init__(
        self,
        *,
        deltas: Deltas = ("Hello", ",", " world", "."),
        models: Sequence[str] = ("llama3.2:latest",),
        embedding_models: Sequence[str] = ("nomic-embed-text:latest",),
        embed: Callable[[str], list[float]] | None = None,
        first_token_delay_s: float = 0.0,
        token_delay_s: float = 0.0,
        status: int | None = None,
        model_status: dict[str, int] | None = None,
        fault: Fault | None = None,
        fault_after: int = 0,
        **failures: Any,
    ) -> None:
        """`failures`: `ScriptedHTTPServer`'s ``fail_next``, ``fail_status``, ``fail_retry_after``, ``idle_close_s``,
        ``close_after_answer``."""
        super().__init__(
            deltas=deltas,
            first_token_delay_s=first_token_delay_s,
            token_delay_s=token_delay_s,
            status=status,
            model_status=model_status,
            fault=fault,
            fault_after=fault_after,
            **failures,
        )
        self.models = list(models)
        self.embedding_models = list(embedding_models)
        self.embed = embed or hashed_embedding

    @property
    def base_url(self) -> str:
        """Ollama's root, as OLLAMA_BASE_URL takes it: ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ScriptedOllamaServer:
        return await super().__aenter__()

    async def _respond(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        if self.status is not None:
            await _send_error(writer, self.status)
            return True
        route = (request.method, request.path)
        if route == ("GET", "/"):
            body = b"Ollama is running"
            writer.write(_head(200, {"Content-Type": "text/plain", "Content-Length": str(len(body))}) + body)
            await writer.drain()
        elif route == ("GET", "/api/version"):
            await _send_json(writer, 200, {"version": VERSION})
        elif route == ("GET", "/api/tags"):
            models = [_model_entry(name) for name in self.models + self.embedding_models]
            await _send_json(writer, 200, {"models": models})
        elif route == ("POST", "/api/embed"):
            await self._embed(request, writer)
        elif route == ("POST", "/api/chat"):
            return await self._chat(request, writer)
        else:
            await _send_json(writer, 404, {"error": "404 page not found"})
        return True

    async def _embed(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> None:
        body = request.body
        if not isinstance(body, dict):
            await _send_json(writer, 400, {"error": "invalid request body"})
            return
        model = str(body.get("model", ""))
        if not _served(model, self.embedding_models):
            await _send_json(writer, 404, {"error": f'model "{model}" not found, try pulling it first'})
            return
        if (status := _status_for(model, self.model_status)) is not None:
            await _send_error(writer, status)
            return
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            await _send_json(writer, 400, {"error": "invalid input type"})
            return
        if self.fault is Fault.STALL:
            await _forever()
        if self.fault is Fault.GARBAGE:
            writer.write(_head(200, {"Content-Type": "application/json", "Content-Length": "9"}) + b"{not json")
            await writer.drain()
            return
        answer = {
            "model": model,
            "embeddings": [self.embed(t) for t in texts],
            "total_duration": 1_000_000,
            "load_duration": 100_000,
            "prompt_eval_count": sum(len(t.split()) for t in texts),
        }
        await _send_json(writer, 200, answer)

    async def _chat(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            await _send_json(writer, 400, {"error": "invalid request body: messages required"})
            return True
        model = str(body.get("model", ""))
        if not _served(model, self.models):
            await _send_json(writer, 404, {"error": f'model "{model}" not found, try pulling it first'})
            return True
        if (status := _status_for(model, self.model_status)) is not None:
            await _send_error(writer, status)
            return True
        deltas = self.scripted_deltas(body)
        prompt_tokens = sum(len(str(message.get("content", "")).split()) for message in body["messages"])
        if body.get("stream", True):
            writer.write(_head(200, {"Content-Type": "application/x-ndjson"}, chunked=True))
            record = StreamRecord(request=request, head_sent_at=time.monotonic())

            async def send(line: str) -> None:
                await _send_chunk(writer, (line + "\n").encode())

            async def send_delta(text: str) -> None:
                message = {"role": "assistant", "content": text}
                await send(json.dumps({"model": model, "created_at": _now(), "message": message, "done": False}))

            error = json.dumps({"error": "llama runner process has terminated: exit status 2"})
            outcome = await self._stream_deltas(record, deltas, send_delta, send, error)
            if outcome is Outcome.DROPPED:
                return False
            if outcome is Outcome.FINISHED:
                final = _final(model, {"role": "assistant", "content": ""}, prompt_tokens, len(deltas))
                await send(json.dumps(final))
            await _end_chunks(writer)
            record.completed = outcome is Outcome.FINISHED
            return True
        await asyncio.sleep(self.first_token_delay_s + self.token_delay_s * max(len(deltas) - 1, 0))
        if self.fault is Fault.STALL:
            await _forever()
        if self.fault is Fault.DISCONNECT:
            return False
        message = {"role": "assistant", "content": "".join(deltas)}
        await _send_json(writer, 200, _final(model, message, prompt_tokens, len(deltas)))
        return True


def _served(model: str, served: Sequence[str]) -> bool:
    return model in served or f"{model}:latest" in served


def _status_for(model: str, statuses: dict[str, int]) -> int | None:
    return statuses.get(model, statuses.get(f"{model}:latest"))


async def _send_error(writer: asyncio.StreamWriter, status: int) -> None:
    await _send_json(writer, status, {"error": HTTPStatus(status).phrase.lower()})


def _model_entry(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": "2026-01-01T00:00:00Z",
        "size": 1_000_000,
        "digest": "0" * 64,
        "details": {
            "format": "gguf",
            "family": name.split(":")[0],
            "parameter_size": "1B",
            "quantization_level": "Q4_0",
        },
    }


def _final(model: str, message: dict[str, str], prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "created_at": _now(),
        "message": message,
        "done": True,
        "done_reason": "stop",
        "total_duration": 1_000_000,
        "load_duration": 100_000,
        "prompt_eval_count": prompt_tokens,
        "prompt_eval_duration": 200_000,
        "eval_count": completion_tokens,
        "eval_duration": 700_000,
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

"""A scripted OpenAI-compatible HTTP server on a real socket, for tests and benchmarks.

It speaks the parts of the OpenAI HTTP API that ragsvc uses, over HTTP/1.1 with keep-alive, on asyncio
streams only:

- ``GET /v1/models``: ``{"object": "list", "data": [{"id": ..., "object": "model", ...}]}``
- ``GET /health``: ``{"status": "ok"}``
- ``GET /props`` (beside the API root, as llama.cpp serves it): ``{"total_slots": N}`` when ``total_slots`` is set;
  404 otherwise, as from a server that is not llama.cpp.
- ``POST /v1/chat/completions`` with ``stream: true``: a chunked ``text/event-stream`` of
  ``chat.completion.chunk`` events (a role chunk, one chunk per scripted delta, a chunk with
  ``finish_reason: "stop"``, a usage chunk with ``choices: []`` when ``stream_options.include_usage`` is
  true), then ``data: [DONE]``. With ``stream: false``, one ``chat.completion``. A model the server does
  not list gets the 404 ``model_not_found`` error OpenAI answers.

- ``POST /v1/embeddings``: ``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}],
  "model": ..., "usage": ...}`` for a string or a list of strings ``input``; the vectors come from ``embed``
  (default `hashed_embedding`: similar texts get similar vectors). The model must be listed in
  ``embedding_models``, else the 404 ``model_not_found`` error.

Reported usage: ``prompt_tokens`` is the number of whitespace-separated words in the request's messages,
``completion_tokens`` the number of deltas sent. The connection handling, recording, delays and faults are
`tests.support.http_server`'s, shared with the scripted Ollama server.

A test scripts the answers through the constructor's keyword arguments, which are also public attributes it
may change between requests, and reads back what the server saw: ``requests``, ``streams`` and
``connections``. Every time is a ``time.monotonic()`` reading, so it compares with the test's own::

    async with ScriptedOpenAIServer(deltas=["Hello", " world"], token_delay_s=0.05) as server:
        ...  # point a client at server.base_url ("http://127.0.0.1:PORT/v1")
        stream = server.streams[0]
        await asyncio.wait_for(stream.request.connection.closed.wait(), 1.0)
        assert stream.request.connection.closed_by == "client"
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from tests.support.http_server import (
    ConnectionRecord,
    Delay,
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

__all__ = ["ConnectionRecord", "Deltas", "Fault", "RecordedRequest", "ScriptedOpenAIServer", "StreamRecord",
           "hashed_embedding"]


class ScriptedOpenAIServer(ScriptedHTTPServer):
    """An OpenAI-compatible server answering from a script; an async context manager serving on 127.0.0.1.

    - ``models``: the model ids served; a completion for any other model gets a 404 ``model_not_found``.
    - ``retry_after``: with ``status`` (or ``model_status``), the ``Retry-After`` header sent (seconds or an
      HTTP date).
    - ``total_slots``: the slots ``GET /props`` reports (None: no such route).
    - ``embedding_models`` and ``embed``: the embedding models served and the function giving their vectors.
    - and `ScriptedHTTPServer`'s: ``deltas``, delays, ``status``, ``model_status``, ``fault``.
    """

    answer_paths = ("/v1/chat/completions",)

    def __init__(
        self,
        *,
        deltas: Deltas = ("Hello", ",", " world", "."),
        models: Sequence[str] = ("llama3.2",),
        first_token_delay_s: Delay = 0.0,
        token_delay_s: float = 0.0,
        status: int | None = None,
        model_status: dict[str, int] | None = None,
        retry_after: str | None = None,
        fault: Fault | None = None,
        fault_after: int = 0,
        embedding_models: Sequence[str] = ("text-embedding-3-small",),
        embed: Callable[[str], list[float]] | None = None,
        total_slots: int | None = None,
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
        self.total_slots = total_slots
        self.models = list(models)
        self.retry_after = retry_after
        self.embedding_models = list(embedding_models)
        self.embed = embed or hashed_embedding
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """The OpenAI API root, as clients take it: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> ScriptedOpenAIServer:
        return await super().__aenter__()

    async def _respond(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        """Answers one request; False when the connection must close after it."""
        if self.status is not None:
            await self._send_error(writer, self.status)
            return True
        route = (request.method, request.path)
        if route == ("GET", "/health"):
            await _send_json(writer, 200, {"status": "ok"})
        elif route == ("GET", "/props") and self.total_slots is not None:
            await _send_json(writer, 200, {"total_slots": self.total_slots, "model_alias": self.models[0]})
        elif route == ("GET", "/v1/models"):
            data = [{"id": model, "object": "model", "created": 0, "owned_by": "scripted"} for model in self.models]
            await _send_json(writer, 200, {"object": "list", "data": data})
        elif route == ("POST", "/v1/embeddings"):
            await self._embeddings(request, writer)
        elif route == ("POST", "/v1/chat/completions"):
            return await self._complete(request, writer)
        else:
            await _send_json(writer, 404, _error_body(f"no route {request.method} {request.path}", "not_found", None))
        return True

    async def _send_error(self, writer: asyncio.StreamWriter, status: int) -> None:
        headers = {} if self.retry_after is None else {"Retry-After": self.retry_after}
        kind = "server_error" if status >= 500 else "invalid_request_error"
        code = "rate_limit_exceeded" if status == 429 else None
        await _send_json(writer, status, _error_body(HTTPStatus(status).phrase, kind, code), headers)

    async def _embeddings(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> None:
        body = request.body
        texts = body.get("input") if isinstance(body, dict) else None
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            message = "input must be a non-empty string or list of strings"
            await _send_json(writer, 400, _error_body(message, "invalid_request_error", None))
            return
        model = body.get("model")
        if model not in self.embedding_models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            await _send_json(writer, 404, _error_body(message, "invalid_request_error", "model_not_found"))
            return
        if self.fault is Fault.STALL:
            await _forever()
        if self.fault is Fault.GARBAGE:
            writer.write(_head(200, {"Content-Type": "application/json", "Content-Length": "9"}) + b"{not json")
            await writer.drain()
            return
        data = [{"object": "embedding", "index": i, "embedding": self.embed(t)} for i, t in enumerate(texts)]
        tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        await _send_json(writer, 200, {"object": "list", "data": data, "model": model, "usage": usage})

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
        if model in self.model_status:
            await self._send_error(writer, self.model_status[model])
            return True
        deltas = self.scripted_deltas(body)
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
        base: dict[str, Any] = {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion.chunk"}
        base |= {"created": int(time.time()), "model": model}
        if include_usage:
            base["usage"] = None  # as OpenAI sends it on every chunk but the usage chunk

        async def send(event: str) -> None:
            await _send_chunk(writer, f"data: {event}\n\n".encode())

        def chunk(delta: dict[str, str], finish_reason: str | None = None) -> str:
            return json.dumps(base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

        async def send_delta(text: str) -> None:
            await send(chunk({"content": text}))

        await send(chunk({"role": "assistant", "content": ""}))
        error = json.dumps(_error_body("the model runner crashed", "server_error", None))
        outcome = await self._stream_deltas(record, deltas, send_delta, send, error)
        if outcome is Outcome.DROPPED:
            return False
        if outcome is Outcome.FINISHED:
            await send(chunk({}, "stop"))
            if include_usage:
                usage = _usage(prompt_tokens, len(deltas))
                await send(json.dumps(base | {"choices": [], "usage": usage}))
            await send("[DONE]")
        await _end_chunks(writer)
        record.completed = outcome is Outcome.FINISHED
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


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    total = prompt_tokens + completion_tokens
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": total}


def _error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def replies_by_prompt(answers: Iterable[str], routes: Mapping[str, str]) -> Callable[[dict[str, Any]], list[str]]:
    """Deltas that depend on what the last message asks: the reply of the first `routes` key found in it (an
    auxiliary prompt: a rating, follow-ups, a classification), else the next of `answers`, split into words."""
    replies = iter(answers)

    def deltas(body: dict[str, Any]) -> list[str]:
        prompt = body["messages"][-1]["content"]
        routed = next((reply for marker, reply in routes.items() if marker in prompt), None)
        return [routed] if routed is not None else re.findall(r"\S+\s*", next(replies))

    return deltas


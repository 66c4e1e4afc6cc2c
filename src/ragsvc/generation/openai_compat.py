"""A generator over any OpenAI-compatible chat completions server (vLLM, llama.cpp, Ollama's /v1, OpenAI):
`POST /chat/completions` streamed as server-sent events, `GET /models` for availability and health, and llama.cpp's
`GET /props` (beside the API root) for its slots. The HTTP side and its error mapping are shared with the Ollama
generator (`ragsvc.generation.http`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import httpx

from ragsvc.domain import GenerationDelta, GenerationRequest, Usage
from ragsvc.errors import LLMUnavailable
from ragsvc.generation.http import (
    BadResponse,
    ErrorEvent,
    HttpGenerator,
    lines,
    read_delta,
    upstream_errors,
)
from ragsvc.generation.retry import RetryPolicy


class OpenAICompatGenerator(HttpGenerator):
    """Streams chat completions from `base_url`, the API root (e.g. "http://127.0.0.1:8080/v1"); `api_key`,
    when set, is sent as a bearer token. See HttpGenerator for the timeouts and the transport."""

    kind = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str = "",
        timeout_s: float = 30.0,
        models_ttl_s: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            model=model,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout_s=timeout_s,
            models_ttl_s=models_ttl_s,
            retry=retry,
            transport=transport,
        )

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """Yields, per network read, the content of the events that arrived in it as one delta (a burst of tokens
        costs one), with the usage in the read that reports it. A broken or error event is raised after the text
        that came before it. Closing this generator (or cancelling its consumer) closes the response, releasing
        the upstream."""
        payload = self._payload(request)
        stream = _Chunks()
        with upstream_errors(payload["model"]):
            async with (
                self._turn(request),
                self._post_stream(
                    "/chat/completions", payload, accept="text/event-stream", deadline=request.deadline
                ) as response,
            ):
                # One JSON chunk per `data:` line; the blank lines between events, comments and other SSE fields
                # carry nothing. After [DONE] the body is read to its end, so the connection goes back to the pool.
                async for read in lines(response):
                    if stream.done:
                        continue
                    events = [line[5:].strip() for line in read if line.startswith(b"data:")]
                    if b"[DONE]" in events:
                        stream.done = True
                        del events[events.index(b"[DONE]") :]
                    delta, failure = read_delta(events, "an event", stream)
                    if delta is not None:
                        yield delta
                    if failure is not None:
                        raise failure
                if not (stream.done or stream.finished):
                    raise BadResponse("the stream ended before the model finished its answer")

    async def available_models(self, *, retries: bool = True) -> list[str]:
        """The model ids the server lists (`GET /models`)."""
        body = await self._get_json("/models", retries=retries)
        with upstream_errors(None):
            try:
                return [str(model["id"]) for model in body["data"]]
            except (KeyError, TypeError) as exc:
                raise BadResponse(f"the model list is not an OpenAI list: {str(body)[:80]!r}") from exc

    async def reported_slots(self) -> int | None:
        """llama.cpp's `total_slots` (`GET /props` beside the API root); None from a server without it."""
        url = httpx.URL(self._base_url.removesuffix("/v1") + "/props")
        try:
            props = await self._get_json(url, retries=False)
        except LLMUnavailable as exc:
            if isinstance(exc.__cause__, httpx.HTTPStatusError) and exc.__cause__.response.status_code < 500:
                return None  # not llama.cpp: no such document
            raise
        slots = props.get("total_slots") if isinstance(props, dict) else None
        return slots if isinstance(slots, int) and slots > 0 else None

    def _payload(self, request: GenerationRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": request.model or self._model,
            "messages": [{"role": message.role.value, "content": message.content} for message in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.max_tokens > 0:
            payload["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            payload["temperature"] = request.temperature
        if request.seed is not None:
            payload["seed"] = request.seed
        if request.stop:
            payload["stop"] = list(request.stop)
        return payload


class _Chunks:
    """What a stream of chat.completion.chunk events said besides its text: the usage, whether the answer finished,
    whether [DONE] came."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.finished = False
        self.done = False

    def read(self, chunk: Any, data: bytes) -> str:
        """One event (`data` parsed): its content delta."""
        if not isinstance(chunk, dict):
            raise BadResponse(f"an event is not a JSON object: {data[:80]!r}")
        if "error" in chunk or chunk.get("object") == "error":
            raise ErrorEvent(f"error event: {data[:200].decode(errors='replace')}")
        try:
            choice = (chunk.get("choices") or [{}])[0]
            text = (choice.get("delta") or {}).get("content") or ""
            if reported := chunk.get("usage"):
                self.usage = Usage(int(reported["prompt_tokens"]), int(reported["completion_tokens"]))
            self.finished = self.finished or choice.get("finish_reason") is not None
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise BadResponse(f"an event is not a chat.completion.chunk: {data[:80]!r}") from exc
        if not isinstance(text, str):
            raise BadResponse(f"delta content is not text: {data[:80]!r}")
        return text

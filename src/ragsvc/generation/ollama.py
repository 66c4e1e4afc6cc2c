"""A generator over Ollama's native API: `POST /api/chat` streamed as newline-delimited JSON, `GET /api/tags`
for availability and health. The HTTP side and its error mapping are shared with the OpenAI-compatible
generator (`ragsvc.generation.http`).

Ollama cuts a prompt longer than the model's `num_ctx` (its default is small) from the front, silently
dropping the system prompt, so every request sets `num_ctx` to the model's window from the model table: the
token budget has already made the prompt fit that window.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx

from ragsvc.domain import GenerationDelta, GenerationRequest, Usage
from ragsvc.generation.http import (
    BadResponse,
    ErrorEvent,
    HttpGenerator,
    lines,
    read_delta,
    upstream_errors,
)
from ragsvc.generation.retry import RetryPolicy


class OllamaGenerator(HttpGenerator):
    """Streams chats from the Ollama server at `base_url` (e.g. "http://localhost:11434").

    `context_windows` maps each model to the window sent as `num_ctx`; `keep_alive` is how long Ollama keeps
    the model loaded after a request (a duration such as "5m", or seconds; "-1" keeps it loaded). See
    HttpGenerator for the timeouts and the transport.
    """

    kind = "ollama"

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        context_windows: Mapping[str, int] | None = None,
        keep_alive: str = "5m",
        timeout_s: float = 30.0,
        models_ttl_s: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, model=model, timeout_s=timeout_s, models_ttl_s=models_ttl_s, retry=retry, transport=transport)
        self._context_windows = dict(context_windows or {})
        self._keep_alive = _keep_alive(keep_alive)

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """Yields, per network read, the content of the objects that arrived in it as one delta (a burst of tokens
        costs one), with the usage from the final object. A broken or error line is raised after the text that
        came before it. Closing this generator (or cancelling its consumer) closes the response, releasing the
        upstream."""
        payload = self._payload(request)
        stream = _Objects()
        with upstream_errors(payload["model"]):
            async with (
                self._turn(request),
                self._post_stream("/api/chat", payload, accept="application/x-ndjson", deadline=request.deadline) as response,
            ):
                async for read in lines(response):
                    delta, failure = read_delta([line for line in read if line.strip()], "a line", stream)
                    if delta is not None:
                        yield delta
                    if failure is not None:
                        raise failure
                if stream.usage is None:
                    raise BadResponse("the stream ended before the model finished its answer")

    async def available_models(self, *, retries: bool = True) -> list[str]:
        """The model names the server has pulled (`GET /api/tags`), e.g. "llama3.2:latest"."""
        body = await self._get_json("/api/tags", retries=retries)
        with upstream_errors(None):
            try:
                return [str(model["name"]) for model in body["models"]]
            except (KeyError, TypeError) as exc:
                raise BadResponse(f"the model list is not Ollama's: {str(body)[:80]!r}") from exc

    def _payload(self, request: GenerationRequest) -> dict[str, Any]:
        model = request.model or self._model
        options: dict[str, Any] = {}
        if model in self._context_windows:
            options["num_ctx"] = self._context_windows[model]
        if request.max_tokens > 0:
            options["num_predict"] = request.max_tokens
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.seed is not None:
            options["seed"] = request.seed
        if request.stop:
            options["stop"] = list(request.stop)
        return {
            "model": model,
            "messages": [{"role": message.role.value, "content": message.content} for message in request.messages],
            "stream": True,
            "keep_alive": self._keep_alive,
            "options": options,
        }


def _keep_alive(value: str) -> str | float:
    """Ollama takes a duration string ("5m", "1h") or a number of seconds (negative: forever)."""
    try:
        return float(value) if "." in value else int(value)
    except ValueError:
        return value


class _Objects:
    """What a chat stream's NDJSON objects said besides their text: the usage, once the final (`done`) one came."""

    def __init__(self) -> None:
        self.usage: Usage | None = None

    def read(self, item: Any, line: bytes) -> str:
        """One object (`line` parsed): its content."""
        if self.usage is not None:
            raise BadResponse(f"data after the final object: {line[:80]!r}")
        if not isinstance(item, dict):
            raise BadResponse(f"a line is not a JSON object: {line[:80]!r}")
        if "error" in item:
            raise ErrorEvent(f"error in the stream: {str(item['error'])[:200]}")
        try:
            text = (item.get("message") or {}).get("content") or ""
            if item.get("done"):
                self.usage = Usage(int(item.get("prompt_eval_count", 0)), int(item.get("eval_count", 0)))
        except (AttributeError, TypeError, ValueError) as exc:
            raise BadResponse(f"a line is not a chat response: {line[:80]!r}") from exc
        if not isinstance(text, str):
            raise BadResponse(f"message content is not text: {line[:80]!r}")
        return text

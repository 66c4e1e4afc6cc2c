"""A generator over any OpenAI-compatible chat completions server (vLLM, llama.cpp, Ollama, OpenAI), streamed
with httpx. HTTP stays in this module: `_upstream_errors` is the one place its failures become ragsvc errors."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ragsvc.domain import GenerationDelta, GenerationRequest, Usage
from ragsvc.errors import LLMTimeout, LLMUnavailable, ModelUnavailable, RagError

_CONNECT_TIMEOUT_S = 5.0
_PROBE_TIMEOUT_S = 5.0
# OpenAI's error code, vLLM's and OpenAI's "The model `x` does not exist", Ollama's `model "x" not found`.
_MODEL_MISSING = re.compile(r"model_not_found|\bmodel\b.*\b(does not exist|not found)", re.IGNORECASE)


class OpenAICompatGenerator:
    """Streams chat completions from `base_url` (the API root, e.g. "http://127.0.0.1:8080/v1").

    `timeout_s` bounds each wait for the server (the response head, then every chunk); connecting is bounded
    by 5 s. `client` is used as given and left open by `aclose`; by default the generator owns its own.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str = "",
        timeout_s: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, _CONNECT_TIMEOUT_S))
        self._probe_timeout = httpx.Timeout(min(timeout_s, _PROBE_TIMEOUT_S))
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()

    @property
    def name(self) -> str:
        return f"openai:{self._model}"

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]:
        """Yields each content delta as it arrives, then one delta with the usage when the server reports it.
        Closing this generator (or cancelling its consumer) closes the response, releasing the upstream."""
        payload = self._payload(request)
        usage: Usage | None = None
        finished = done = False
        with _upstream_errors(payload["model"]):
            async with self._client.stream(
                "POST",
                f"{self._base_url}/chat/completions",
                json=payload,
                headers={**self._headers, "Accept": "text/event-stream"},
                timeout=self._timeout,
            ) as response:
                if response.is_error:
                    await response.aread()
                    response.raise_for_status()
                # One JSON chunk per `data:` line; blank lines, comments and other SSE fields carry nothing.
                # After [DONE] the body is read to its end, so the connection goes back to the pool.
                async for line in response.aiter_lines():
                    if done or not line.startswith("data:"):
                        continue
                    data = line.removeprefix("data:").strip()
                    if data == "[DONE]":
                        done = True
                        continue
                    chunk = _parse_chunk(data)
                    if chunk.text:
                        yield GenerationDelta(text=chunk.text)
                    usage = chunk.usage or usage
                    finished = finished or chunk.finished
                if not (done or finished):
                    raise _BadResponse("the stream ended before the model finished its answer")
        if usage is not None:
            yield GenerationDelta(usage=usage)

    async def available_models(self) -> list[str]:
        """The model ids the server lists."""
        with _upstream_errors(None):
            response = await self._client.get(
                f"{self._base_url}/models", headers=self._headers, timeout=self._probe_timeout
            )
            response.raise_for_status()
            return _model_ids(response)

    async def check_health(self) -> None:
        """Returns when the server answers and serves the default model; raises LLMUnavailable when it cannot
        be reached or fails, ModelUnavailable when it does not list the model."""
        served = await self.available_models()
        # Ollama lists "llama3.2" as "llama3.2:latest".
        if self._model not in served and f"{self._model}:latest" not in served:
            raise ModelUnavailable(
                f"model {self._model!r} is not served at {self._base_url} (it serves: {', '.join(served) or 'none'})",
                metadata={"model": self._model},
            )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

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
        return payload


class _BadResponse(Exception):
    """The server answered, but not as the OpenAI API specifies, or with an error event mid-stream."""


@dataclass(frozen=True, slots=True)
class _Chunk:
    text: str
    finished: bool
    usage: Usage | None


@contextlib.contextmanager
def _upstream_errors(model: str | None) -> Iterator[None]:
    """Maps httpx and protocol failures to ragsvc errors. `model` names the model of a completion in flight:
    then a 404 means the model is not served and a timeout is the generation's. Without it (listing the
    models) both mean the server cannot serve."""
    try:
        yield
    except httpx.ConnectTimeout as exc:
        raise LLMUnavailable(f"cannot connect to the LLM server: {exc!r}") from exc
    except httpx.TimeoutException as exc:
        if model is None:
            raise LLMUnavailable(f"the LLM server did not answer in time: {exc!r}") from exc
        raise LLMTimeout("generation", f"the LLM server went silent: {exc!r}") from exc
    except httpx.HTTPStatusError as exc:
        raise _status_error(exc.response, model) from exc
    except httpx.HTTPError as exc:
        raise LLMUnavailable(f"the LLM server cannot be reached or failed: {exc!r}") from exc
    except _BadResponse as exc:
        raise LLMUnavailable(f"the LLM server answered badly: {exc}") from exc


def _status_error(response: httpx.Response, model: str | None) -> RagError:
    """The error for a non-2xx answer (its body already read)."""
    message = _error_message(response)
    if model is not None and (response.status_code == 404 or _MODEL_MISSING.search(response.text)):
        return ModelUnavailable(f"model {model!r} is not served: {message}", metadata={"model": model})
    detail = f"the LLM server answered {response.status_code}: {message}"
    retry_after_s = _retry_after_s(response.headers.get("retry-after"))
    if retry_after_s is None:
        return LLMUnavailable(detail)
    return LLMUnavailable(detail, retry_after_s=retry_after_s)


def _error_message(response: httpx.Response) -> str:
    """The message of an OpenAI-style error body (`{"error": {"message": ...}}` or `{"error": "..."}`)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    if isinstance(error, str):
        return error
    return response.text[:200] or response.reason_phrase


def _retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header, in delta-seconds or as an HTTP date."""
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _parse_chunk(data: str) -> _Chunk:
    """Reads one chat.completion.chunk event."""
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise _BadResponse(f"an event is not JSON: {data[:80]!r}") from exc
    if not isinstance(chunk, dict):
        raise _BadResponse(f"an event is not a JSON object: {data[:80]!r}")
    if "error" in chunk or chunk.get("object") == "error":
        raise _BadResponse(f"error event: {data[:200]}")
    try:
        choices = chunk.get("choices") or [{}]
        delta = choices[0].get("delta") or {}
        text = delta.get("content") or ""
        reported = chunk.get("usage")
        usage = (
            Usage(prompt_tokens=int(reported["prompt_tokens"]), completion_tokens=int(reported["completion_tokens"]))
            if reported
            else None
        )
        finished = choices[0].get("finish_reason") is not None
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise _BadResponse(f"an event is not a chat.completion.chunk: {data[:80]!r}") from exc
    if not isinstance(text, str):
        raise _BadResponse(f"delta content is not text: {data[:80]!r}")
    return _Chunk(text=text, finished=finished, usage=usage)


def _model_ids(response: httpx.Response) -> list[str]:
    """The ids of a `{"object": "list", "data": [{"id": ...}]}` body."""
    try:
        return [str(model["id"]) for model in response.json()["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise _BadResponse(f"the model list is not an OpenAI list: {response.text[:80]!r}") from exc

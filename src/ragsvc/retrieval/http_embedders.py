"""Embedders served over HTTP: Ollama's `/api/embed` and any OpenAI-compatible `/v1/embeddings` (vLLM, llama.cpp,
a hosted endpoint). Both batch their texts, retry transient failures briefly, check every vector's dimension and
return unit-length vectors; every failure surfaces as EmbeddingFailed, raised in one place (`_post`)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import httpx

from ragsvc.errors import EmbeddingFailed

RETRY_DELAYS_S = (0.2, 0.8)  # after a connection failure, a 429 or a 5xx
_TRANSIENT = {429, 500, 502, 503, 504}


class _HttpEmbedder:
    path = ""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        dimension: int = 0,
        api_key: str = "",
        timeout_s: float = 30.0,
        batch_size: int = 64,
        retry_delays_s: Sequence[float] = RETRY_DELAYS_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`dimension` 0 means unknown until `probe()` (or the first answer) tells it. A connection failure, a 429
        or a 5xx is retried after each of `retry_delays_s`."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport)
        self._model = model
        self._dimension = dimension
        self._batch_size = batch_size
        self._retry_delays_s = tuple(retry_delays_s)

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model(self) -> str:
        return self._model

    async def probe(self) -> int:
        """Embeds one word to learn (or check) the model's dimension; returns it."""
        await self.embed_query("dimension")
        return self._dimension

    async def check_health(self) -> None:
        """Returns when the server embeds a word; EmbeddingFailed when it cannot."""
        await self.embed_query("health")

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors += await self._embed(list(texts[start : start + self._batch_size]))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed([text]))[0]

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._vectors(await self._post(self._body(texts)), len(texts))
        for vector in vectors:
            if not self._dimension:
                self._dimension = len(vector)
            if len(vector) != self._dimension:
                raise EmbeddingFailed(f"the embedder returned {len(vector)} dimensions, expected {self._dimension}")
        return [_unit(v) for v in vectors]

    async def _post(self, body: dict[str, Any]) -> Any:
        """POSTs `body` to the embedding endpoint and returns the parsed answer; the only place errors become
        EmbeddingFailed."""
        for delay in (*self._retry_delays_s, None):
            try:
                response = await self._client.post(self.path, json=body)
                if response.status_code in _TRANSIENT and delay is not None:
                    await asyncio.sleep(delay)
                    continue
                if response.status_code >= 400:
                    raise EmbeddingFailed(
                        f"the embedder answered {response.status_code}: {_error_text(response)}",
                        metadata={"status": str(response.status_code), "model": self._model},
                    )
                return response.json()
            except (httpx.TransportError, httpx.TimeoutException) as exc:
                if delay is None or isinstance(exc, httpx.TimeoutException):
                    raise EmbeddingFailed(f"the embedder at {self._client.base_url} failed: {exc!r}") from exc
                await asyncio.sleep(delay)
            except ValueError as exc:  # a body that is not JSON
                raise EmbeddingFailed(f"the embedder answered something that is not JSON: {exc}") from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _body(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _vectors(self, answer: Any, expected: int) -> list[list[float]]:
        raise NotImplementedError


class OllamaEmbedder(_HttpEmbedder):
    """Ollama's `POST /api/embed` (`{"model", "input": [...]}` -> `{"embeddings": [[...], ...]}`)."""

    path = "/api/embed"

    def _body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self._model, "input": texts, "truncate": True}

    def _vectors(self, answer: Any, expected: int) -> list[list[float]]:
        vectors = answer.get("embeddings") if isinstance(answer, dict) else None
        return _checked(vectors, expected)


class OpenAIEmbedder(_HttpEmbedder):
    """OpenAI-compatible `POST {base}/embeddings` (`{"model", "input": [...]}` -> `{"data": [{"index", "embedding"}]}`);
    the base URL includes the API root, e.g. http://127.0.0.1:8080/v1."""

    path = "/embeddings"

    def _body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self._model, "input": texts, "encoding_format": "float"}

    def _vectors(self, answer: Any, expected: int) -> list[list[float]]:
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise EmbeddingFailed("the embedder's answer has no data list")
        ordered = sorted(data, key=lambda d: d.get("index", 0))
        return _checked([d.get("embedding") for d in ordered], expected)


def _checked(vectors: Any, expected: int) -> list[list[float]]:
    if not isinstance(vectors, list) or len(vectors) != expected:
        got = len(vectors) if isinstance(vectors, list) else "no"
        raise EmbeddingFailed(f"the embedder returned {got} vectors for {expected} texts")
    checked = []
    for vector in vectors:
        if not isinstance(vector, list) or not vector or not all(isinstance(x, int | float) for x in vector):
            raise EmbeddingFailed("the embedder returned a vector that is not a non-empty list of numbers")
        checked.append([float(x) for x in vector])
    return checked


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbeddingFailed("the embedder returned a zero or non-finite vector")
    return [x / norm for x in vector]


def _error_text(response: httpx.Response) -> str:
    """The error message of an Ollama (`{"error": "..."}`) or OpenAI (`{"error": {"message": ...}}`) answer."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return response.text[:200]
    if isinstance(error, dict):
        return str(error.get("message", error))[:200]
    return str(error)[:200]

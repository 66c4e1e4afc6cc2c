"""The generator interface (after vLLM's EngineClient): `generate()` is an async generator of deltas;
closing it (aclose, or cancelling the task iterating it) aborts the upstream request at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from ragsvc.domain import GenerationDelta, GenerationRequest


class Generator(Protocol):
    """Produces answer text. Raises LLMUnavailable, LLMTimeout, ModelUnavailable."""

    @property
    def name(self) -> str:
        """A short label for logs (e.g. "extractive", "openai:llama3.2")."""
        ...

    def model_name(self, model: str) -> str:
        """What an answer's `model` field says when this generator wrote it with `model`."""
        ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]: ...

    async def ensure_available(self, model: str) -> None:
        """Returns when `model` can be used now; raises ModelUnavailable (not served) or LLMUnavailable."""
        ...

    async def check_health(self) -> None:
        """Returns when the generator can serve; raises LLMUnavailable (unreachable) or ModelUnavailable."""
        ...

    async def aclose(self) -> None: ...

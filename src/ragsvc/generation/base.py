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
        """A short label for logs and the answer's `model` field (e.g. "extractive", "openai:llama3.2")."""
        ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]: ...

    async def check_health(self) -> None:
        """Returns when the generator can serve; raises LLMUnavailable (unreachable) or ModelUnavailable."""
        ...

    async def aclose(self) -> None: ...

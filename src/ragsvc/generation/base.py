"""The generator interface (after vLLM's EngineClient): `generate()` is an async generator of deltas;
closing it (aclose, or cancelling the task iterating it) aborts the upstream request at once."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

from ragsvc.domain import GenerationDelta, GenerationRequest


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a generator can do beyond writing an answer from the packed context."""

    # It follows arbitrary instructions, so it can be asked the short auxiliary questions around an answer
    # (classify the question, rate the answer's support, suggest follow-ups). A language model can; the
    # extractive generator, which only quotes the context, cannot.
    follows_instructions: bool
    # It reads the corpus statistics the question was read with (`GenerationRequest.term_counts`): the extractive
    # generator does, so the question is read before it writes; a language model does not.
    reads_term_counts: bool = False


class Generator(Protocol):
    """Produces answer text. Raises LLMUnavailable, LLMTimeout, ModelUnavailable."""

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def name(self) -> str:
        """A short label for logs (e.g. "extractive", "openai:llama3.2")."""
        ...

    def model_name(self, model: str) -> str:
        """What an answer's `model` field says when this generator wrote it with `model`."""
        ...

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]: ...

    async def ensure_available(self, model: str) -> None:
        """Returns when `model` can be used now; raises ModelUnavailable (not served) or LLMUnavailable."""
        ...

    async def check_health(self) -> None:
        """Returns when the generator can serve; raises LLMUnavailable (unreachable) or ModelUnavailable."""
        ...

    async def slots(self) -> int | None:
        """How many requests its server decodes at once, as the server reports it; None when it reports nothing
        (or there is no server). See `generation/slots.py`."""
        ...

    async def aclose(self) -> None: ...

"""A generator that calls no LLM: the answer is the context's sentences that the reader (ragsvc.reading) finds
best answer the question, each followed by the citation marker of its chunk."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

from ragsvc.domain import GenerationDelta, GenerationRequest, Usage
from ragsvc.generation.base import Capabilities
from ragsvc.reading import Reader
from ragsvc.reading.relevance import quoted_answer

# The whole answer when no sentence of the context shares a content term with the query.
FALLBACK = "I don't have information about that in the available documentation."

_WORD = re.compile(r"\S+\s*")


class ExtractiveGenerator:
    """Answers from the packed context alone; cheap and deterministic."""

    def __init__(self, reader: Reader, *, max_sentences: int = 3) -> None:
        if max_sentences < 1:
            raise ValueError("max_sentences must be at least 1")
        self._reader = reader
        self._max_sentences = max_sentences

    capabilities = Capabilities(follows_instructions=False, reads_term_counts=True)

    @property
    def name(self) -> str:
        return "extractive"

    def model_name(self, model: str) -> str:
        """No model writes the answer, whichever one the request named."""
        return "extractive"

    async def ensure_available(self, model: str) -> None:
        """Always available: there is nothing upstream."""

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """Yields the whole answer as one delta, with its usage (a completion token per word): it is composed at
        once, and like an LLM's burst it costs one trip down the pipeline."""
        text = self.compose(request)
        yield GenerationDelta(text=text, usage=Usage(prompt_tokens=0, completion_tokens=len(_WORD.findall(text))))

    async def check_health(self) -> None:
        """Always healthy: there is nothing upstream."""

    async def slots(self) -> int | None:
        """No server, no slots."""
        return None

    async def aclose(self) -> None:
        """Holds no resources."""

    def compose(self, request: GenerationRequest) -> str:
        """The quotes, best first, each followed by its chunk's marker."""
        analysis = self._reader.analyse(request.query, request.question or request.query, request.term_counts)
        quotes = self._reader.quotes(analysis, request.context, limit=self._max_sentences)
        if not quotes:
            return FALLBACK
        return quoted_answer(quotes)

"""A generator that calls no LLM: the answer is the context's passages that best answer the query (see
ragsvc.relevance), each followed by the citation marker of its chunk; near-duplicates (overlapping chunks repeat
text) are quoted once."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

from ragsvc.domain import GenerationDelta, GenerationRequest, Usage
from ragsvc.generation.base import Capabilities
from ragsvc.relevance import Candidate, candidates, ranked

# The whole answer when no passage of the context shares a content term with the query.
FALLBACK = "I don't have information about that in the available documentation."

_DUPLICATE_OVERLAP = 0.8  # share of the smaller passage's terms that makes two passages the same
_WORD = re.compile(r"\S+\s*")


class ExtractiveGenerator:
    """Answers from the packed context alone; cheap and deterministic."""

    def __init__(self, *, max_sentences: int = 3) -> None:
        if max_sentences < 1:
            raise ValueError("max_sentences must be at least 1")
        self._max_sentences = max_sentences

    capabilities = Capabilities(follows_instructions=False)

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
        text = self._compose(request)
        yield GenerationDelta(text=text, usage=Usage(prompt_tokens=0, completion_tokens=len(_WORD.findall(text))))

    async def check_health(self) -> None:
        """Always healthy: there is nothing upstream."""

    async def slots(self) -> int | None:
        """No server, no slots."""
        return None

    async def aclose(self) -> None:
        """Holds no resources."""

    def _compose(self, request: GenerationRequest) -> str:
        chosen: list[Candidate] = []
        for candidate in ranked(request.query, list(candidates(request.context)), question=request.question):
            if not any(_near_duplicates(candidate, kept) for kept in chosen):
                chosen.append(candidate)
            if len(chosen) == self._max_sentences:
                break
        if not chosen:
            return FALLBACK
        named: set[str] = set()
        quotes = []
        for candidate in chosen:
            quotes.append(f"{quoted(candidate, named)} [#{candidate.marker}]")
            named.add(candidate.term)
        return " ".join(quotes)


def quoted(candidate: Candidate, named: set[str]) -> str:
    """The passage as quoted; after the term its entry defines (when the answer has not named it yet and the
    passage does not), so that "The default is 10 megabytes." under "log_rotation_size (integer)" says what it
    is about."""
    term = candidate.term
    if term and term not in named and term.lower() not in candidate.text.lower():
        return f"{term}: {candidate.text}"
    return candidate.text


def _near_duplicates(a: Candidate, b: Candidate) -> bool:
    """True when most terms of the smaller passage also occur in the other (overlapping chunks repeat text)."""
    return len(a.terms & b.terms) >= _DUPLICATE_OVERLAP * min(len(a.terms), len(b.terms))

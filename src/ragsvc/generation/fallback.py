"""The fallback chain (R-004-08): the requested (or default) model, then the fallback model FALLBACK_LLM on the
same server, then, when RAG_FALLBACK_EXTRACTIVE is on, the extractive generator, which needs no server. Any
answer not written by the first step is flagged degraded and names what wrote it.

The chain engages only for a failure of the first step that another model may not share (an LLMUnavailable
marked `transient`: the server unreachable, 5xx, 429); not for a model the server does not serve (the caller or the operator must
know), a timeout (the stage's time is spent), or another 4xx. Once engaged, any failure of a later step moves
on to the next; when every step failed, the first step's failure is reported.

It moves on only while the answer has not started. Once a delta has reached the client, a failure ends the
stream with its error and no final answer: switching models then would splice two answers (or repeat text the
client already rendered), and the final answer would not be the text the client saw. The client sees a non-OK
status after partial text and knows the answer is incomplete; retrying the call is its decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragsvc.errors import LLMUnavailable, RagError
from ragsvc.generation.base import Generator


def worth_another_model(exc: RagError) -> bool:
    """True when `exc` is a failure another model may not share (see the module docstring)."""
    return isinstance(exc, LLMUnavailable) and exc.transient


@dataclass(frozen=True, slots=True)
class Attempt:
    """One step of the chain: `generator` writing with `model`; `degraded` for every step after the first."""

    generator: Generator
    model: str
    degraded: bool


@dataclass(frozen=True, slots=True)
class FallbackChain:
    """`generator` is the configured one (an LLM, or the extractive generator, which never fails over)."""

    generator: Generator
    fallback_model: str = ""
    extractive: Generator | None = None

    def attempts(self, model: str) -> tuple[Attempt, ...]:
        """The steps for a request asking for `model`, in order."""
        steps = [Attempt(self.generator, model, degraded=False)]
        if self.fallback_model and self.fallback_model != model:
            steps.append(Attempt(self.generator, self.fallback_model, degraded=True))
        if self.extractive is not None and self.extractive is not self.generator:
            steps.append(Attempt(self.extractive, model, degraded=True))
        return tuple(steps)

"""What the Ask servicer does around the pipeline: bound the question by the caller's principal, validate it
at the edge (history cap), flag or reject prompt injection, replay the answer of an idempotency key, and serve
from / fill the answer cache.

The pipeline stays untouched: `AskFront.events` takes the question and the function that runs the pipeline,
and yields the same events the pipeline would (text deltas, citations, one Answer). A cached answer comes back
as one text delta, its citations, then the Answer with `flags.cache_hit`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ragsvc import domain
from ragsvc.errors import FieldViolation, InjectionSuspected
from ragsvc.sanitize import (
    MAX_HISTORY_MESSAGES,
    question_injection_patterns,
    validate_question,
)
from ragsvc.server.cache import AnswerCache, bypasses_cache, cache_key, replay_key
from ragsvc.server.interceptors import CallState, current_call

Run = Callable[[domain.Question], AsyncIterator[domain.Event]]


@dataclass(frozen=True, slots=True)
class AskFront:
    default_tenant: str = "default"
    max_history_messages: int = MAX_HISTORY_MESSAGES
    detect_injection: bool = True
    reject_injection: bool = False
    cache: AnswerCache | None = None
    replays: AnswerCache | None = None  # answers by idempotency key, whatever their outcome

    def admit(self, question: domain.Question, call: CallState | None) -> tuple[domain.Question, tuple[str, ...]]:
        """The question as it will be answered, and the injection patterns it matched."""
        if call is not None and call.principal is not None:
            question = call.principal.scope(question)
        question = validate_question(
            question, default_tenant=self.default_tenant, max_history_messages=self.max_history_messages
        )
        patterns = question_injection_patterns(question) if self.detect_injection else ()
        if call is not None:
            call.question, call.injection_patterns = question, patterns
        if patterns and self.reject_injection:
            raise InjectionSuspected(
                [FieldViolation("query", "looks like a prompt-injection attempt")],
                f"rejected: the input matches prompt-injection patterns ({', '.join(patterns)})",
            )
        return question, patterns

    async def events(self, question: domain.Question, run: Run) -> AsyncIterator[domain.Event]:
        """The events answering `question`: replayed for its idempotency key or from the cache when one of them
        holds the answer, else from `run` (and then kept in both)."""
        started = time.perf_counter()
        call = current_call()
        question, patterns = self.admit(question, call)
        stores = self._stores(question)
        if call is not None and stores:
            call.cache_hit = False
        for store, key in stores:
            stored = store.get(key)
            if stored is None:
                continue
            answer = _from_cache(stored, question, patterns, (time.perf_counter() - started) * 1000)
            if call is not None:
                call.cache_hit, call.answer = True, answer
            if answer.text:
                yield domain.TextDelta(answer.text)
            for citation in answer.citations:
                yield citation
            yield answer
            return
        generations = [store.generation(question.tenant_id) for store, _ in stores]
        async for event in run(question):
            if isinstance(event, domain.Answer):
                if patterns:
                    event = dataclasses.replace(event, flags=dataclasses.replace(event.flags, injection_suspected=True))
                if call is not None:
                    call.answer = event
                for (store, key), generation in zip(stores, generations, strict=True):
                    store.put(key, event, question=question, generation=generation)
            yield event

    def _stores(self, question: domain.Question) -> list[tuple[AnswerCache, str]]:
        """Where the answer may already be: the replay of the question's idempotency key, then the cache."""
        stores: list[tuple[AnswerCache, str]] = []
        if self.replays is not None and question.idempotency_key:
            stores.append((self.replays, replay_key(question)))
        if self.cache is not None and not bypasses_cache(question):
            stores.append((self.cache, cache_key(question)))
        return stores


def _from_cache(
    answer: domain.Answer, question: domain.Question, patterns: tuple[str, ...], elapsed_ms: float
) -> domain.Answer:
    """A cached answer as served now: this request's id and flags; no model was called and no stage ran, so
    usage is zero and the only timing is the total."""
    return dataclasses.replace(
        answer,
        request_id=question.request_id,
        usage=domain.Usage(),
        timings=domain.Timings(total_ms=elapsed_ms),
        flags=dataclasses.replace(answer.flags, cache_hit=True, injection_suspected=bool(patterns)),
    )

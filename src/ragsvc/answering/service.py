"""The answering service: the one way a question is answered, whichever RPC asked (Ask, AskStream, SimulateAsk).

    admit -> resolve its metadata filter -> language -> replay of its idempotency key | cached answer | the pipeline
      -> cache and replay store -> audit log

A replayed or cached answer comes back as the pipeline's would: one text delta, its citations, then the Answer
(with `flags.cache_hit`). A cached answer is one the same reader wrote under the same settings (the cache key holds
their fingerprint); a replay is the caller's own, whichever reader wrote it (see `cache.replay_key`); its key sent
again with another request is refused with IdempotencyKeyReused. The audit log gets a row for every outcome,
refusals and failures included.

Every answer the pipeline writes carries its provenance (R-003-13): the version of the tenant's index taken before
the search (`storage.index_versions`), the time it was written, and the question's language (`language.py`), which
may also have picked its template or refused it (UNSUPPORTED_LANGUAGE). A NO_CHUNKS refusal says why nothing was
found, where its caller may know (`hints.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator
from datetime import UTC, datetime

from ragsvc.answering.admission import Admission
from ragsvc.answering.cache import AnswerStore, bypasses_cache, cache_key, replay_key, request_fingerprint
from ragsvc.answering.context import CallContext
from ragsvc.answering.hints import NoChunksHint
from ragsvc.answering.language import LanguageGate
from ragsvc.answering.pipeline import Pipeline
from ragsvc.domain import Answer, Event, Flags, Mode, Question, TextDelta, Timings
from ragsvc.errors import IdempotencyKeyReused, RagError
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.index_versions import IndexVersions


class AnsweringService:
    def __init__(
        self,
        pipeline: Pipeline,
        admission: Admission,
        schema: MetadataSchema,
        *,
        fingerprint: str,
        cache: AnswerStore | None = None,
        replays: AnswerStore | None = None,
        answers: AnswerLog | None = None,
        languages: LanguageGate | None = None,
        index_versions: IndexVersions | None = None,
        hints: NoChunksHint | None = None,
    ) -> None:
        self.pipeline = pipeline
        self._admission = admission
        self._schema = schema  # resolves a filter expression against the tenant's metadata keys
        # what writes this server's answers (its reader's fingerprint and Settings.answer_fingerprint): part of every
        # cache key
        self._fingerprint = fingerprint
        self._cache = cache
        self._replays = replays  # answers by idempotency key, whatever their outcome
        self._answers = answers
        self._languages = languages  # None: every question is taken to be in its template's language
        self._index_versions = index_versions
        self._hints = hints  # what a NO_CHUNKS refusal may add about why nothing was found

    async def admit(self, question: Question, call: CallContext) -> tuple[Question, bool]:
        """The question as it will be answered (see `Admission.admit`; its metadata filter resolved, its language
        routed) and whether its language is supported, or the error refusing it, recorded in the audit log: what
        `answer` does first, for a caller that must know before answering starts (SubmitAsk)."""
        try:
            admitted = self._admission.admit(question, call)
            filters = await self._schema.resolve(admitted.tenant_id, admitted.filters)
            admitted = dataclasses.replace(admitted, filters=filters)
            supported = True
            if self._languages is not None:
                admitted, supported = self._languages.route(admitted)
                call.report.question = admitted
            return admitted, supported
        except RagError as exc:
            if self._answers is not None:
                self._answers.record_failure(self._admission.provisional(question, call), exc)
            raise

    async def answer(self, question: Question, call: CallContext) -> AsyncGenerator[Event, None]:
        """The events answering `question`; closing the stream (a caller leaving) stops the work at once."""
        admitted, supported = await self.admit(question, call)
        events = self._answered(admitted, call) if supported else self._unsupported_language(admitted, call)
        if self._answers is not None:
            events = self._answers.recorded(admitted, events)
        async with contextlib.aclosing(events):
            async for event in events:
                yield event

    async def _answered(self, question: Question, call: CallContext) -> AsyncGenerator[Event, None]:
        started = time.perf_counter()
        report = call.report
        stores = self._stores(question)
        if stores:
            report.cache_hit = False
        for store, key in stores:
            stored = await store.get(key)
            if stored is None:
                continue
            if store is self._replays and stored.fingerprint != request_fingerprint(question):
                raise IdempotencyKeyReused(
                    "this idempotency key was used for another request: send a new key with a changed request",
                    metadata={"idempotency_key": question.idempotency_key},
                )
            elapsed_ms = (time.perf_counter() - started) * 1000
            answer = _as_served(stored.answer, question, report.injection_patterns, elapsed_ms)
            report.cache_hit, report.answer = True, answer
            if answer.text:
                yield TextDelta(answer.text)
            for citation in answer.citations:
                yield citation
            yield answer
            return
        generations = [await store.generation(question.tenant_id) for store, _ in stores]
        index_version = await self._index_version(question)
        events = self.pipeline.run(question, deadline=call.deadline)
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, Answer):
                    if self._hints is not None:
                        event = await self._hints.explained(event, question, call.principal)
                    event = _with_provenance(event, question, index_version)
                    if report.injection_patterns:
                        event = dataclasses.replace(event, flags=dataclasses.replace(event.flags, injection_suspected=True))
                    report.answer = event
                    for (store, key), generation in zip(stores, generations, strict=True):
                        await store.put(key, event, question=question, generation=generation)
                yield event

    async def _unsupported_language(self, question: Question, call: CallContext) -> AsyncGenerator[Event, None]:
        """The refusal of a question that no template answers in its language (nothing searched, nothing cached)."""
        if self._languages is None:
            raise RuntimeError("no language gate refused the question")
        answer = await self._languages.refusal(question)
        call.report.answer = answer
        yield TextDelta(answer.text)
        yield answer

    async def _index_version(self, question: Question) -> str:
        """The tenant's index version before the search; "" in selected-text mode or without versions kept."""
        if self._index_versions is None or question.mode is Mode.SELECTED_TEXT:
            return ""
        return await self._index_versions.current(question.tenant_id)

    def _stores(self, question: Question) -> list[tuple[AnswerStore, str]]:
        """Where the answer may already be: the replay of the question's idempotency key, then the cache."""
        stores: list[tuple[AnswerStore, str]] = []
        if self._replays is not None and question.idempotency_key:
            stores.append((self._replays, replay_key(question)))
        if self._cache is not None and not bypasses_cache(question):
            stores.append((self._cache, cache_key(question, self._fingerprint)))
        return stores


def _with_provenance(answer: Answer, question: Question, index_version: str) -> Answer:
    """The pipeline's answer with its provenance: index version, creation time, the question's language."""
    return dataclasses.replace(answer, index_version=index_version, created_at=datetime.now(UTC), language=question.language)


def _as_served(answer: Answer, question: Question, patterns: tuple[str, ...], elapsed_ms: float) -> Answer:
    """A stored answer as served now: this request's id and flags (cache_hit says no model was called and no stage
    ran, so the only timing is the total); its usage stays the original answer's, what the answer cost to write."""
    flags: Flags = dataclasses.replace(answer.flags, cache_hit=True, injection_suspected=bool(patterns))
    return dataclasses.replace(answer, request_id=question.request_id, timings=Timings(total_ms=elapsed_ms), flags=flags)

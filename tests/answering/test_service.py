"""The answering service over a cache and a replay store that two services share (two replicas, each store of each
implementation: in memory, and on a real Redis-protocol server): a cached answer is served only by the reader that
wrote it, an idempotent replay whichever reader serves. The pipelines are the server's, with the extractive
generator over fixed evidence."""

from __future__ import annotations

import contextlib
import dataclasses

from ragsvc.answering.cache import AnswerStore
from ragsvc.answering.context import CallContext
from ragsvc.answering.service import AnsweringService
from ragsvc.domain import Answer, Question
from ragsvc.generation.extractive import ExtractiveGenerator
from ragsvc.reading import Reader
from ragsvc.reading.trained import Model, TrainedReader
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.storage.backend import Backend
from ragsvc.storage.metadata_keys import MetadataKeyStore
from tests.answering.test_pipeline import ADMISSION, QUESTION, make_pipeline
from tests.support.readers import RULES

SHIPPED = Model.load()


def service(reader: Reader, stores: tuple[AnswerStore, AnswerStore], records: Backend, engine: EdgeEngine) -> AnsweringService:
    """A replica answering with `reader`, over the shared `stores` (the answer cache, the replay store)."""
    cache, replays = stores
    schema = MetadataSchema(MetadataKeyStore(records), engine)
    pipeline = make_pipeline(ExtractiveGenerator(reader), reader=reader)
    return AnsweringService(pipeline, ADMISSION, schema, fingerprint=reader.fingerprint, cache=cache, replays=replays)


async def ask(answering: AnsweringService, question: Question = QUESTION) -> Answer:
    call = CallContext(question.request_id, peer="10.0.0.7")
    async with contextlib.aclosing(answering.answer(question, call)) as events:
        answers = [event async for event in events if isinstance(event, Answer)]
    assert len(answers) == 1 and call.report.cache_hit is answers[0].flags.cache_hit
    return answers[0]


async def test_a_cached_answer_is_served_only_by_the_reader_that_wrote_it(
    stores: tuple[AnswerStore, AnswerStore], records: Backend, engine: EdgeEngine
) -> None:
    rules, trained = (service(r, stores, records, engine) for r in (RULES, TrainedReader(SHIPPED, rare_share=0.002, pool=8)))
    written = await ask(rules)
    assert written.grounded and not written.flags.cache_hit
    assert (await ask(rules)).flags.cache_hit, "the cache is warm for its reader"

    other = await ask(trained)
    assert other.grounded and not other.flags.cache_hit, "another reader answers for itself"
    assert (await ask(trained)).flags.cache_hit, "and caches its own answer"
    again = await ask(rules)
    assert again.flags.cache_hit and again.text == written.text, "the first reader's entry stays its own"

    # The same model with another pool, and another model (one threshold retrained), are other readers too.
    retrained = dataclasses.replace(SHIPPED, cite_threshold=SHIPPED.cite_threshold + 0.01)
    for reader in (TrainedReader(SHIPPED, rare_share=0.002, pool=0), TrainedReader(retrained, rare_share=0.002, pool=8)):
        assert not (await ask(service(reader, stores, records, engine))).flags.cache_hit, reader.fingerprint
    # A replica that loaded the same model with the same settings is the same reader: it shares the entry.
    same = service(TrainedReader(Model.load(), rare_share=0.002, pool=8), stores, records, engine)
    assert (await ask(same)).flags.cache_hit


async def test_an_idempotent_replay_returns_the_recorded_answer_whichever_reader_serves(
    stores: tuple[AnswerStore, AnswerStore], records: Backend, engine: EdgeEngine
) -> None:
    keyed = dataclasses.replace(QUESTION, idempotency_key="retry-1")
    recorded = await ask(service(RULES, stores, records, engine), keyed)
    assert not recorded.flags.cache_hit
    replayed = await ask(service(TrainedReader(SHIPPED, rare_share=0.002, pool=8), stores, records, engine), keyed)
    assert replayed.flags.cache_hit and replayed.text == recorded.text
    assert replayed.citations == recorded.citations and replayed.confidence == recorded.confidence

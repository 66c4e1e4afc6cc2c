"""The shared answer cache against a real Redis-protocol server: two replicas (two clients) share entries and
invalidations; Redis down is a miss and an invalidation is not lost. (The `AnswerStore` contract both
implementations keep is tested in tests/answering/test_cache.py.)"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator

import pytest

from ragsvc.answering.cache import cache_key, is_cacheable
from ragsvc.domain import (
    Action,
    Answer,
    ChatMessage,
    Chunk,
    Citation,
    Confidence,
    Explanation,
    Flags,
    Question,
    Role,
    RouteTarget,
    ScoredChunk,
    Timings,
    Usage,
)
from ragsvc.errors import DependencyUnavailable
from ragsvc.shared.cache import RedisAnswerCache
from ragsvc.shared.codec import decode, encode
from ragsvc.shared.guard import RedisGuard, SharedStateUnavailable, connect
from tests.answering.test_cache import READER, answer_of
from tests.support.redis_server import RedisServer

CHUNK = Chunk("guide", 2, "Hotels up to 180 euros.", document_name="guide.md", tenant_id="acme", tags=("travel",),
              section="Hotels", page_number=3, trust=0.8, char_start=10, char_end=33)  # fmt: skip
ANSWER = Answer(
    text="Up to 180 euros [#1].",
    citations=(Citation(1, CHUNK, 0.71),),
    confidence=Confidence(overall=81.0, retrieval=0.7, coverage=1.0, llm=50.0),
    action=Action.CITE,
    route=RouteTarget(tag="travel", owner_email="t@example.com", reason="r"),
    grounded=True,
    candidates=(ScoredChunk(CHUNK, 0.7),),
    model="extractive",
    usage=Usage(12, 34),
    timings=Timings(total_ms=12.5),
    template_version="rag-v1",
    follow_up_questions=("And flights?",),
    flags=Flags(mitigation_applied=True),
    explanation=Explanation((ChatMessage(Role.SYSTEM, "s"),), (ScoredChunk(CHUNK, 0.7),), 40),
    retrieval_scores=(0.7, 0.5),
    index_version="7",
    created_at=datetime.datetime(2026, 11, 27, 10, 0, 0, 123456, tzinfo=datetime.UTC),
    language="en",
)


def question(tenant: str = "acme", query: str = "hotel limit?", template: str = "") -> Question:
    return Question(query=query, tenant_id=tenant, template_id=template)


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[tuple[RedisAnswerCache, RedisAnswerCache]]:
    guards = [RedisGuard(connect(redis_url)) for _ in range(2)]
    a, b = (RedisAnswerCache(guard, ttl_s=60, admits=is_cacheable) for guard in guards)
    yield a, b
    for guard in guards:
        await guard.aclose()


def test_an_answer_survives_the_codec_unchanged() -> None:
    assert decode(encode(ANSWER), Answer) == ANSWER
    with pytest.raises((ValueError, TypeError, KeyError)):
        decode(b'{"not": "an answer"}', Answer)


async def test_an_answer_cached_by_one_replica_is_served_by_the_other(replicas) -> None:
    a, b = replicas
    q = question()
    assert await answer_of(a, cache_key(q, READER)) is None
    assert await a.put(cache_key(q, READER), ANSWER, question=q, generation=await a.generation("acme"))
    assert await answer_of(b, cache_key(q, READER)) == ANSWER


async def test_an_ingest_on_one_replica_empties_the_tenant_on_all(replicas) -> None:
    a, b = replicas
    first, second, other = question(query="one"), question(query="two"), question(tenant="globex")
    generation = await a.generation("acme")
    for q in (first, second, other):
        assert await a.put(cache_key(q, READER), ANSWER, question=q, generation=await a.generation(q.tenant_id))
    assert await b.invalidate_tenant("acme") == 2
    assert await answer_of(a, cache_key(first, READER)) is None and await answer_of(a, cache_key(second, READER)) is None
    assert await answer_of(a, cache_key(other, READER)) == ANSWER, "another tenant keeps its entries"
    # An answer computed before the ingest (with the old generation) is not stored after it.
    assert await a.generation("acme") == generation + 1
    assert not await a.put(cache_key(first, READER), ANSWER, question=first, generation=generation)
    assert await answer_of(b, cache_key(first, READER)) is None


async def test_a_template_change_drops_the_answers_written_from_it(replicas) -> None:
    a, b = replicas
    named, default = question(query="one", template="support-short"), question(query="two")
    await a.put(cache_key(named, READER), ANSWER, question=named, generation=0)
    await a.put(cache_key(default, READER), ANSWER, question=default, generation=0)  # written from rag-v1
    assert await b.invalidate_template("support-short") == 1
    assert await answer_of(a, cache_key(named, READER)) is None and await answer_of(a, cache_key(default, READER)) == ANSWER
    assert await b.invalidate_template("rag-v1") == 1
    assert await answer_of(a, cache_key(default, READER)) is None


async def test_clear_drops_everything_but_keeps_generations(replicas) -> None:
    a, b = replicas
    await a.invalidate_tenant("acme")
    for n in range(3):
        q = question(query=f"q{n}")
        await a.put(cache_key(q, READER), ANSWER, question=q, generation=1)
    await b.clear()
    assert [await answer_of(a, cache_key(question(query=f"q{n}"), READER)) for n in range(3)] == [None] * 3
    assert await a.generation("acme") == 1
    assert [key async for key in a._guard.client.scan_iter("*") if b":gen:" not in key] == []


async def test_a_caller_erased_on_one_replica_is_gone_from_redis(replicas) -> None:
    a, b = replicas
    fin = Question(query="hotel limit?", tenant_id="acme", caller="key:acme/fin")
    hr = Question(query="salary bands?", tenant_id="acme", caller="key:acme/hr")
    for q in (fin, hr):
        await a.put(cache_key(q, READER), ANSWER, question=q, generation=0)
    assert await b.erase_caller("key:acme/fin", "acme") == 1
    assert await answer_of(a, cache_key(fin, READER)) is None and await answer_of(a, cache_key(hr, READER)) == ANSWER
    keys = [key.decode() async for key in a._guard.client.scan_iter("*")]
    assert not [key for key in keys if "fin" in key], "the caller's index went with its entries"
    assert "{ragsvc}:answers:c:key:acme/hr" in keys


async def test_an_erasure_that_cannot_reach_redis_fails(redis_server: RedisServer, redis_url: str) -> None:
    guard = RedisGuard(connect(redis_url))
    cache = RedisAnswerCache(guard, ttl_s=60, admits=is_cacheable)
    redis_server.stop()
    try:
        with pytest.raises(SharedStateUnavailable):
            await cache.erase_caller("key:acme/fin")
    finally:
        redis_server.start()
    await guard.aclose()


async def test_entries_expire_after_the_ttl(redis_url: str) -> None:
    guard = RedisGuard(connect(redis_url))
    cache = RedisAnswerCache(guard, ttl_s=30, admits=is_cacheable)
    q = question()
    await cache.put(cache_key(q, READER), ANSWER, question=q, generation=0)
    ttls = [await guard.client.pttl(key) async for key in guard.client.scan_iter("*:e:*")]
    assert len(ttls) == 1 and 29_000 < ttls[0] <= 30_000
    await guard.aclose()


async def test_redis_down_is_a_miss_and_a_missed_invalidation_is_applied_on_return(
    redis_server: RedisServer, redis_url: str
) -> None:
    now = [0.0]
    guard = RedisGuard(connect(redis_url), retry_after_s=1.0, clock=lambda: now[0])
    cache = RedisAnswerCache(guard, ttl_s=60, admits=is_cacheable)
    q = question()
    await cache.put(cache_key(q, READER), ANSWER, question=q, generation=0)
    await guard.client.save()  # the entry survives the restart below (loaded from the dump)
    redis_server.stop()
    try:
        assert await answer_of(cache, cache_key(q, READER)) is None, "a miss, not an error"
        assert guard.degraded
        assert not await cache.put(cache_key(q, READER), ANSWER, question=q, generation=0)
        assert await cache.invalidate_tenant("acme") == 0  # could not reach Redis: remembered
        with pytest.raises(SharedStateUnavailable) as raised:
            await guard.check_health()
        assert isinstance(raised.value, DependencyUnavailable)
    finally:
        redis_server.start()
    other_replica = RedisGuard(connect(redis_url))
    assert await other_replica.client.exists(f"{{ragsvc}}:answers:e:{cache_key(q, READER)}") == 1, "the stale entry is back"
    assert await answer_of(cache, cache_key(q, READER)) is None, "still inside the retry pause: Redis is not asked"
    now[0] += 1.5
    assert await answer_of(cache, cache_key(q, READER)) is None, "the missed invalidation ran first"
    assert not guard.degraded
    assert await other_replica.client.exists(f"{{ragsvc}}:answers:e:{cache_key(q, READER)}") == 0
    assert await cache.generation("acme") == 1
    await other_replica.aclose()
    await guard.aclose()

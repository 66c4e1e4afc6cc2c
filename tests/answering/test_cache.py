"""The answer cache and the replay store: the key, what bypasses the cache, and the `AnswerStore` contract, run
against both implementations (in memory, and on a real Redis-protocol server); TTL and LRU of the in-memory one.
Their use over a real channel is tested in tests/server/test_cache.py, the Redis one's own matters (replicas,
outages) in tests/shared/test_cache.py."""

from __future__ import annotations

import asyncio
import dataclasses

from ragsvc import domain
from ragsvc.answering.cache import (
    AnswerStore,
    MemoryAnswerCache,
    Recorded,
    bypasses_cache,
    cache_key,
    keeps_every_answer,
    replay_key,
    request_fingerprint,
)
from ragsvc.reading.trained import Model, TrainedReader
from ragsvc.shared.cache import RedisAnswerCache
from ragsvc.shared.guard import RedisGuard, connect
from tests.support.readers import RULES

GROUNDED = domain.Answer(text="It is 42 [#1].", grounded=True, action=domain.Action.CITE, template_version="rag-v1")
REFUSAL = dataclasses.replace(GROUNDED, grounded=False, refusal=domain.RefusalReason.SCORE_GATE)
QUESTION = domain.Question(query="What is the answer?", tenant_id="acme", user_tags=("a", "b"))
READER = RULES.fingerprint


async def answer_of(store: AnswerStore, key: str) -> domain.Answer | None:
    """The answer `store` holds under `key`, if any."""
    recorded = await store.get(key)
    return recorded.answer if recorded is not None else None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_key_separates_tenants_and_tag_sets_but_not_tag_order_or_spacing() -> None:
    key = cache_key(QUESTION, READER)
    assert cache_key(dataclasses.replace(QUESTION, user_tags=("b", "a")), READER) == key
    assert cache_key(dataclasses.replace(QUESTION, query="  what IS the\tanswer? "), READER) == key
    for other in (
        dataclasses.replace(QUESTION, tenant_id="globex"),
        dataclasses.replace(QUESTION, user_tags=("a",)),
        dataclasses.replace(QUESTION, user_tags=()),
        dataclasses.replace(QUESTION, template_id="rag-v1-terse"),
        dataclasses.replace(QUESTION, top_k=3),
        dataclasses.replace(QUESTION, citation_style=domain.CitationStyle.SOURCE_ID),
        dataclasses.replace(QUESTION, model="other"),
        dataclasses.replace(QUESTION, filters=domain.MetadataFilter(page_titles=("x",))),
        dataclasses.replace(QUESTION, mode=domain.Mode.SELECTED_TEXT, selected_text="some text"),
        dataclasses.replace(QUESTION, citation_policy=domain.CitationPolicy.DROP_INVALID),
    ):
        assert cache_key(other, READER) != key, other


def test_the_key_separates_readers() -> None:
    """Another reader, or the trained reader with another model or pool, may answer otherwise: another key (what
    makes a reader's fingerprint is tested in tests/reading/test_fingerprint.py)."""
    shipped = Model.load()
    retrained = dataclasses.replace(shipped, cite_threshold=shipped.cite_threshold + 0.01)
    readers = [RULES, *(TrainedReader(m, rare_share=0.002, pool=p) for m, p in ((shipped, 8), (shipped, 0), (retrained, 8)))]
    keys = [cache_key(QUESTION, reader.fingerprint) for reader in readers]
    assert len(set(keys)) == len(readers), keys
    again = TrainedReader(Model.load(), rare_share=0.002, pool=8)  # the same model loaded again (another replica)
    assert cache_key(QUESTION, again.fingerprint) == keys[1]


def test_what_bypasses_the_cache() -> None:
    assert not bypasses_cache(QUESTION)
    history = (domain.ChatMessage(domain.Role.USER, "hello"),)
    for bypassing in (
        dataclasses.replace(QUESTION, chat_history=history),
        dataclasses.replace(QUESTION, session_id="s1"),
        dataclasses.replace(QUESTION, dry_run=True),
        dataclasses.replace(QUESTION, explain=True),
    ):
        assert bypasses_cache(bypassing), bypassing


def test_a_replay_key_is_the_idempotency_key_of_its_caller_within_its_tenant() -> None:
    keyed = dataclasses.replace(QUESTION, idempotency_key="retry-1", caller="key:acme/fin")
    assert replay_key(dataclasses.replace(keyed, query="something else entirely")) == replay_key(keyed)
    assert replay_key(dataclasses.replace(keyed, tenant_id="globex")) != replay_key(keyed)
    assert replay_key(dataclasses.replace(keyed, idempotency_key="retry-2")) != replay_key(keyed)
    assert replay_key(dataclasses.replace(keyed, caller="key:acme/plain")) != replay_key(keyed)


def test_the_request_fingerprint_is_everything_that_changes_the_answer_and_nothing_else() -> None:
    fingerprint = request_fingerprint(QUESTION)
    for same in (
        dataclasses.replace(QUESTION, request_id="r-2"),
        dataclasses.replace(QUESTION, idempotency_key="retry-9"),
        dataclasses.replace(QUESTION, caller="key:acme/other"),
        dataclasses.replace(QUESTION, user_tags=("b", "a")),
        dataclasses.replace(QUESTION, query="  what IS the\tanswer? "),
    ):
        assert request_fingerprint(same) == fingerprint, same
    history = (domain.ChatMessage(domain.Role.USER, "hello"),)
    for other in (
        dataclasses.replace(QUESTION, query="What is the question?"),
        dataclasses.replace(QUESTION, user_tags=("a",)),
        dataclasses.replace(QUESTION, chat_history=history),
        dataclasses.replace(QUESTION, session_id="9f1c1d4e-8a7b-4c6d-9e2f-0a1b2c3d4e5f"),
        dataclasses.replace(QUESTION, dry_run=True),
        dataclasses.replace(QUESTION, explain=True),
        dataclasses.replace(QUESTION, follow_up_count=2),
        dataclasses.replace(QUESTION, top_k=3),
        dataclasses.replace(QUESTION, model="other"),
        dataclasses.replace(QUESTION, search_mode=domain.SearchMode.DENSE),
        dataclasses.replace(QUESTION, response_style=domain.ResponseStyle.BULLETS),
    ):
        assert request_fingerprint(other) != fingerprint, other
        assert (
            cache_key(other, READER) != cache_key(QUESTION, READER)
            or other.chat_history
            or other.session_id
            or other.dry_run
            or other.explain
            or other.follow_up_count
        ), other


async def test_a_stored_answer_keeps_the_fingerprint_of_its_request(stores: tuple[AnswerStore, AnswerStore]) -> None:
    _, replays = stores
    assert await replays.put("r", REFUSAL, question=QUESTION, generation=0)
    assert await replays.get("r") == Recorded(REFUSAL, request_fingerprint(QUESTION))


async def test_the_replay_store_keeps_its_own_ttl(redis_url: str) -> None:
    clock = Clock()
    replays = MemoryAnswerCache(max_entries=10, ttl_s=86400, clock=clock, admits=keeps_every_answer)
    await replays.put("r", REFUSAL, question=QUESTION, generation=0)
    clock.now = 86399.0
    assert await answer_of(replays, "r") == REFUSAL
    clock.now = 86400.0
    assert await answer_of(replays, "r") is None, "expired after its TTL"
    guard = RedisGuard(connect(redis_url))
    shared = RedisAnswerCache(guard, ttl_s=0.2, admits=keeps_every_answer, prefix="{test}:ttl")
    await shared.put("r", REFUSAL, question=QUESTION, generation=0)
    assert await answer_of(shared, "r") == REFUSAL
    await asyncio.sleep(0.3)
    assert await answer_of(shared, "r") is None, "Redis expired it after its TTL"
    await guard.aclose()


async def test_the_cache_keeps_grounded_answers_only(stores: tuple[AnswerStore, AnswerStore]) -> None:
    cache, _ = stores
    assert await answer_of(cache, "k") is None
    assert await cache.put("k", GROUNDED, question=QUESTION, generation=await cache.generation("acme"))
    assert await answer_of(cache, "k") == GROUNDED
    routed = dataclasses.replace(GROUNDED, action=domain.Action.ROUTE)
    assert await cache.put("routed", routed, question=QUESTION, generation=0)
    assert await answer_of(cache, "routed") == routed, "a ROUTEd answer is kept, and routed again when served"
    assert not await cache.put("r", REFUSAL, question=QUESTION, generation=0)
    assert await answer_of(cache, "r") is None


async def test_the_replay_store_keeps_every_answer(stores: tuple[AnswerStore, AnswerStore]) -> None:
    cache, replays = stores
    assert await replays.put("r", REFUSAL, question=QUESTION, generation=0)
    assert await answer_of(replays, "r") == REFUSAL
    await cache.clear()
    assert await answer_of(replays, "r") == REFUSAL, "the cache and the replays are apart"


async def test_invalidation_by_tenant_and_template_and_the_generation_guard(
    stores: tuple[AnswerStore, AnswerStore],
) -> None:
    cache, _ = stores
    other = dataclasses.replace(QUESTION, tenant_id="globex", template_id="rag-v1-terse")
    await cache.put("acme", GROUNDED, question=QUESTION, generation=0)
    await cache.put("globex", dataclasses.replace(GROUNDED, template_version="rag-v1-terse"), question=other,
                    generation=0)  # fmt: skip

    generation = await cache.generation("acme")  # an answer starts computing ...
    assert await cache.invalidate_tenant("acme") == 1  # ... the tenant's documents change ...
    assert not await cache.put("acme", GROUNDED, question=QUESTION, generation=generation), "... it is not stored"
    assert await cache.generation("acme") == generation + 1
    assert await answer_of(cache, "acme") is None and await answer_of(cache, "globex") is not None

    assert await cache.invalidate_template("rag-v1-terse") == 1
    assert await answer_of(cache, "globex") is None

    generation = await cache.generation("acme")  # an answer starts computing, and a template changes meanwhile
    await cache.invalidate_template("runbook")
    assert not await cache.put("acme", GROUNDED, question=QUESTION, generation=generation), "computed across it"
    assert await cache.put("acme", GROUNDED, question=QUESTION, generation=await cache.generation("acme"))


async def test_clear_drops_every_entry(stores: tuple[AnswerStore, AnswerStore]) -> None:
    cache, _ = stores
    for key in ("a", "b", "c"):
        await cache.put(key, GROUNDED, question=QUESTION, generation=0)
    await cache.clear()
    assert [await answer_of(cache, key) for key in ("a", "b", "c")] == [None] * 3


async def test_erasing_a_caller_drops_the_entries_its_requests_wrote(stores: tuple[AnswerStore, AnswerStore]) -> None:
    for store in stores:
        written = {
            "fin-acme": dataclasses.replace(QUESTION, caller="key:acme/fin"),
            "fin-globex": dataclasses.replace(QUESTION, caller="key:acme/fin", tenant_id="globex"),
            "hr-acme": dataclasses.replace(QUESTION, caller="key:acme/hr"),
        }
        for key, question in written.items():
            assert await store.put(key, GROUNDED, question=question, generation=0)
        assert await store.erase_caller("key:acme/fin", "acme") == 1
        assert [await answer_of(store, key) is not None for key in written] == [False, True, True]
        assert await store.erase_caller("key:acme/fin") == 1, "None: in every tenant"
        assert await store.erase_caller("key:acme/fin") == 0
        assert await answer_of(store, "hr-acme") == GROUNDED, "another caller's entry stays"


async def test_the_memory_cache_expires_and_evicts_the_least_recently_used() -> None:
    clock = Clock()
    cache = MemoryAnswerCache(max_entries=2, ttl_s=10, clock=clock)
    assert await cache.put("k1", GROUNDED, question=QUESTION, generation=0)
    clock.now = 9.9
    assert await answer_of(cache, "k1") == GROUNDED
    clock.now = 10.0
    assert await answer_of(cache, "k1") is None, "expired"

    for key in ("a", "b", "c"):
        await cache.put(key, GROUNDED, question=QUESTION, generation=0)
    kept = [await answer_of(cache, key) for key in ("a", "b", "c")]
    assert kept == [None, GROUNDED, GROUNDED], "least recently used evicted"
    assert len(cache) == 2

"""The answer cache, unit behaviour: the key, TTL, LRU, invalidation and what is cached (its use over a real
channel is tested in tests/server/test_cache.py)."""

from __future__ import annotations

import dataclasses

from ragsvc import domain
from ragsvc.answering.cache import AnswerCache, bypasses_cache, cache_key, replay_key

GROUNDED = domain.Answer(text="It is 42 [#1].", grounded=True, action=domain.Action.CITE, template_version="rag-v1")
QUESTION = domain.Question(query="What is the answer?", tenant_id="acme", user_tags=("a", "b"))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_key_separates_tenants_and_tag_sets_but_not_tag_order_or_spacing() -> None:
    key = cache_key(QUESTION)
    assert cache_key(dataclasses.replace(QUESTION, user_tags=("b", "a"))) == key
    assert cache_key(dataclasses.replace(QUESTION, query="  what IS the\tanswer? ")) == key
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
    ):
        assert cache_key(other) != key, other


def test_ttl_lru_and_what_is_cached() -> None:
    clock = Clock()
    cache = AnswerCache(max_entries=2, ttl_s=10, clock=clock)
    assert cache.put("k1", GROUNDED, question=QUESTION, generation=0)
    clock.now = 9.9
    assert cache.get("k1") == GROUNDED
    clock.now = 10.0
    assert cache.get("k1") is None, "expired"

    for key in ("a", "b", "c"):
        cache.put(key, GROUNDED, question=QUESTION, generation=0)
    assert cache.get("a") is None and cache.get("b") and cache.get("c"), "least recently used evicted"

    refusal = dataclasses.replace(GROUNDED, grounded=False, refusal=domain.RefusalReason.SCORE_GATE)
    routed = dataclasses.replace(GROUNDED, action=domain.Action.ROUTE)
    assert not cache.put("r", refusal, question=QUESTION, generation=0)
    assert not cache.put("r", routed, question=QUESTION, generation=0)


def test_invalidation_by_tenant_and_template_and_the_generation_guard() -> None:
    cache = AnswerCache(max_entries=10, ttl_s=60)
    other = dataclasses.replace(QUESTION, tenant_id="globex", template_id="rag-v1-terse")
    cache.put("acme", GROUNDED, question=QUESTION, generation=0)
    cache.put("globex", dataclasses.replace(GROUNDED, template_version="rag-v1-terse"), question=other, generation=0)

    generation = cache.generation("acme")  # an answer starts computing ...
    assert cache.invalidate_tenant("acme") == 1  # ... the tenant's documents change ...
    assert not cache.put("acme", GROUNDED, question=QUESTION, generation=generation), "... it is not stored"
    assert cache.get("globex") is not None

    assert cache.invalidate_template("rag-v1-terse") == 1 and len(cache) == 0


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


def test_a_replay_key_is_the_idempotency_key_within_its_tenant() -> None:
    keyed = dataclasses.replace(QUESTION, idempotency_key="retry-1")
    assert replay_key(dataclasses.replace(keyed, query="something else entirely")) == replay_key(keyed)
    assert replay_key(dataclasses.replace(keyed, tenant_id="globex")) != replay_key(keyed)
    assert replay_key(dataclasses.replace(keyed, idempotency_key="retry-2")) != replay_key(keyed)


def test_the_replay_store_keeps_every_answer_the_cache_would_not() -> None:
    replays = AnswerCache(max_entries=10, ttl_s=60, admits=lambda answer: True)
    refusal = dataclasses.replace(GROUNDED, grounded=False, refusal=domain.RefusalReason.SCORE_GATE)
    assert replays.put("r", refusal, question=QUESTION, generation=0)
    assert replays.get("r") == refusal

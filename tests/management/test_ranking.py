"""The ranking weights without a transport, on both records backends: stored weights win over the environment's
at start; an update is checked, stored, used by the retriever from its next query, empties the answer cache when
it changes them and is announced; another replica's `reload` applies it."""

from __future__ import annotations

import pytest

from ragsvc import domain
from ragsvc.answering.cache import MemoryAnswerCache
from ragsvc.config import RetrievalSettings
from ragsvc.errors import InvalidRequest
from ragsvc.management.ranking import RankingControl, weights_from_store
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.retrieval.quality import RankingWeights
from ragsvc.storage.backend import Backend
from ragsvc.storage.settings import RANKING_WEIGHTS, SettingStore

CITED = domain.Answer(text="It is 42 [#1].", grounded=True, action=domain.Action.CITE, template_version="rag-v1")
QUESTION = domain.Question(query="What is the answer?", tenant_id="acme")


def retriever() -> HybridRetriever:
    # The ranking control only reads and sets the weights: no embedder or engine is called.
    return HybridRetriever(None, None, RetrievalSettings())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stored", "weights"),
    [
        ({"similarity_weight": 0.5, "recency_weight": 0.0, "trust_weight": 0.5}, RankingWeights(0.5, 0.0, 0.5)),
        ({"similarity_weight": "0.5", "recency_weight": 0, "trust_weight": 0.5}, RankingWeights(0.5, 0.0, 0.5)),
        (None, None),
        ("0.5,0,0.5", None),
        ({"similarity_weight": 0.5}, None),
        ({"similarity_weight": "high", "recency_weight": 0, "trust_weight": 0}, None),
        ({"similarity_weight": -1, "recency_weight": 0, "trust_weight": 2}, None),
        ({"similarity_weight": 0, "recency_weight": 0, "trust_weight": 0}, None),
    ],
)
def test_stored_weights_are_used_only_when_they_can_rank(stored: object, weights: RankingWeights | None) -> None:
    assert weights_from_store(stored) == weights


async def test_stored_weights_win_over_the_environments_at_start(database: Backend) -> None:
    fresh = retriever()
    await RankingControl(fresh, SettingStore(database)).load()
    assert fresh.weights == RankingWeights(0.7, 0.2, 0.1), "nothing stored: the environment's"

    await SettingStore(database).put(RANKING_WEIGHTS, {"similarity_weight": 0.5, "recency_weight": 0.0, "trust_weight": 0.5})
    restarted = retriever()
    control = RankingControl(restarted, SettingStore(database))
    await control.load()
    assert restarted.weights == control.weights == RankingWeights(0.5, 0.0, 0.5)


async def test_an_update_is_stored_used_and_empties_the_cache_when_it_changes(database: Backend) -> None:
    cache = MemoryAnswerCache(max_entries=10, ttl_s=60)
    ranked = retriever()
    announced: list[str] = []

    async def announce() -> None:
        announced.append("ranking_weights")

    control = RankingControl(ranked, SettingStore(database), cache, announce=announce)

    await cache.put("k", CITED, question=QUESTION, generation=0)
    assert await control.update(None, None, None) == RankingWeights(0.7, 0.2, 0.1)
    assert len(cache) == 1, "unchanged weights keep the cache"

    weights = await control.update(0.0, None, 1.0)
    assert weights == ranked.weights == RankingWeights(0.0, 0.2, 1.0), "the given ones set, the others kept"
    assert len(cache) == 0
    assert weights_from_store(await SettingStore(database).get(RANKING_WEIGHTS)) == weights
    assert announced == ["ranking_weights"] * 2


async def test_a_reload_applies_another_replicas_weights(database: Backend) -> None:
    cache = MemoryAnswerCache(max_entries=10, ttl_s=60)
    here, there = retriever(), retriever()
    control = RankingControl(here, SettingStore(database), cache)
    await control.load()
    await cache.put("k", CITED, question=QUESTION, generation=0)
    await control.reload()
    assert len(cache) == 1, "nothing changed: the cache stays"

    await RankingControl(there, SettingStore(database)).update(0.2, 0.0, 0.8)  # on another replica
    await control.reload()
    assert here.weights == RankingWeights(0.2, 0.0, 0.8)
    assert len(cache) == 0, "answers ranked here the old way are dropped"


async def test_an_update_that_cannot_rank_changes_nothing(database: Backend) -> None:
    ranked = retriever()
    control = RankingControl(ranked, SettingStore(database))
    with pytest.raises(InvalidRequest) as caught:
        await control.update(-0.5, None, None)
    assert [v.field for v in caught.value.violations] == ["ranking_weights.similarity_weight"]
    with pytest.raises(InvalidRequest) as caught:
        await control.update(0.0, 0.0, 0.0)
    assert len(caught.value.violations) == 3
    assert ranked.weights == RankingWeights(0.7, 0.2, 0.1)
    assert await SettingStore(database).get(RANKING_WEIGHTS) is None

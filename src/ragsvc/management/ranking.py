"""The ranking weights (R-003-08): the environment's at start unless the database holds weights set through
AdminService, which then win; a change is stored, applied to the retriever from its next query on, empties
the answer cache (cached answers were ranked with the old weights) and is announced to the other replicas
(`announce`: ragsvc.shared.changes, when RAG_REDIS_URL is set), which `reload` the stored weights."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ragsvc.answering.cache import AnswerStore
from ragsvc.errors import InvalidRequest
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.retrieval.quality import RankingWeights
from ragsvc.storage.settings import RANKING_WEIGHTS, SettingStore

CHANGES_TOPIC = "ranking_weights"  # the change feed's topic of weight changes
_log = logging.getLogger(__name__)


def weights_from_store(value: object) -> RankingWeights | None:
    """Stored weights as RankingWeights; None when absent or unusable (then the environment's stay)."""
    if not isinstance(value, dict):
        return None
    try:
        weights = RankingWeights(float(value["similarity_weight"]), float(value["recency_weight"]), float(value["trust_weight"]))
    except (KeyError, TypeError, ValueError):
        return None
    return None if weights.violations() else weights


class RankingControl:
    def __init__(
        self,
        retriever: HybridRetriever,
        store: SettingStore,
        cache: AnswerStore | None = None,
        *,
        announce: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._retriever = retriever
        self._store = store
        self._cache = cache
        self._announce = announce  # tells the other replicas that the weights changed
        self._lock = asyncio.Lock()  # one change at a time: the database and the retriever stay in step

    @property
    def weights(self) -> RankingWeights:
        return self._retriever.weights

    async def load(self) -> None:
        """At start: the stored weights, when there are any, replace the environment's."""
        weights = weights_from_store(await self._store.get(RANKING_WEIGHTS))
        if weights is not None:
            self._retriever.use_weights(weights)
            _log.info("ranking weights from the database (they override RAG_*_WEIGHT): %s", weights)

    async def reload(self) -> None:
        """After another replica changed the weights: the stored ones again; when they differ from those in use,
        the cache is emptied once more (this replica may have cached answers ranked the old way meanwhile)."""
        async with self._lock:
            current = self._retriever.weights
            await self.load()
            if self._cache is not None and self._retriever.weights != current:
                await self._cache.clear()

    async def update(self, similarity: float | None, recency: float | None, trust: float | None) -> RankingWeights:
        """Set the weights given (None: keep the current one); InvalidRequest naming `ranking_weights.*` fields
        when the result cannot rank."""
        async with self._lock:
            current = self._retriever.weights
            weights = RankingWeights(
                current.similarity if similarity is None else similarity,
                current.recency if recency is None else recency,
                current.trust if trust is None else trust,
            )
            if violations := weights.violations("ranking_weights."):
                raise InvalidRequest(violations)
            await self._store.put(
                RANKING_WEIGHTS,
                {
                    "similarity_weight": weights.similarity,
                    "recency_weight": weights.recency,
                    "trust_weight": weights.trust,
                },
            )
            self._retriever.use_weights(weights)
            if self._cache is not None and weights != current:
                await self._cache.clear()
        if self._announce is not None:
            await self._announce()
        _log.info("ranking weights set: %s", weights)
        return weights

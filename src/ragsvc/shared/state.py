"""What a replica shares with the others on Redis, opened from RAG_REDIS_URL in one place: one client behind one
guard, and what is built on it (the answer cache and the replay store, the global rate limit, the change feed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ragsvc.answering.cache import is_cacheable, keeps_every_answer
from ragsvc.config import SharedStateSettings
from ragsvc.management import ranking, templates
from ragsvc.shared.cache import RedisAnswerCache
from ragsvc.shared.changes import ChangeFeed
from ragsvc.shared.guard import RedisGuard, connect
from ragsvc.shared.limits import RedisTokenBuckets

REPLAYS_PREFIX = "{ragsvc}:replays"


class SharedState:
    def __init__(self, guard: RedisGuard, *, changes_poll_s: float) -> None:
        self.guard = guard
        self.changes = ChangeFeed(guard, (templates.CHANGES_TOPIC, ranking.CHANGES_TOPIC), interval_s=changes_poll_s)

    @classmethod
    def connect(cls, settings: SharedStateSettings) -> SharedState:
        """A client for RAG_REDIS_URL (it connects at its first call: Redis may be out at start)."""
        client = connect(settings.redis_url.get_secret_value(), timeout_s=settings.redis_timeout_s)
        return cls(RedisGuard(client, retry_after_s=settings.redis_retry_s), changes_poll_s=settings.changes_poll_s)

    def answer_stores(self, *, ttl_s: float, replay_ttl_s: float) -> tuple[RedisAnswerCache, RedisAnswerCache]:
        """The answer cache and the replay store (every answer, under its own keys, kept `replay_ttl_s`)."""
        cache = RedisAnswerCache(self.guard, ttl_s=ttl_s, admits=is_cacheable)
        replays = RedisAnswerCache(self.guard, ttl_s=replay_ttl_s, admits=keeps_every_answer, prefix=REPLAYS_PREFIX)
        return cache, replays

    def rate_limit(self, per_minute: int, *, fallback: Callable[[str], Awaitable[float]]) -> RedisTokenBuckets:
        """The rate limit of all replicas together; `fallback` (this replica's own buckets) while Redis is out."""
        return RedisTokenBuckets(self.guard, per_minute, fallback=fallback)

    async def aclose(self) -> None:
        await self.changes.stop()
        await self.guard.aclose()

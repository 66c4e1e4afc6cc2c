"""The interfaces of the state replicas share, as the server will call them: implemented on Redis here
(RedisAnswerCache, RedisTokenBuckets); the in-memory ones (ragsvc.server.cache.AnswerCache,
ragsvc.server.limits.TokenBuckets) have the same operations, synchronous today."""

from __future__ import annotations

from typing import Protocol

from ragsvc.domain import Answer, Question


class AnswerStore(Protocol):
    """Answers by key: the answer cache, and idempotent replays (another instance, another admission rule)."""

    async def get(self, key: str) -> Answer | None: ...

    async def generation(self, tenant_id: str) -> int: ...

    async def put(self, key: str, answer: Answer, *, question: Question, generation: int) -> bool: ...

    async def invalidate_tenant(self, tenant_id: str) -> int: ...

    async def invalidate_template(self, template_id: str) -> int: ...

    async def clear(self) -> None: ...


class RateLimit(Protocol):
    """A token per call per client: 0.0 when granted, else the seconds until the client may call again."""

    per_minute: int

    async def take(self, client: str) -> float: ...

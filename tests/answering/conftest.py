"""The answer cache and the replay store of each implementation, for the tests of the stores and of the service
that uses them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ragsvc.answering.cache import AnswerStore, MemoryAnswerCache, is_cacheable, keeps_every_answer
from ragsvc.shared.cache import RedisAnswerCache
from ragsvc.shared.guard import RedisGuard, connect


@pytest.fixture(params=["memory", "redis"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[tuple[AnswerStore, AnswerStore]]:
    """The answer cache and the replay store, of each implementation."""
    if request.param == "memory":
        yield (MemoryAnswerCache(max_entries=10, ttl_s=60),
               MemoryAnswerCache(max_entries=10, ttl_s=60, admits=keeps_every_answer))  # fmt: skip
        return
    guard = RedisGuard(connect(request.getfixturevalue("redis_url")))
    yield (RedisAnswerCache(guard, ttl_s=60, admits=is_cacheable),
           RedisAnswerCache(guard, ttl_s=60, admits=keeps_every_answer, prefix="{test}:replays"))  # fmt: skip
    await guard.aclose()

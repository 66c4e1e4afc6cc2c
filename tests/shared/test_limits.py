"""The global rate limit against a real Redis-protocol server: replicas share one bucket per client; Redis down
falls back to the replica's own limit. (The `RateLimit` contract both implementations keep is tested in
tests/server/test_limits.py.)"""

from __future__ import annotations

import asyncio

import pytest

from ragsvc.server.limits import RateLimit, TokenBuckets
from ragsvc.shared.guard import RedisGuard, connect
from ragsvc.shared.limits import RedisTokenBuckets
from tests.support.redis_server import RedisServer


async def test_two_replicas_share_one_bucket(redis_url: str) -> None:
    now = [1_000.0]
    guards = [RedisGuard(connect(redis_url)) for _ in range(2)]
    replicas: list[RateLimit] = [RedisTokenBuckets(guard, per_minute=6, clock=lambda: now[0]) for guard in guards]
    grants = [await replicas[n % 2].take("key:ops") for n in range(6)]
    assert grants == [0.0] * 6, "the minute's quota, spent across both replicas"
    assert await replicas[0].take("key:ops") == pytest.approx(10.0)  # one token per 10 s
    assert await replicas[1].take("key:ops") == pytest.approx(10.0)
    assert await replicas[1].take("key:other") == 0.0, "each client has its own bucket"
    now[0] += 10.0
    assert await replicas[1].take("key:ops") == 0.0
    assert await replicas[0].take("key:ops") == pytest.approx(10.0)
    for guard in guards:
        await guard.aclose()


async def test_concurrent_takes_grant_exactly_the_quota(redis_url: str) -> None:
    guards = [RedisGuard(connect(redis_url)) for _ in range(2)]
    replicas = [RedisTokenBuckets(guard, per_minute=20) for guard in guards]  # Redis's own clock
    waits = await asyncio.gather(*(replicas[n % 2].take("peer:ipv4:127.0.0.1") for n in range(60)))
    assert sum(1 for wait in waits if wait == 0.0) == 20
    assert all(0 < wait <= 3.0 for wait in waits if wait)
    for guard in guards:
        await guard.aclose()


async def test_an_idle_bucket_expires_once_full_again(redis_url: str) -> None:
    guard = RedisGuard(connect(redis_url))
    buckets = RedisTokenBuckets(guard, per_minute=60)
    for _ in range(3):
        await buckets.take("c")
    ttl = await guard.client.pttl("{ragsvc}:rate:c")
    assert 3_000 < ttl <= 4_100, "refilled in 3 s (3 tokens at 1 per second), plus a second"
    await guard.aclose()


async def test_redis_down_falls_back_to_the_local_limit(redis_server: RedisServer, redis_url: str) -> None:
    guard = RedisGuard(connect(redis_url))
    local = TokenBuckets(2)
    limited = RedisTokenBuckets(guard, per_minute=2, fallback=local.take)
    unguarded = RedisTokenBuckets(guard, per_minute=2)
    redis_server.stop()
    try:
        waits = [await limited.take("c") for _ in range(3)]
        assert waits[:2] == [0.0, 0.0] and waits[2] > 0, "the replica's own bucket still limits"
        assert guard.degraded
        assert [await unguarded.take("c") for _ in range(5)] == [0.0] * 5, "no fallback: fail open"
    finally:
        redis_server.start()
    await guard.aclose()


def test_a_quota_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RedisTokenBuckets(RedisGuard(connect("redis://127.0.0.1:1/0")), per_minute=0)

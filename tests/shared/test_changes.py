"""Changes announced on one replica reach the others through the real Redis-protocol server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ragsvc.shared.changes import ChangeFeed
from ragsvc.shared.guard import RedisGuard, connect
from tests.support.redis_server import RedisServer

TOPICS = ("templates", "ranking_weights")


class Reloads:
    def __init__(self) -> None:
        self.topics: list[str] = []

    def of(self, topic: str):
        async def reload() -> None:
            self.topics.append(topic)

        return reload


@pytest.fixture
async def feeds(redis_url: str) -> AsyncIterator[list[tuple[ChangeFeed, Reloads]]]:
    guards = [RedisGuard(connect(redis_url), retry_after_s=0.0) for _ in range(2)]
    replicas = []
    for guard in guards:
        feed, reloads = ChangeFeed(guard, TOPICS), Reloads()
        for topic in TOPICS:
            feed.on_change(topic, reloads.of(topic))
        replicas.append((feed, reloads))
    yield replicas
    for guard in guards:
        await guard.aclose()


async def test_a_change_on_one_replica_reloads_the_other_only(feeds) -> None:
    (a, a_reloads), (b, b_reloads) = feeds
    assert await a.poll_once() == [] and await b.poll_once() == []  # the first read only records
    assert await a.announce("templates")
    assert await b.poll_once() == ["templates"] and b_reloads.topics == ["templates"]
    assert await a.poll_once() == [] and a_reloads.topics == [], "its own change is not reloaded"
    assert await b.poll_once() == [], "seen once"
    await a.announce("ranking_weights")
    await b.announce("ranking_weights")  # both changed it: each must reload the other's
    assert await a.poll_once() == ["ranking_weights"] and await b.poll_once() == ["ranking_weights"]


async def test_the_running_feed_applies_a_change_within_its_interval(feeds) -> None:
    (a, _), (b, b_reloads) = feeds
    b.interval_s = 0.05
    b.start()
    await asyncio.sleep(0.1)
    await a.announce("templates")
    for _ in range(40):
        if b_reloads.topics:
            break
        await asyncio.sleep(0.01)
    await b.stop()
    assert b_reloads.topics == ["templates"]


async def test_redis_down_then_back(feeds, redis_server: RedisServer) -> None:
    (a, a_reloads), (b, b_reloads) = feeds
    await a.poll_once()
    await b.poll_once()
    redis_server.stop()
    try:
        assert await b.poll_once() == []
        assert not await a.announce("templates"), "remembered, not lost"
    finally:
        redis_server.start()  # empty: every counter is back to zero
    assert await a.poll_once() == []  # announces the change it made while Redis was out
    assert await b.poll_once() == ["templates"]
    assert b_reloads.topics == ["templates"] and a_reloads.topics == []


async def test_an_unknown_topic_is_refused(feeds) -> None:
    (a, _), _ = feeds
    with pytest.raises(KeyError):
        a.on_change("nope", Reloads().of("nope"))
    with pytest.raises(KeyError):
        await a.announce("nope")

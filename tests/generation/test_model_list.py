"""The LLM server's model list, kept for its TTL on an injected clock: fetched once for concurrent callers, kept
until the TTL has passed, fetched again once forgotten, and a failed fetch is never kept."""

from __future__ import annotations

import asyncio

import pytest

from ragsvc.errors import LLMUnavailable
from ragsvc.generation.http import ModelList


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Server:
    """A model list fetch that counts its calls; `fail` makes the next ones fail."""

    def __init__(self, *models: str) -> None:
        self.models = list(models)
        self.fetches = 0
        self.fail = False

    async def fetch(self) -> list[str]:
        self.fetches += 1
        await asyncio.sleep(0)  # let concurrent callers queue up behind this fetch
        if self.fail:
            raise LLMUnavailable("down", transient=True)
        return list(self.models)


async def test_the_list_is_kept_for_its_ttl_then_fetched_again() -> None:
    clock, server = Clock(), Server("llama3.2")
    models = ModelList(server.fetch, ttl_s=10.0, clock=clock)

    lists = await asyncio.gather(*(models.get() for _ in range(5)))
    assert lists == [["llama3.2"]] * 5 and server.fetches == 1, "one fetch, shared"

    server.models.append("qwen3:8b")  # pulled meanwhile
    clock.now += 9.9
    assert await models.get() == ["llama3.2"] and server.fetches == 1, "kept: within the TTL"
    clock.now += 0.1
    assert await models.get() == ["llama3.2", "qwen3:8b"] and server.fetches == 2, "expired at the TTL"


async def test_forget_fetches_again_within_the_ttl() -> None:
    clock, server = Clock(), Server("llama3.2")
    models = ModelList(server.fetch, ttl_s=10.0, clock=clock)
    await models.get()
    await models.get()
    assert server.fetches == 1
    models.forget()
    await models.get()
    assert server.fetches == 2, "forgotten: fetched again although the TTL has not passed"


async def test_a_failed_fetch_is_not_kept() -> None:
    clock, server = Clock(), Server("llama3.2")
    models = ModelList(server.fetch, ttl_s=10.0, clock=clock)
    server.fail = True
    with pytest.raises(LLMUnavailable):
        await models.get()
    server.fail = False
    assert await models.get() == ["llama3.2"] and server.fetches == 2

"""coalesced: a burst becomes one delta, a slow stream stays token by token, failures and closing pass through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from ragsvc.domain import GenerationDelta, Usage
from ragsvc.errors import LLMUnavailable
from ragsvc.generation.coalesce import coalesced
from tests.support.streams import collect_into


async def _burst(texts: list[str], usage: Usage | None = None) -> AsyncIterator[GenerationDelta]:
    for text in texts:
        yield GenerationDelta(text=text)
    if usage is not None:
        yield GenerationDelta(usage=usage)


async def test_a_burst_arriving_together_is_one_delta_with_the_usage() -> None:
    usage = Usage(prompt_tokens=10, completion_tokens=3)
    deltas = [d async for d in coalesced(_burst(["a", "b", "c"], usage))]
    assert deltas == [GenerationDelta(text="abc", usage=usage)]


async def test_tokens_arriving_slower_than_they_are_consumed_stay_separate() -> None:
    async def slow() -> AsyncIterator[GenerationDelta]:
        for text in ("a", "b", "c"):
            await asyncio.sleep(0.01)
            yield GenerationDelta(text=text)

    assert [d.text async for d in coalesced(slow())] == ["a", "b", "c"]


async def test_a_consumer_busy_for_a_while_gets_what_arrived_meanwhile_at_once() -> None:
    async def steady() -> AsyncIterator[GenerationDelta]:
        for n in range(6):
            await asyncio.sleep(0.005)
            yield GenerationDelta(text=str(n))

    received = []
    async for delta in coalesced(steady()):
        received.append(delta.text)
        await asyncio.sleep(0.02)  # a slow client: several tokens arrive while it is busy
    assert "".join(received) == "012345"
    assert len(received) < 6


async def test_a_failure_comes_after_the_text_that_preceded_it() -> None:
    async def failing() -> AsyncIterator[GenerationDelta]:
        yield GenerationDelta(text="partial")
        raise LLMUnavailable("the model runner crashed")

    received: list[GenerationDelta] = []
    with pytest.raises(LLMUnavailable):
        await collect_into(received, coalesced(failing()))
    assert [delta.text for delta in received] == ["partial"]


async def test_closing_the_merged_stream_closes_the_source_at_once() -> None:
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[GenerationDelta]:
        try:
            while True:
                yield GenerationDelta(text="x")
                await asyncio.sleep(0.01)
        finally:
            closed.set()

    stream = coalesced(endless())
    assert (await anext(stream)).text
    await stream.aclose()
    assert closed.is_set()


async def test_cancelling_the_consumer_closes_the_source() -> None:
    closed = asyncio.Event()

    async def stalled() -> AsyncIterator[GenerationDelta]:
        try:
            yield GenerationDelta(text="x")
            await asyncio.Event().wait()
        finally:
            closed.set()

    async def consume() -> None:
        async for _ in coalesced(stalled()):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()

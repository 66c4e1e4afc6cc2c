"""Merging the deltas of a generator that arrive faster than they are consumed.

`coalesced(stream)` reads `stream` in a task of its own and, each time its consumer asks, yields everything
that arrived since the previous time as one delta. A model streaming slower than ragsvc forwards (any real
one) still goes through token by token; a burst (tokens that arrived together) costs one trip down the
pipeline and one gRPC message instead of one per token. A failure is raised after the text that preceded it.
Closing the merged stream, or cancelling its consumer, cancels the reading task, which closes `stream`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

from ragsvc.domain import GenerationDelta

_END = GenerationDelta()  # the reader's last item (compared by identity)


async def coalesced(stream: AsyncIterator[GenerationDelta]) -> AsyncGenerator[GenerationDelta, None]:
    arrived: asyncio.Queue[GenerationDelta] = asyncio.Queue()

    async def read() -> None:
        try:
            async for delta in stream:
                arrived.put_nowait(delta)
        finally:
            arrived.put_nowait(_END)

    reader = asyncio.create_task(read())
    try:
        while True:
            batch = [await arrived.get()]
            while not arrived.empty():
                batch.append(arrived.get_nowait())
            deltas = [delta for delta in batch if delta is not _END]
            if deltas:
                yield _merged(deltas)
            if batch[-1] is _END:
                await reader  # raises what ended the stream, when it failed
                return
    finally:
        if not reader.done():
            reader.cancel()
            await asyncio.wait([reader])
        if not reader.cancelled():
            reader.exception()  # retrieved: it was raised above, or a later failure is moot


def _merged(deltas: list[GenerationDelta]) -> GenerationDelta:
    if len(deltas) == 1:
        return deltas[0]
    usage = next((delta.usage for delta in reversed(deltas) if delta.usage is not None), None)
    return GenerationDelta(text="".join(delta.text for delta in deltas), usage=usage)

"""`ragsvc reindex`: rewrite the stored index terms and chunk readings of the store `ragsvc serve` opens with this
version's analyser, while no server runs on it (see `retrieval.stored_terms`).

It opens the store as the server does, with the same settings: the embedded engine's shard under RAG_DATA_DIR
(taking its lock, which one process holds at a time, so with a server running it stops with the server's own
message), or the Qdrant collection of RAG_QDRANT_URL (no lock there: stop every replica first).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import TextIO

from ragsvc.config import Settings
from ragsvc.reading.text import ANALYSER_VERSION
from ragsvc.retrieval.base import Embedder
from ragsvc.retrieval.layout import REINDEX_COMMAND
from ragsvc.retrieval.stored_terms import PAGE_SIZE, Rewrite, rewrite_terms
from ragsvc.server.components import engine_location, open_embedder, open_engine

__all__ = ["reindex"]


async def reindex(
    settings: Settings, *, page_size: int | None = None, out: TextIO = sys.stdout, embedder: Embedder | None = None
) -> Rewrite:
    """Rewrite every chunk's terms and reading, `page_size` chunks at a time (None: PAGE_SIZE), reporting progress and counts
    on `out`; `embedder` as in `open_components` (it is opened only to find the store: nothing is embedded)."""
    async with contextlib.AsyncExitStack() as stack:
        injected = embedder is not None
        if embedder is None:
            embedder = await open_embedder(settings)
            stack.push_async_callback(embedder.aclose)
        engine = await open_engine(settings, embedder, injected=injected)
        stack.push_async_callback(engine.close)
        where = engine_location(settings, embedder, injected=injected)
        print(f"rewriting the index terms and readings in {where} with analyser version {ANALYSER_VERSION}", file=out, flush=True)

        def progress(read: int, rewritten: int, total: int) -> None:
            print(f"  {read} of {total} chunks read, {rewritten} rewritten", file=out, flush=True)

        try:
            done = await rewrite_terms(engine, page_size=page_size or PAGE_SIZE, progress=progress)
        except asyncio.CancelledError:
            print(f"interrupted: the index keeps its analyser version, so `ragsvc serve` still refuses it; run "
                  f"`{REINDEX_COMMAND}` again to finish", file=out, flush=True)  # fmt: skip
            raise
        print(f"done: {done.chunks} chunks read, {done.rewritten} rewritten; the index's analyser version was "
              f"{done.version_before} and is {done.version}", file=out, flush=True)  # fmt: skip
        return done

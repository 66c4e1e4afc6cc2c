"""ragsvc serving the peer benchmark's job: `ragsvc serve` (same settings from the environment, same logging) with
the token-hashing embedder every variant uses, plugged in through ragsvc's Embedder interface."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from bench.peers.common import HashingEmbedder
from ragsvc.config import Settings
from ragsvc.server.workers import serve_processes


class HashingEmbedderAdapter:
    """`common.HashingEmbedder` as a ragsvc `Embedder` (it is fast enough to run on the event loop)."""

    def __init__(self) -> None:
        self._embedder = HashingEmbedder()

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embedder.embed_many(texts)

    async def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed(text)

    async def check_health(self) -> None:
        """In-process and pure: always healthy."""

    async def aclose(self) -> None:
        pass


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve_processes(Settings.from_env(), embedder=HashingEmbedderAdapter()))

"""RagServer.start with an embedder of the caller's own, and the stage timings it reports; `serve` freezes what
start-up allocated."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from ragsvc.server.app import serve
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.http_server import hashed_embedding
from tests.support.servers import connected, running_server, server_settings


class CountingEmbedder:
    """A program's own embedder: bag-of-words vectors, counting what it was asked."""

    dimension = 64

    def __init__(self) -> None:
        self.documents = 0
        self.queries = 0
        self.health_checks = 0
        self.closed = False

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents += len(texts)
        return [hashed_embedding(text, self.dimension) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        self.queries += 1
        return hashed_embedding(text, self.dimension)

    async def check_health(self) -> None:
        self.health_checks += 1

    async def aclose(self) -> None:
        self.closed = True


async def test_a_given_embedder_embeds_the_corpus_and_the_questions(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    async with running_server(tmp_path, embedder=embedder, score_gate=0.0, min_similarity=0.0) as server:
        assert embedder.documents > 0, "the demo corpus was indexed with it"
        assert embedder.health_checks >= 1, "the health monitor probes it (the `embedder` health name)"
        async with connected(server) as stubs:
            answer = (await stubs.rag.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)).answer
        assert embedder.queries == 1
        assert answer.citations and answer.grounded
        timings = answer.timings
        assert 0 < timings.embedding.ToNanoseconds() <= timings.retrieval.ToNanoseconds()
        assert timings.validation.ToNanoseconds() > 0
        assert timings.total.ToNanoseconds() >= (
            timings.retrieval.ToNanoseconds() + timings.budget.ToNanoseconds() + timings.generation.ToNanoseconds()
        )
    assert not embedder.closed, "an embedder the caller gave stays the caller's to close"


async def test_serve_freezes_what_start_up_allocated_before_it_serves(tmp_path: Path) -> None:
    frozen_when_serving: list[int] = []

    def on_serving(port: int) -> None:
        frozen_when_serving.append(gc.get_freeze_count())
        # SIGTERM once serve() listens for it (it installs its handlers right after this call)
        asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGTERM)

    try:
        assert await serve(server_settings(tmp_path, demo_corpus=False), on_serving=on_serving) == 0
    finally:
        gc.unfreeze()  # this test process goes on: its later garbage must stay collectable
    assert frozen_when_serving and frozen_when_serving[0] > 10_000, "start-up's objects are frozen"

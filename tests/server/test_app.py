"""RagServer.start with an embedder of the caller's own, and the stage timings it reports."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

from ragsvc.config import Settings
from ragsvc.server.app import RagServer
from tests.support.http_server import hashed_embedding


class CountingEmbedder:
    """A program's own embedder: bag-of-words vectors, counting what it was asked."""

    dimension = 64

    def __init__(self) -> None:
        self.documents = 0
        self.queries = 0
        self.closed = False

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents += len(texts)
        return [hashed_embedding(text, self.dimension) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        self.queries += 1
        return hashed_embedding(text, self.dimension)

    async def aclose(self) -> None:
        self.closed = True


async def test_a_given_embedder_embeds_the_corpus_and_the_questions(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    settings = Settings(grpc_address="127.0.0.1:0", data_dir=tmp_path, score_gate=0.0, min_similarity=0.0,
                        cache_max_entries=0, rate_limit_per_minute=0)  # fmt: skip
    server = await RagServer.start(settings, embedder=embedder)
    try:
        assert embedder.documents > 0, "the demo corpus was indexed with it"
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = rag_service_pb2_grpc.RagServiceStub(channel)
            answer = (await stub.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)).answer
        assert embedder.queries == 1
        assert answer.citations and answer.grounded
        timings = answer.timings
        assert 0 < timings.embedding.ToNanoseconds() <= timings.retrieval.ToNanoseconds()
        assert timings.validation.ToNanoseconds() > 0
        assert timings.total.ToNanoseconds() >= (timings.retrieval.ToNanoseconds() + timings.budget.ToNanoseconds()
                                                 + timings.generation.ToNanoseconds())  # fmt: skip
    finally:
        await server.stop()
    assert embedder.closed, "the server owns the embedder it was given"

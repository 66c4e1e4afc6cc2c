"""The HTTP embedders against scripted Ollama and OpenAI-compatible servers on real sockets."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import numpy as np
import pytest

from ragsvc.config import RetrievalSettings, Settings
from ragsvc.domain import Chunk, RetrievalQuery
from ragsvc.errors import EmbeddingFailed
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.http_embedders import OllamaEmbedder, OpenAIEmbedder
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.server.components import open_components
from tests.retrieval.conftest import store
from tests.support.http_server import Fault, hashed_embedding
from tests.support.ollama_server import ScriptedOllamaServer
from tests.support.openai_server import ScriptedOpenAIServer

TEXTS = [f"document number {i} about topic {i % 3}" for i in range(10)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_ollama_embeds_in_batches_in_order_with_unit_vectors() -> None:
    async with ScriptedOllamaServer() as server:
        embedder = OllamaEmbedder(server.base_url, model="nomic-embed-text", batch_size=4)
        try:
            vectors = await embedder.embed_documents(TEXTS)
            query = await embedder.embed_query("topic 1")
        finally:
            await embedder.aclose()

    embeds = [r for r in server.requests if r.path == "/api/embed"]
    assert [len(r.body["input"]) for r in embeds] == [4, 4, 2, 1]
    assert embeds[0].body["model"] == "nomic-embed-text" and embeds[0].body["truncate"] is True
    assert embedder.dimension == 64
    assert np.allclose(vectors, [hashed_embedding(t) for t in TEXTS])
    assert all(math.isclose(float(np.linalg.norm(v)), 1.0, abs_tol=1e-6) for v in [*vectors, query])


async def test_openai_embeddings_go_to_the_v1_api_with_the_key() -> None:
    async with ScriptedOpenAIServer() as server:
        embedder = OpenAIEmbedder(server.base_url, model="text-embedding-3-small", api_key="sk-test", batch_size=64)
        try:
            assert await embedder.probe() == 64
            vectors = await embedder.embed_documents(TEXTS)
        finally:
            await embedder.aclose()

    requests = [r for r in server.requests if r.path == "/v1/embeddings"]
    assert len(requests) == 2  # the probe, then one batch
    assert requests[1].body == {"model": "text-embedding-3-small", "input": TEXTS, "encoding_format": "float"}
    assert requests[1].headers["authorization"] == "Bearer sk-test"
    assert np.allclose(vectors, [hashed_embedding(t) for t in TEXTS])


async def test_openai_vectors_are_put_back_in_input_order() -> None:
    async with ScriptedOpenAIServer() as server:
        embedder = OpenAIEmbedder(server.base_url, model="text-embedding-3-small")
        original = server._embeddings

        async def reversed_order(request, writer):  # type: ignore[no-untyped-def]
            # Answer with the items in reverse; their "index" fields still tell the order.
            texts = request.body["input"]
            data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(t)} for i, t in enumerate(texts)]
            from tests.support.http_server import _send_json

            await _send_json(writer, 200, {"object": "list", "data": data[::-1], "model": "m", "usage": {}})

        server._embeddings = reversed_order  # type: ignore[method-assign]
        try:
            vectors = await embedder.embed_documents(TEXTS[:3])
        finally:
            server._embeddings = original  # type: ignore[method-assign]
            await embedder.aclose()

    assert np.allclose(vectors, [hashed_embedding(t) for t in TEXTS[:3]])


@pytest.mark.parametrize("kind", ["ollama", "openai"])
async def test_every_failure_is_embedding_failed(kind: str) -> None:
    server_type, embedder_type, model = (
        (ScriptedOllamaServer, OllamaEmbedder, "nomic-embed-text")
        if kind == "ollama"
        else (ScriptedOpenAIServer, OpenAIEmbedder, "text-embedding-3-small")
    )
    async with server_type() as server:
        unknown = embedder_type(server.base_url, model="no-such-model")
        wrong_size = embedder_type(server.base_url, model=model, dimension=384)
        timing_out = embedder_type(server.base_url, model=model, timeout_s=0.2, retry_delays_s=(0.01, 0.02))
        try:
            with pytest.raises(EmbeddingFailed, match=r"404.*(not found|does not exist)"):
                await unknown.embed_query("x")
            with pytest.raises(EmbeddingFailed, match="64 dimensions, expected 384"):
                await wrong_size.embed_query("x")
            server.fault = Fault.GARBAGE
            with pytest.raises(EmbeddingFailed, match="not JSON"):
                await timing_out.embed_query("x")
            server.fault = Fault.STALL
            with pytest.raises(EmbeddingFailed, match="failed"):
                await timing_out.embed_query("x")
            server.fault = None
            server.status = 503
            before = len(server.requests)
            with pytest.raises(EmbeddingFailed, match="503") as caught:
                await timing_out.embed_query("x")
            assert len(server.requests) - before == 3  # retried twice
            assert caught.value.reason == "EMBEDDING_FAILED"
        finally:
            for embedder in (unknown, wrong_size, timing_out):
                await embedder.aclose()

    refused = embedder_type(f"http://127.0.0.1:{free_port()}", model=model, retry_delays_s=(0.01,))
    try:
        with pytest.raises(EmbeddingFailed, match="failed"):
            await refused.embed_documents(["x"])
    finally:
        await refused.aclose()


async def test_a_served_embedder_drives_retrieval_end_to_end(tmp_path: Path) -> None:
    async with ScriptedOllamaServer() as server:
        embedder = OllamaEmbedder(server.base_url, model="nomic-embed-text")
        engine = EdgeEngine.open(tmp_path / "shard", dimension=await embedder.probe())
        try:
            await store(
                engine,
                embedder,
                [  # type: ignore[arg-type]
                    Chunk("refunds", 0, "refunds of annual plans within fourteen days", tenant_id="acme"),
                    Chunk("backups", 0, "nightly backups of the storage cluster", tenant_id="acme"),
                ],
            )
            retriever = HybridRetriever(embedder, engine, RetrievalSettings(min_similarity=0.3))
            result = await retriever.retrieve(RetrievalQuery("backups of the cluster", tenant_id="acme"))
        finally:
            await engine.close()
            await embedder.aclose()

    assert [h.chunk.document_id for h in result.hits] == ["backups"]


async def test_settings_choose_the_served_embedder_and_its_own_shard(tmp_path: Path) -> None:
    async with ScriptedOllamaServer() as server:
        settings = Settings.of(data_dir=tmp_path, demo_corpus=False, embedder="ollama", ollama_base_url=server.base_url)
        async with open_components(settings) as components:
            assert isinstance(components.embedder, OllamaEmbedder)
            assert components.embedder.dimension == 64  # asked at start: EMBEDDING_DIMENSION is 0
            assert (tmp_path / "qdrant-edge-ollama-nomic-embed-text-64").is_dir()
        assert [r.path for r in server.requests] == ["/api/embed"]

    with pytest.raises(EmbeddingFailed):  # no server: the start fails
        async with open_components(
            Settings.of(data_dir=tmp_path, embedder="openai", embedding_base_url=f"http://127.0.0.1:{free_port()}/v1")
        ):
            pass
